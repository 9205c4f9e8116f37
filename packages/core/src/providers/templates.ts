import { importPKCS8 } from 'jose';
import type { z } from 'zod';
import { discoverOrThrow } from '../discovery/index.js';
import type { OutboundFetch } from '../outbound/fetch.js';
import type { VaultKey, VaultWrite } from '../storage/record-types.js';
import {
  type AuthorizationServerInfo,
  AuthorizationServerInfoSchema,
  type OAuth2Quirks,
  OAuth2QuirksSchema,
  type ProviderState,
  type StoredRegistration,
} from '../storage/states.js';
import type { Vault } from '../vault/vault.js';
import { invalid } from './client.js';
import { identityProviderWrite } from './identity-provider.js';
import { customRegistration, type ProviderSpec, type SecretBinding } from './input.js';
import { CLIENT_SECRET_KIND, IDP_SECRET_KIND, registrationUsable, secretKey } from './state.js';

/*
 * What each template makes of a provider's input (docs/api.md §4). `mcp`: the endpoints
 * come from discovery, the client is registered or the operator's. `oauth2` (§15): a
 * classic OAuth 2 API, whose endpoints come from its profile (or its configuration), and
 * whose client is always the operator's. Both store the same shape — an authorization
 * server, a client at it, the configuration; `oauth2` adds its quirks — so every flow after
 * this point is the same for both templates.
 */

/** What a write of a provider stores: its next state and the vault changes with it. */
export interface ProviderWrite {
  state: ProviderState;
  puts: VaultWrite[];
  deletes: VaultKey[];
}

/**
 * The state of an `oauth2` provider as a PUT makes it, no request sent: the client secret
 * sealed (or kept, for the same client id), the profile's endpoints as its server.
 */
export async function oauth2Write(
  providerId: string,
  spec: ProviderSpec & { oauth2: NonNullable<ProviderSpec['oauth2']>; clientId: string },
  previous: ProviderState | null,
  declared: boolean,
  vault: Vault,
): Promise<ProviderWrite> {
  const { server, quirks } = spec.oauth2;
  const client = await customClient(
    providerId,
    spec,
    previous,
    server,
    vault,
    oauth2Binding(spec.oauth2, previous),
  );
  return {
    state: {
      label: spec.label ?? previous?.label ?? providerId,
      template: 'oauth2',
      oauth2: quirks,
      ...(spec.handOut ? {} : { hand_out: false }),
      configuration: {
        scopes: spec.configuredScopes,
        ...(spec.authorizationParams && { authorization_params: spec.authorizationParams }),
        ...(spec.tokenParams && { token_params: spec.tokenParams }),
      },
      mode: 'custom',
      resource: null,
      authorization_server: server,
      challenge_scope: null,
      registrations: { ...(previous?.registrations ?? {}), [server.issuer]: client.registration },
      declared,
      last_party_change: previous?.last_party_change ?? null,
    },
    puts: client.puts,
    deletes: client.deletes,
  };
}

/**
 * Where an `oauth2` provider's client secret goes: the endpoints of its body or profile, the
 * stored provider's when the registration predates the record of them, and which field of
 * the body names each. (An `mcp` provider's endpoints are its issuer's own metadata, whose
 * `issuer` must equal the server's URL, RFC 8414 §3.3: its secret is bound to that issuer.)
 */
function oauth2Binding(
  resolved: NonNullable<ProviderSpec['oauth2']>,
  previous: ProviderState | null,
): SecretBinding {
  const endpointsOf = (server: AuthorizationServerInfo, quirks: OAuth2Quirks | undefined) => ({
    token_endpoint: server.token_endpoint,
    revocation_endpoint: server.revocation_endpoint,
    refresh_endpoint: quirks?.refresh_endpoint ?? null,
  });
  const { server, quirks } = resolved;
  const profile = quirks.profile;
  const sameIssuer = previous?.authorization_server.issuer === server.issuer;
  return {
    now: endpointsOf(server, quirks),
    bound:
      previous?.template === 'oauth2' && sameIssuer
        ? endpointsOf(previous.authorization_server, previous.oauth2)
        : undefined,
    fields: {
      field: (name) =>
        profile === null
          ? `configuration.${name === 'refresh_endpoint' ? 'token_endpoint' : name}`
          : previous?.oauth2?.profile === profile
            ? 'configuration.params'
            : 'profile',
      secret: 'credentials.client_secret',
    },
  };
}

/**
 * The operator's client at a server (mode `custom`): its secret sealed, or kept when the
 * input leaves it out for the same client id (and, with a `binding`, the same endpoints),
 * or deleted.
 *
 * @throws {KeywayError} `invalid_request` naming an endpoint moved without the secret.
 */
export async function customClient(
  providerId: string,
  spec: Pick<ProviderSpec, 'clientSecret' | 'callback' | 'privateKey'> & {
    clientId: string;
    authMethod?: ProviderSpec['authMethod'];
  },
  previous: ProviderState | null,
  server: AuthorizationServerInfo,
  vault: Vault,
  binding?: SecretBinding,
): Promise<{ registration: StoredRegistration; puts: VaultWrite[]; deletes: VaultKey[] }> {
  const before = previous?.mode === 'custom' ? previous.registrations[server.issuer] : undefined;
  const registration = customRegistration(spec, before, server, binding);
  const key = { kind: CLIENT_SECRET_KIND, key: secretKey(providerId, server.issuer) };
  // A private key takes the secret's place in the vault; it must be one the algorithm signs with.
  const secret =
    spec.privateKey === undefined ? spec.clientSecret : await checkedKey(spec.privateKey);
  if (secret !== undefined)
    return { registration, puts: [await vault.seal(key, secret)], deletes: [] };
  return { registration, puts: [], deletes: registration.client_secret_set ? [] : [key] };
}

/**
 * A `private_key_jwt` client's key (PKCS #8 PEM), as given, once it imports for its algorithm.
 *
 * @throws {KeywayError} `invalid_request` naming `credentials.private_key`.
 */
async function checkedKey(key: NonNullable<ProviderSpec['privateKey']>): Promise<string> {
  try {
    await importPKCS8(key.pem, key.algorithm);
  } catch {
    throw invalid(
      'credentials.private_key',
      `"private_key" is not a PKCS #8 PEM private key for ${key.algorithm} ("signing_algorithm")`,
    );
  }
  return key.pem;
}

/**
 * What a declaration sets directly, as stored: compared as JSON with {@link wantedSettings},
 * which builds the same fields in the same order.
 */
function storedSettings(stored: ProviderState) {
  return {
    hand_out: stored.hand_out !== false,
    dpop: stored.dpop === true,
    scopes: stored.configuration.scopes,
    authorization_params: stored.configuration.authorization_params ?? null,
    token_params: stored.configuration.token_params ?? null,
    pkce: stored.configuration.pkce ?? null,
    assertion: assertionOf(stored.assertion),
    identity_provider: identityProviderOf(stored.identity_provider),
  };
}

/**
 * {@link storedSettings} of a declaration (an identity provider's token endpoint that the
 * declaration leaves to the issuer's metadata is the stored one).
 */
function wantedSettings(wanted: ProviderSpec, stored: ProviderState) {
  const idp = wanted.identityProvider;
  return {
    hand_out: wanted.handOut,
    dpop: wanted.dpop,
    scopes: wanted.configuredScopes,
    authorization_params: wanted.authorizationParams ?? null,
    token_params: wanted.tokenParams ?? null,
    pkce: wanted.pkce ?? null,
    assertion: assertionOf(wanted.assertion),
    identity_provider: identityProviderOf(
      idp === undefined
        ? undefined
        : {
            ...idp,
            token_endpoint: idp.token_endpoint ?? stored.identity_provider?.token_endpoint ?? '',
          },
    ),
  };
}

/** What a declaration sets of an assertion source (who wrote it is not part of it). */
function assertionOf(ref: { source: string; file?: string } | undefined) {
  return ref === undefined ? null : { source: ref.source, file: ref.file ?? null };
}

/** What a declaration sets of an identity provider (its secret is sealed apart). */
function identityProviderOf(
  idp: { issuer: string; token_endpoint: string; client_id: string } | undefined,
) {
  return idp === undefined
    ? null
    : { issuer: idp.issuer, token_endpoint: idp.token_endpoint, client_id: idp.client_id };
}

/**
 * Whether a provider declared in code is stored as declared: its template, endpoints,
 * quirks and client unchanged (`mcp`: its resource URL, mode and client id), and what it
 * sets directly — label, `hand_out`, `dpop`, scopes, parameters, PKCE, assertion source,
 * identity provider. Otherwise it is written again. (A changed client secret alone is not
 * seen: it is sealed; the operator changes the client id with it, or deletes the provider.)
 */
export function declaredUnchanged(stored: ProviderState, wanted: ProviderSpec): boolean {
  if (wanted.label !== undefined && wanted.label !== stored.label) return false;
  if (JSON.stringify(storedSettings(stored)) !== JSON.stringify(wantedSettings(wanted, stored))) {
    return false;
  }
  if (wanted.oauth2 === undefined) {
    const client = stored.registrations[stored.authorization_server.issuer]?.client_id;
    return (
      stored.template === undefined &&
      stored.configuration.resource_url === wanted.resourceUrl &&
      (stored.grant ?? stored.mode) === wanted.mode &&
      (wanted.mode === 'register' || client === wanted.clientId)
    );
  }
  const { server, quirks } = wanted.oauth2;
  // Both through their schemas: the same fields in the same order.
  const same = (schema: z.ZodType, a: unknown, b: unknown) =>
    JSON.stringify(schema.parse(a)) === JSON.stringify(schema.parse(b));
  return (
    stored.template === 'oauth2' &&
    same(AuthorizationServerInfoSchema, stored.authorization_server, server) &&
    same(OAuth2QuirksSchema, stored.oauth2, quirks) &&
    stored.registrations[server.issuer]?.client_id === wanted.clientId
  );
}

/** What an `mcp` provider's write needs from the registry. */
export interface McpWriteDeps {
  outbound: OutboundFetch;
  allowedHosts: readonly string[];
  now: number;
  vault: Vault;
  /** Registers a client at a server, with the vault writes of its secrets. */
  register: (
    server: AuthorizationServerInfo,
  ) => Promise<{ registration: StoredRegistration; puts: VaultWrite[]; deletes: VaultKey[] }>;
}

/**
 * An `mcp` provider's next state: its resource discovered (docs/api.md §6), its client the
 * operator's (`custom`) or registered when none can be reused (`register`).
 */
export async function mcpWrite(
  deps: McpWriteDeps,
  providerId: string,
  spec: ProviderSpec,
  previous: ProviderState | null,
  declared: boolean,
): Promise<ProviderWrite> {
  const resourceUrl = spec.resourceUrl ?? '';
  const discovery = await discoverOrThrow(deps.outbound, resourceUrl, {
    scopes: spec.configuredScopes,
    allowedHosts: deps.allowedHosts,
    providerId,
    ...(spec.pkce === undefined ? {} : { pkce: spec.pkce }),
    ...(spec.mode === 'register' || spec.mode === 'custom' ? {} : { grant: spec.mode }),
  });
  const issuer = discovery.authorization_server.issuer;
  const algorithms = discovery.authorization_server.dpop_signing_alg_values_supported;
  if (spec.dpop && algorithms !== null && algorithms !== undefined && !algorithms.includes('ES256'))
    throw invalid(
      'dpop',
      `the authorization server takes DPoP proofs signed with ${algorithms.join(', ') || 'nothing'}, not ES256, the ` +
        `one Keyway signs with`,
    );
  const { now, vault } = deps;
  const puts: VaultWrite[] = [];
  const deletes: VaultKey[] = [];
  const registrations: ProviderState['registrations'] = { ...(previous?.registrations ?? {}) };

  if (spec.mode !== 'register' && spec.clientId !== undefined) {
    const custom = await customClient(
      providerId,
      { ...spec, clientId: spec.clientId },
      previous,
      discovery.authorization_server,
      vault,
    );
    puts.push(...custom.puts);
    deletes.push(...custom.deletes);
    registrations[issuer] = custom.registration;
  } else {
    const before = previous?.mode === 'register' ? previous.registrations[issuer] : undefined;
    const reusable =
      before !== undefined &&
      previous?.configuration.resource_url === resourceUrl &&
      JSON.stringify(previous.client_metadata ?? null) ===
        JSON.stringify(spec.clientMetadata ?? null) &&
      registrationUsable(before, now);
    if (!reusable) {
      const registered = await deps.register(discovery.authorization_server);
      puts.push(...registered.puts);
      deletes.push(...registered.deletes);
      registrations[issuer] = registered.registration;
    }
  }

  const idp = await identityProviderWrite(deps, providerId, spec, previous);
  if (idp !== undefined) {
    puts.push(...idp.puts);
    deletes.push(...idp.deletes);
  }
  // A secret at an identity provider the provider no longer uses goes with it.
  const formerIdp = previous?.identity_provider?.issuer;
  if (formerIdp !== undefined && formerIdp !== idp?.state.issuer)
    deletes.push({ kind: IDP_SECRET_KIND, key: secretKey(providerId, formerIdp) });

  const state: ProviderState = {
    label: spec.label ?? previous?.label ?? providerId,
    ...(spec.handOut ? {} : { hand_out: false }),
    ...(spec.dpop ? { dpop: true } : {}),
    configuration: {
      resource_url: resourceUrl,
      scopes: spec.configuredScopes,
      ...(spec.authorizationParams && { authorization_params: spec.authorizationParams }),
      ...(spec.tokenParams === undefined ? {} : { token_params: spec.tokenParams }),
      ...(spec.pkce === undefined ? {} : { pkce: spec.pkce }),
    },
    mode: spec.mode === 'register' ? 'register' : 'custom',
    ...(spec.mode === 'register' || spec.mode === 'custom' ? {} : { grant: spec.mode }),
    ...(spec.assertion === undefined ? {} : { assertion: spec.assertion }),
    ...(spec.clientMetadata === undefined ? {} : { client_metadata: spec.clientMetadata }),
    ...(spec.mcpProfile === undefined ? {} : { profile: spec.mcpProfile }),
    ...(idp === undefined ? {} : { identity_provider: idp.state }),
    resource: discovery.resource,
    authorization_server: discovery.authorization_server,
    challenge_scope: discovery.challenge_scope,
    registrations,
    declared,
    last_party_change: previous?.last_party_change ?? null,
    ...(discovery.legacy ? { legacy: true } : {}),
  };
  return { state, puts, deletes };
}
