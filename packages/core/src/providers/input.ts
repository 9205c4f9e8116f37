import type { z } from 'zod';
import { type McpProfile, mcpCatalog } from '../catalog/mcp-profiles.js';
import {
  type EndpointCheck,
  explicitProfile,
  ProfileProblem,
  type ResolvedProfile,
  reservedParam,
  resolveProfile,
} from '../catalog/resolve.js';
import type { Profile } from '../catalog/schema.js';
import {
  type ClientMetadataBody,
  type OAuth2ProviderInput,
  ProviderBody,
  type ProviderInput,
  type SIGNING_ALGORITHMS,
} from '../contract/schemas.js';
import { parseShape } from '../contract/validation.js';
import type { AuthorizationServerInfo, StoredRegistration } from '../storage/states.js';
import { ASSERTION_FILE } from './assertion-sources.js';
import { invalid } from './client.js';
import { type ClientMetadata, customAuthMethod } from './registration.js';
import { type EndpointFields, movedSecret, type SecretEndpoints } from './secret-binding.js';

/**
 * Checks a provider's extra parameters (already shaped by the schema): none may be one
 * Keyway sends itself ({@link reservedParam}).
 *
 * @throws {KeywayError} `invalid_request` naming the parameter.
 */
function checkExtraParams(
  field: string,
  params: Record<string, string> | undefined,
): Record<string, string> | undefined {
  if (params === undefined) return undefined;
  for (const name of Object.keys(params)) {
    if (reservedParam(name)) {
      throw invalid(
        `${field}.${name}`,
        `"${field}" cannot set ${JSON.stringify(name)}: Keyway sends that parameter itself`,
      );
    }
  }
  return Object.keys(params).length === 0 ? undefined : { ...params };
}

type SigningAlgorithm = (typeof SIGNING_ALGORITHMS)[number];

/** A provider's input, checked: what a write of it needs, before any request is sent. */
export interface ProviderSpec {
  label: string | undefined;
  /** `false`: inject-only (docs/api.md §13). */
  handOut: boolean;
  /** DPoP-bound tokens even where the server does not advertise DPoP (docs/api.md §14). */
  dpop: boolean;
  /** `mcp`: the MCP endpoint, as `checkUrl` answered it. */
  resourceUrl: string | undefined;
  /** `oauth2`: the endpoints and quirks of its profile, resolved. */
  oauth2: ResolvedProfile | undefined;
  configuredScopes: string[];
  authorizationParams: Record<string, string> | undefined;
  tokenParams: Record<string, string> | undefined;
  pkce: 'assume_s256' | undefined;
  mode: 'register' | 'custom' | 'client_credentials' | 'jwt_bearer' | 'enterprise';
  /** Mode `enterprise`: the identity provider, its endpoint checked, its secret if any. */
  identityProvider:
    | {
        issuer: string;
        /** As given; absent where the issuer's metadata is to name it. */
        token_endpoint: string | undefined;
        client_id: string;
        client_secret?: string;
      }
    | undefined;
  /** Mode `jwt_bearer`: the configured source its assertions are read from. */
  assertion: { source: string; file?: string; root?: boolean } | undefined;
  clientId: string | undefined;
  clientSecret: string | undefined;
  /** Mode `client_credentials` with `private_key_jwt`: the key (PEM) and its algorithm. */
  privateKey: { pem: string; algorithm: SigningAlgorithm } | undefined;
  callback: StoredRegistration['callback'] | undefined;
  /** Mode `register`: what dynamic registration sends in place of Keyway's defaults. */
  clientMetadata: ClientMetadata | undefined;
  /** Mode `custom`: the token-endpoint authentication, whatever the server lists. */
  authMethod: 'client_secret_basic' | 'client_secret_post' | undefined;
  /** `mcp`: the catalog profile it was written from (docs/servers.md). */
  mcpProfile?: string | undefined;
  /** The method its profile documents, for a client with a secret that names none. */
  profileAuthMethod?: 'client_secret_basic' | 'client_secret_post' | undefined;
}

/** The fields given, without the ones left out. */
function metadataOf(
  given: z.output<typeof ClientMetadataBody> | undefined,
): ClientMetadata | undefined {
  if (given === undefined) return undefined;
  const fields: ClientMetadata = {};
  for (const [name, value] of Object.entries(given)) if (value !== undefined) fields[name] = value;
  return Object.keys(fields).length === 0 ? undefined : fields;
}

/** The fields of an `oauth2` provider's configuration that only a profile-less one names. */
const EXPLICIT_FIELDS = [
  'authorization_endpoint',
  'token_endpoint',
  'revocation_endpoint',
  'issuer',
  'scope_separator',
  'scope_param',
  'token_response',
  'pkce',
  'token_endpoint_auth_method',
  'api_base_url',
] as const;

/**
 * The endpoints and quirks of an `oauth2` provider: its catalog profile with `params`
 * filled, or the endpoints its configuration names.
 *
 * @throws {KeywayError} `invalid_request` naming the field.
 */
function oauth2Of(
  shape: OAuth2ProviderInput,
  check: EndpointCheck,
  profiles: ReadonlyMap<string, Profile>,
): ResolvedProfile {
  const configuration = shape.configuration ?? {};
  try {
    if (shape.profile === undefined) {
      if (configuration.params !== undefined)
        throw new ProfileProblem(
          'configuration.params',
          '"params" fill a profile\'s placeholders: name a "profile"',
        );
      return explicitProfile(configuration, check);
    }
    const profile = profiles.get(shape.profile);
    if (profile === undefined) {
      throw new ProfileProblem(
        'profile',
        `no profile ${JSON.stringify(shape.profile.slice(0, 64))} in the catalog (GET /api/admin/profiles lists them)`,
      );
    }
    const named = EXPLICIT_FIELDS.find((field) => configuration[field] !== undefined);
    if (named !== undefined) {
      throw new ProfileProblem(
        `configuration.${named}`,
        `profile ${JSON.stringify(profile.id)} sets "${named}"; without a profile, name the endpoints yourself`,
      );
    }
    return resolveProfile(profile, configuration.params ?? {}, check, profile.id);
  } catch (error) {
    if (error instanceof ProfileProblem) throw invalid(error.path, error.message);
    throw error;
  }
}

/**
 * Parses a provider to create or replace (API.md §4): an `mcp` provider with its endpoint
 * checked by `checkUrl`, or an `oauth2` one with its profile resolved (endpoints checked
 * the same way); credentials that fit their mode; extra parameters that set none of
 * Keyway's own.
 *
 * @throws {KeywayError} `invalid_request` naming the field.
 */
export function parseProviderInput(
  input: ProviderInput,
  checkUrl: EndpointCheck,
  profiles: ReadonlyMap<string, Profile>,
  sources: readonly string[] = [],
): ProviderSpec {
  const shape = parseShape(ProviderBody, input);
  // DPoP is for MCP servers: the API proxy sends classic APIs Bearer tokens.
  const dpop = shape.template === 'mcp' && shape.dpop === true;
  // A DPoP-bound token is useless without its key, which never leaves the broker.
  if (dpop && shape.hand_out === true)
    throw invalid('dpop', '"dpop": true makes the provider inject-only: leave out "hand_out"');
  const common = {
    label: shape.label,
    handOut: dpop ? false : (shape.hand_out ?? true),
    dpop,
    configuredScopes: shape.configuration?.scopes ?? [],
    authorizationParams: checkExtraParams(
      'configuration.authorization_params',
      shape.configuration?.authorization_params,
    ),
    tokenParams: checkExtraParams('configuration.token_params', shape.configuration?.token_params),
    clientSecret: shape.credentials?.client_secret,
  };
  if (shape.template === 'oauth2') {
    if (shape.credentials.client_id === undefined)
      throw invalid(
        'credentials.client_id',
        'an "oauth2" provider needs the "client_id" its API issued',
      );
    return {
      ...common,
      resourceUrl: undefined,
      oauth2: oauth2Of(shape, checkUrl, profiles),
      pkce: undefined,
      mode: 'custom',
      clientId: shape.credentials.client_id,
      privateKey: undefined,
      assertion: undefined,
      identityProvider: undefined,
      callback: undefined,
      clientMetadata: undefined,
      authMethod: undefined,
    };
  }
  const profile = mcpProfileOf(shape.profile);
  const givenUrl = shape.configuration?.resource_url ?? profile?.resource_url;
  if (givenUrl === undefined)
    throw invalid(
      'configuration.resource_url',
      'an "mcp" provider needs its "resource_url" (or a "profile" that names it)',
    );
  const resourceUrl = checkUrl(givenUrl, 'configuration.resource_url');
  const mode = shape.credentials?.mode ?? profile?.credentials ?? 'register';
  const clientId = shape.credentials?.client_id;
  if (mode !== 'register' && clientId === undefined)
    throw invalid(
      'credentials.client_id',
      profile !== undefined && shape.credentials?.mode === undefined
        ? `profile ${JSON.stringify(profile.id)}: its server registers no clients itself; register an ` +
            `application with it (${profile.docs_url}) at Keyway's callback and give its "client_id" and ` +
            `"client_secret"`
        : `mode "${mode}" needs a "client_id"`,
    );
  const privateKey = privateKeyOf(mode, shape.credentials ?? {}, common.clientSecret);
  const assertion = assertionOf(mode, shape.credentials ?? {}, common.clientSecret, sources);
  const given = shape.credentials?.identity_provider;
  if ((given !== undefined) !== (mode === 'enterprise'))
    throw invalid(
      'credentials.identity_provider',
      mode === 'enterprise'
        ? 'mode "enterprise" needs the "identity_provider" that exchanges its users\' ID tokens'
        : '"identity_provider" is for mode "enterprise"',
    );
  const identityProvider =
    given === undefined
      ? undefined
      : {
          ...given,
          issuer: checkUrl(given.issuer, 'credentials.identity_provider.issuer') && given.issuer,
          token_endpoint:
            given.token_endpoint === undefined
              ? undefined
              : checkUrl(given.token_endpoint, 'credentials.identity_provider.token_endpoint'),
        };
  if (mode === 'register' && (clientId !== undefined || common.clientSecret !== undefined)) {
    throw invalid(
      'credentials',
      'mode "register" takes no client_id or client_secret; use mode "custom"',
    );
  }
  const callback = shape.credentials?.callback;
  if (mode !== 'custom' && callback !== undefined) {
    throw invalid(
      'credentials.callback',
      mode === 'register'
        ? 'mode "register" chooses the redirect URI itself; "callback" is for mode "custom"'
        : `mode "${mode}" has no redirect URI; "callback" is for mode "custom"`,
    );
  }
  const clientMetadata = shape.credentials?.client_metadata;
  if (clientMetadata !== undefined && mode !== 'register')
    throw invalid(
      'credentials.client_metadata',
      '"client_metadata" is what dynamic registration sends: it is for mode "register"',
    );
  const authMethod = shape.credentials?.token_endpoint_auth_method;
  if (authMethod !== undefined && mode !== 'custom' && mode !== 'client_credentials')
    throw invalid(
      'credentials.token_endpoint_auth_method',
      mode === 'register'
        ? 'mode "register" asks for a method in "client_metadata.token_endpoint_auth_method"'
        : `mode "${mode}" does not authenticate with a client secret`,
    );
  if (authMethod !== undefined && privateKey !== undefined)
    throw invalid(
      'credentials.token_endpoint_auth_method',
      'a client with "private_key" authenticates with private_key_jwt',
    );
  return {
    ...common,
    resourceUrl,
    oauth2: undefined,
    pkce: shape.configuration?.pkce,
    mode,
    clientId,
    privateKey,
    assertion,
    identityProvider,
    callback,
    clientMetadata: metadataOf(clientMetadata),
    authMethod,
    profileAuthMethod: profile?.token_endpoint_auth_method,
    authorizationParams:
      profile === undefined || Object.keys(profile.authorization_params).length === 0
        ? common.authorizationParams
        : { ...profile.authorization_params, ...common.authorizationParams },
    mcpProfile: profile?.id,
  };
}

/**
 * The `mcp` profile a provider names, or `undefined`.
 *
 * @throws {KeywayError} `invalid_request` naming `profile` when the catalog has none of that id.
 */
function mcpProfileOf(id: string | undefined): McpProfile | undefined {
  if (id === undefined) return undefined;
  const profile = mcpCatalog().get(id);
  if (profile === undefined)
    throw invalid(
      'profile',
      `no "mcp" profile ${JSON.stringify(id.slice(0, 64))} in the catalog (GET /api/admin/profiles lists them)`,
    );
  return profile;
}

/**
 * Where a `jwt_bearer` provider reads its assertions: a source the operator configured
 * (`createBroker({ assertionSources })`), and a file of it when it is a directory.
 *
 * @throws {KeywayError} `invalid_request` naming the field.
 */
function assertionOf(
  mode: ProviderSpec['mode'],
  credentials: { assertion_source?: string; assertion_file?: string },
  secret: string | undefined,
  sources: readonly string[],
): ProviderSpec['assertion'] {
  const { assertion_source: source, assertion_file: file } = credentials;
  if (mode !== 'jwt_bearer') {
    const given =
      source !== undefined ? 'assertion_source' : file !== undefined ? 'assertion_file' : null;
    if (given !== null)
      throw invalid(`credentials.${given}`, `"${given}" is for mode "jwt_bearer"`);
    return undefined;
  }
  if (secret !== undefined)
    throw invalid(
      'credentials.client_secret',
      'mode "jwt_bearer" authenticates with its assertion, not a secret',
    );
  if (source === undefined || !sources.includes(source)) {
    const known =
      sources.length === 0 ? 'none is configured' : `the configured ones: ${sources.join(', ')}`;
    throw invalid(
      'credentials.assertion_source',
      `mode "jwt_bearer" needs "assertion_source", one of the broker's assertion sources (${known})`,
    );
  }
  if (file !== undefined && !ASSERTION_FILE.test(file))
    throw invalid(
      'credentials.assertion_file',
      '"assertion_file" is one file name of the source\'s directory',
    );
  return { source, ...(file === undefined ? {} : { file }) };
}

/**
 * The private key of a `client_credentials` client that authenticates with
 * `private_key_jwt`, or `undefined` (a secret, or one kept from before).
 *
 * @throws {KeywayError} `invalid_request` naming the field.
 */
function privateKeyOf(
  mode: ProviderSpec['mode'],
  credentials: { private_key?: string; signing_algorithm?: SigningAlgorithm },
  secret: string | undefined,
): ProviderSpec['privateKey'] {
  const { private_key: pem, signing_algorithm: algorithm } = credentials;
  if (pem === undefined) {
    if (algorithm !== undefined)
      throw invalid('credentials.signing_algorithm', '"signing_algorithm" goes with "private_key"');
    return undefined;
  }
  if (mode !== 'client_credentials')
    throw invalid('credentials.private_key', '"private_key" is for mode "client_credentials"');
  if (secret !== undefined)
    throw invalid(
      'credentials.private_key',
      'give "client_secret" or "private_key", not both: a client authenticates one way',
    );
  return { pem, algorithm: algorithm ?? 'ES256' };
}

/**
 * Where a secret given in the body is sent (`now`), where the stored one was given for
 * (`bound`), and how the body names them: an `oauth2` provider's endpoints come from its
 * body or its profile, so a kept secret must still go where it went.
 */
export interface SecretBinding {
  now: SecretEndpoints;
  bound: SecretEndpoints | undefined;
  fields: EndpointFields;
}

/**
 * The stored registration of a `custom` client at a server: its secret kept when the
 * input leaves it out for the same client id (and, with a `binding`, the same endpoints),
 * its token-endpoint authentication chosen from what the server supports.
 *
 * @throws {KeywayError} `invalid_request` naming the endpoint that moved without the secret.
 */
export function customRegistration(
  spec: Pick<ProviderSpec, 'clientSecret' | 'callback' | 'privateKey'> & {
    clientId: string;
    authMethod?: ProviderSpec['authMethod'];
    profileAuthMethod?: ProviderSpec['profileAuthMethod'];
  },
  before: StoredRegistration | undefined,
  server: AuthorizationServerInfo,
  binding?: SecretBinding,
): StoredRegistration {
  const keepSecret =
    spec.clientSecret === undefined &&
    spec.privateKey === undefined &&
    before?.client_id === spec.clientId &&
    before?.client_secret_set === true;
  if (keepSecret && binding !== undefined) {
    const moved = movedSecret(
      before?.secret_endpoints ?? binding.bound,
      binding.now,
      binding.fields,
    );
    if (moved !== null) throw moved;
  }
  const hasSecret = spec.clientSecret !== undefined || spec.privateKey !== undefined || keepSecret;
  if (spec.authMethod !== undefined && !hasSecret)
    throw invalid(
      'credentials.token_endpoint_auth_method',
      `${spec.authMethod} needs a "client_secret": a client without one authenticates with none`,
    );
  // A key kept from before keeps its algorithm; a new one brings its own.
  const algorithm =
    spec.privateKey?.algorithm ?? (keepSecret ? before?.signing_algorithm : undefined);
  return {
    issuer: server.issuer,
    client_id: spec.clientId,
    registration: 'manual',
    token_endpoint_auth_method:
      algorithm !== undefined
        ? 'private_key_jwt'
        : (spec.authMethod ??
          (hasSecret ? spec.profileAuthMethod : undefined) ??
          customAuthMethod(server.token_endpoint_auth_methods_supported, hasSecret)),
    ...(algorithm === undefined ? {} : { signing_algorithm: algorithm }),
    client_secret_expires_at: null,
    registration_client_uri: null,
    client_secret_set: hasSecret,
    ...(binding !== undefined && hasSecret ? { secret_endpoints: binding.now } : {}),
    callback: spec.callback ?? 'shared',
  };
}
