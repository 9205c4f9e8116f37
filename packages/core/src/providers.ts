import { z } from 'zod';
import {
  type AuthorizationServerInfo,
  type DiscoveryTrace,
  discover,
  discoverAuthorizationServer,
  discoverOrThrow,
  discoverResource,
  type ResourceInfo,
  resourceMismatched,
  throwUnlessDiscovered,
} from './discovery.js';
import { KeywayError } from './errors.js';
import type { EmitEvent } from './events.js';
import { currentParty, providerKeepsParty } from './oauth-party.js';
import { normalizeHost, type OutboundFetch } from './outbound.js';
import { type ListOptions, type Page, parseListOptions, toPage } from './pagination.js';
import { actorOf, assertCoversPath, type Principal, rootPrincipal } from './principal.js';
import {
  type ClientProfile,
  type ClientRegistration,
  customAuthMethod,
  type RegisteredClient,
  registerClient,
} from './registration.js';
import { parseResourcePath } from './resource-path.js';
import { listableSubtrees } from './secrets.js';
import type {
  JsonObject,
  ProviderRecord,
  Storage,
  VaultKey,
  VaultWrite,
} from './storage/contract.js';
import { parseShape } from './validation.js';
import type { Vault } from './vault.js';

/** Vault kinds of the secrets Keyway keeps for providers. */
export const CLIENT_SECRET_KIND = 'client_secret';
export const REGISTRATION_TOKEN_KIND = 'registration_access_token';

/** The provider body of `PUT /api/admin/providers/<id>` (API.md §4), template `mcp`. */
export interface ProviderInput {
  template: 'mcp';
  label?: string;
  configuration: { resource_url: string; scopes?: string[] };
  credentials?: { mode?: 'register' | 'custom'; client_id?: string; client_secret?: string };
}

/** The provider view every provider endpoint answers with. Never a secret. */
export interface ProviderView {
  id: string;
  template: 'mcp';
  label: string;
  configuration: { resource_url: string; scopes: string[] };
  credentials: {
    mode: 'register' | 'custom';
    client_id: string;
    registration: ClientRegistration['registration'];
    token_endpoint_auth_method: ClientRegistration['token_endpoint_auth_method'];
    client_secret_set: boolean;
    client_secret_expires_at: string | null;
  };
  resource: {
    resource: string;
    resource_metadata_url: string | null;
    scopes_supported: string[] | null;
  };
  authorization_server: Pick<
    AuthorizationServerInfo,
    | 'issuer'
    | 'authorization_endpoint'
    | 'token_endpoint'
    | 'registration_endpoint'
    | 'revocation_endpoint'
    | 'scopes_supported'
  >;
  /**
   * The last time the provider moved to another authorization server or client, and how
   * many active connections that put in `error` with `reauthorization_required` (their
   * tokens belong to the previous party and are never sent to the new one); `null` when it
   * never moved.
   */
  last_party_change: {
    at: string;
    previous_issuer: string;
    previous_client_id: string;
    connections_reauthorization_required: number;
  } | null;
  created_at: string;
  updated_at: string;
}

/** What `state` of a provider record holds (JSON; secrets live in the vault). */
export interface ProviderState {
  label: string;
  configuration: { resource_url: string; scopes: string[] };
  mode: 'register' | 'custom';
  resource: ResourceInfo;
  authorization_server: AuthorizationServerInfo;
  challenge_scope: string | null;
  /** Registrations by issuer: a resource that moves to another server registers again there. */
  registrations: Record<string, StoredRegistration>;
  /** A server of the 2025-03-26 revision, without protected-resource metadata. Absent: false. */
  legacy?: boolean;
  /** Declared in code (`createBroker({ providers })`) rather than through the API. */
  declared: boolean;
  /** See {@link ProviderView.last_party_change}; times in epoch ms. Absent: never moved. */
  last_party_change?: {
    at: number;
    previous_issuer: string;
    previous_client_id: string;
    connections_reauthorization_required: number;
  } | null;
}

/** A client at one issuer as the provider keeps it (its secrets are in the vault). */
export type StoredRegistration = ClientRegistration & {
  client_secret_set: boolean;
  /**
   * The server answered `invalid_client` for this dynamically registered client: it forgot
   * it. The next authorization registers a new client first (API.md §6 item 11).
   */
  stale?: boolean;
};

/** A provider ready for use by connections: its state and the client at its current server. */
export interface ResolvedProvider {
  id: string;
  state: ProviderState;
  client: StoredRegistration;
}

const InputShape = z.strictObject({
  template: z.string(),
  label: z.string().min(1).max(200).optional(),
  configuration: z.strictObject({
    resource_url: z.string(),
    scopes: z.array(z.string().min(1).max(200)).max(64).optional(),
  }),
  credentials: z
    .strictObject({
      mode: z.enum(['register', 'custom']).optional(),
      client_id: z.string().min(1).max(2048).optional(),
      client_secret: z.string().min(1).max(4096).optional(),
    })
    .optional(),
});

function invalid(path: string, message: string): KeywayError {
  return new KeywayError('invalid_request', message, { details: [{ path, message }] });
}

const secretKey = (providerId: string, issuer: string): string => `${providerId} ${issuer}`;

/**
 * Records on `next` that the provider moved to another authorization server or client
 * since `previous`, when it did.
 *
 * @returns whether it moved (its connections then need authorizing again).
 */
function notePartyChange(
  previous: ProviderState | null,
  next: ProviderState,
  now: number,
): boolean {
  const before = previous === null ? null : currentParty(previous);
  if (before === null || providerKeepsParty(next, before)) return false;
  next.last_party_change = {
    at: now,
    previous_issuer: before.issuer,
    previous_client_id: before.client_id,
    connections_reauthorization_required: 0,
  };
  return true;
}

/**
 * Whether a registered client can still be used: it is not a client the server forgot,
 * and its secret (if it expires) has not expired. A manual client is always used as is.
 */
function registrationUsable(registration: StoredRegistration, now: number): boolean {
  if (registration.registration === 'manual') return true;
  if (registration.stale === true) return false;
  return (
    registration.client_secret_expires_at === null || registration.client_secret_expires_at > now
  );
}

/** Options of the provider service, supplied by `createBroker`. */
export interface ProviderServiceOptions {
  storage: Storage;
  vault: () => Vault;
  outbound: OutboundFetch;
  now: () => number;
  management: boolean;
  allowedHosts: readonly string[];
  /** The deployment as authorization servers see it; `null` when `baseUrl` is not set. */
  profile: ClientProfile | null;
  declared: Record<string, ProviderInput>;
  emit: EmitEvent;
  /**
   * Called after a provider moved to another authorization server or client: puts its
   * active connections in `error` and answers how many.
   */
  onPartyChanged?: (providerId: string) => Promise<number>;
}

/**
 * Providers (API.md §4): created from the `mcp` template by discovering a remote MCP
 * endpoint and registering a client with its authorization server, before anything is
 * stored. Reached as `broker.providers`.
 */
export class ProviderService {
  readonly #o: ProviderServiceOptions;
  readonly #ensuring = new Map<string, Promise<unknown>>();

  constructor(options: ProviderServiceOptions) {
    this.#o = options;
  }

  #assertManagement(): void {
    if (!this.#o.management) {
      throw new KeywayError(
        'provider_management_disabled',
        'provider management is disabled in this deployment’s configuration',
      );
    }
  }

  #profile(): ClientProfile {
    if (this.#o.profile === null) {
      throw new KeywayError(
        'internal_error',
        'the broker has no baseUrl, so it has no OAuth callback',
      );
    }
    return this.#o.profile;
  }

  /** Validates a resource URL: absolute https, no fragment or user info (http for allowed hosts). */
  #resourceUrl(text: string): string {
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      throw invalid('configuration.resource_url', '"resource_url" must be an absolute URL');
    }
    const allowed = this.#o.allowedHosts.map(normalizeHost).includes(normalizeHost(url.hostname));
    if (url.protocol !== 'https:' && !(url.protocol === 'http:' && allowed)) {
      throw invalid(
        'configuration.resource_url',
        '"resource_url" must use https (plain http only for allowed hosts)',
      );
    }
    if (url.hash !== '' || text.includes('#'))
      throw invalid('configuration.resource_url', '"resource_url" must not have a fragment');
    if (url.username !== '' || url.password !== '') {
      throw invalid('configuration.resource_url', '"resource_url" must not contain user info');
    }
    return url.href;
  }

  #view(record: ProviderRecord): ProviderView {
    const state = record.state as unknown as ProviderState;
    const client = state.registrations[
      state.authorization_server.issuer
    ] as ProviderState['registrations'][string];
    const server = state.authorization_server;
    return {
      id: record.id,
      template: 'mcp',
      label: state.label,
      configuration: state.configuration,
      credentials: {
        mode: state.mode,
        client_id: client.client_id,
        registration: client.registration,
        token_endpoint_auth_method: client.token_endpoint_auth_method,
        client_secret_set: client.client_secret_set,
        client_secret_expires_at:
          client.client_secret_expires_at === null
            ? null
            : new Date(client.client_secret_expires_at).toISOString(),
      },
      resource: {
        resource: state.resource.resource,
        resource_metadata_url: state.resource.resource_metadata_url,
        scopes_supported: state.resource.scopes_supported,
      },
      authorization_server: {
        issuer: server.issuer,
        authorization_endpoint: server.authorization_endpoint,
        token_endpoint: server.token_endpoint,
        registration_endpoint: server.registration_endpoint,
        revocation_endpoint: server.revocation_endpoint,
        scopes_supported: server.scopes_supported,
      },
      last_party_change:
        state.last_party_change === undefined || state.last_party_change === null
          ? null
          : {
              ...state.last_party_change,
              at: new Date(state.last_party_change.at).toISOString(),
            },
      created_at: new Date(record.createdAt).toISOString(),
      updated_at: new Date(record.updatedAt).toISOString(),
    };
  }

  /**
   * Creates or replaces a provider: validates, checks scope, runs discovery and (mode
   * `register`) registration, and only then stores the record and its secrets together.
   * If any step fails, nothing changes. A PUT that keeps the resource URL and mode reuses
   * the registration; in `custom` mode an omitted secret keeps the stored one while the
   * `client_id` is unchanged.
   *
   * @throws {KeywayError} `provider_management_disabled`, `invalid_path`,
   *   `invalid_request`, `insufficient_scope`, `discovery_failed`,
   *   `unsupported_authorization_server`, `registration_unsupported`,
   *   `registration_failed`, `conflict`.
   */
  async put(
    principal: Principal,
    id: string,
    input: ProviderInput,
  ): Promise<{ provider: ProviderView; created: boolean }> {
    this.#assertManagement();
    return this.#put(principal, id, input, false);
  }

  async #put(
    principal: Principal,
    id: string,
    input: ProviderInput,
    declared: boolean,
  ): Promise<{ provider: ProviderView; created: boolean }> {
    const providerId = parseResourcePath(id);
    const shape = parseShape(InputShape, input);
    if (shape.template !== 'mcp')
      throw invalid(
        'template',
        `unknown template ${JSON.stringify(shape.template.slice(0, 40))}; the only one is "mcp"`,
      );
    const resourceUrl = this.#resourceUrl(shape.configuration.resource_url);
    const mode = shape.credentials?.mode ?? 'register';
    const clientId = shape.credentials?.client_id;
    const clientSecret = shape.credentials?.client_secret;
    if (mode === 'custom' && clientId === undefined)
      throw invalid('credentials.client_id', 'mode "custom" needs a "client_id"');
    if (mode === 'register' && (clientId !== undefined || clientSecret !== undefined)) {
      throw invalid(
        'credentials',
        'mode "register" takes no client_id or client_secret; use mode "custom"',
      );
    }
    assertCoversPath(principal, providerId);
    const profile = this.#profile();
    const configuredScopes = shape.configuration.scopes ?? [];

    const existing = await this.#o.storage.getProvider(providerId);
    const previous = existing === null ? null : (existing.state as unknown as ProviderState);

    const discovery = await discoverOrThrow(this.#o.outbound, resourceUrl, {
      scopes: configuredScopes,
      allowedHosts: this.#o.allowedHosts,
    });
    const issuer = discovery.authorization_server.issuer;
    const now = this.#o.now();
    const vault = this.#o.vault();
    const puts: VaultWrite[] = [];
    const deletes: VaultKey[] = [];
    const registrations: ProviderState['registrations'] = { ...(previous?.registrations ?? {}) };
    const key = secretKey(providerId, issuer);

    if (mode === 'custom') {
      const before = previous?.mode === 'custom' ? previous.registrations[issuer] : undefined;
      const keepSecret =
        clientSecret === undefined &&
        before?.client_id === clientId &&
        before?.client_secret_set === true;
      const hasSecret = clientSecret !== undefined || keepSecret;
      if (clientSecret !== undefined)
        puts.push(await vault.seal({ kind: CLIENT_SECRET_KIND, key }, clientSecret));
      else if (!keepSecret) deletes.push({ kind: CLIENT_SECRET_KIND, key });
      registrations[issuer] = {
        issuer,
        client_id: clientId as string,
        registration: 'manual',
        token_endpoint_auth_method: customAuthMethod(
          discovery.authorization_server.token_endpoint_auth_methods_supported,
          hasSecret,
        ),
        client_secret_expires_at: null,
        registration_client_uri: null,
        client_secret_set: hasSecret,
      };
    } else {
      const before = previous?.mode === 'register' ? previous.registrations[issuer] : undefined;
      const reusable =
        before !== undefined &&
        previous?.configuration.resource_url === resourceUrl &&
        registrationUsable(before, now);
      if (!reusable) {
        const registered = await this.#register(providerId, discovery.authorization_server);
        puts.push(...registered.puts);
        deletes.push(...registered.deletes);
        registrations[issuer] = registered.registration;
      }
    }

    const state: ProviderState = {
      label: shape.label ?? previous?.label ?? providerId,
      configuration: { resource_url: resourceUrl, scopes: configuredScopes },
      mode,
      resource: discovery.resource,
      authorization_server: discovery.authorization_server,
      challenge_scope: discovery.challenge_scope,
      registrations,
      declared,
      last_party_change: previous?.last_party_change ?? null,
      ...(discovery.legacy ? { legacy: true } : {}),
    };
    const moved = notePartyChange(previous, state, now);
    const record: ProviderRecord = {
      id: providerId,
      template: 'mcp',
      state: state as unknown as JsonObject,
      version: (existing?.version ?? 0) + 1,
      createdAt: existing?.createdAt ?? now,
      updatedAt: now,
    };
    const changes = {
      put: puts,
      delete: deletes.filter((d) => !puts.some((p) => p.kind === d.kind && p.key === d.key)),
    };
    const written =
      existing === null
        ? await this.#o.storage.insertProvider(record, changes)
        : await this.#o.storage.compareAndSetProvider(record, existing.version, changes);
    if (!written) {
      throw new KeywayError(
        'conflict',
        `provider ${JSON.stringify(providerId)} was changed concurrently; retry`,
      );
    }
    this.#o.emit({
      type: existing === null ? 'provider.created' : 'provider.updated',
      actor: actorOf(principal),
      resource: providerId,
    });
    const final = moved ? await this.#recordPartyChange(record, state) : record;
    return { provider: this.#view(final), created: existing === null };
  }

  /**
   * Registers a client at a server (client-ID metadata document or RFC 7591), with the
   * vault writes of its secrets under the provider and that server's issuer.
   */
  async #register(
    providerId: string,
    server: AuthorizationServerInfo,
  ): Promise<{ registration: StoredRegistration; puts: VaultWrite[]; deletes: VaultKey[] }> {
    const client: RegisteredClient = await registerClient(
      this.#o.outbound,
      server,
      this.#profile(),
    );
    const vault = this.#o.vault();
    const key = secretKey(providerId, server.issuer);
    const puts: VaultWrite[] = [];
    const deletes: VaultKey[] = [];
    if (client.client_secret !== null)
      puts.push(await vault.seal({ kind: CLIENT_SECRET_KIND, key }, client.client_secret));
    else deletes.push({ kind: CLIENT_SECRET_KIND, key });
    if (client.registration_access_token !== null) {
      puts.push(
        await vault.seal({ kind: REGISTRATION_TOKEN_KIND, key }, client.registration_access_token),
      );
    } else {
      deletes.push({ kind: REGISTRATION_TOKEN_KIND, key });
    }
    const { client_secret, registration_access_token, ...registration } = client;
    return {
      registration: { ...registration, client_secret_set: client_secret !== null },
      puts,
      deletes,
    };
  }

  /**
   * The provider as a new authorization must use it (API.md §6 items 4, 11): the
   * protected-resource metadata is read again (the probe and the metadata document); when
   * it names another authorization server, that server is discovered and a client
   * registered there before any consent URL is built, and the provider's connections of
   * the old server need authorizing again. A registration the server forgot, or whose
   * secret expired, is replaced. A read that fails for a transient reason keeps what is
   * stored; a metadata `resource` that no longer matches stops the authorization.
   *
   * @throws {KeywayError} `not_found`, `discovery_failed`, `unsupported_authorization_server`,
   *   `registration_unsupported`, `registration_failed`, `conflict` (a `custom` provider
   *   whose resource moved: its client belongs to the old server).
   */
  async forAuthorization(id: string): Promise<ResolvedProvider> {
    await this.#ensureDeclared(id);
    for (let attempt = 0; ; attempt++) {
      const record = await this.#o.storage.getProvider(id);
      if (record === null) throw new KeywayError('not_found', `no provider ${JSON.stringify(id)}`);
      const state = record.state as unknown as ProviderState;
      const next: ProviderState = { ...state, registrations: { ...state.registrations } };
      if (state.legacy !== true) {
        const found = await discoverResource(this.#o.outbound, state.configuration.resource_url);
        if (resourceMismatched(found)) throwUnlessDiscovered(found);
        if (found.resource !== null && !found.legacy) {
          next.resource = found.resource;
          next.challenge_scope = found.challenge_scope;
          const moved =
            found.resource.authorization_servers[0] !== state.resource.authorization_servers[0];
          if (moved) {
            const server = throwUnlessDiscovered(
              await discoverAuthorizationServer(this.#o.outbound, found, {
                scopes: state.configuration.scopes,
                allowedHosts: this.#o.allowedHosts,
              }),
            );
            next.authorization_server = server.authorization_server;
          }
        }
      }
      const issuer = next.authorization_server.issuer;
      const now = this.#o.now();
      const client = next.registrations[issuer];
      const puts: VaultWrite[] = [];
      const deletes: VaultKey[] = [];
      if (client === undefined || !registrationUsable(client, now)) {
        if (state.mode === 'custom') {
          throw new KeywayError(
            'conflict',
            `the resource of provider ${JSON.stringify(id)} moved to the authorization server ${issuer}; its custom client belongs to ${state.authorization_server.issuer}: PUT the provider with credentials for the new server`,
          );
        }
        const registered = await this.#register(id, next.authorization_server);
        puts.push(...registered.puts);
        deletes.push(...registered.deletes);
        next.registrations[issuer] = registered.registration;
      }
      if (JSON.stringify(next) === JSON.stringify(state)) {
        return { id, state, client: state.registrations[issuer] as StoredRegistration };
      }
      const partyMoved = notePartyChange(state, next, now);
      const written: ProviderRecord = {
        ...record,
        state: next as unknown as JsonObject,
        version: record.version + 1,
        updatedAt: now,
      };
      if (
        !(await this.#o.storage.compareAndSetProvider(written, record.version, {
          put: puts,
          delete: deletes,
        }))
      ) {
        // Another authorization or a PUT changed it meanwhile: start again from theirs.
        if (attempt < 3) continue;
        throw new KeywayError(
          'conflict',
          `provider ${JSON.stringify(id)} was changed concurrently; retry`,
        );
      }
      this.#o.emit({ type: 'provider.updated', actor: 'system', resource: id });
      const final = partyMoved ? await this.#recordPartyChange(written, next) : written;
      const finalState = final.state as unknown as ProviderState;
      return {
        id,
        state: finalState,
        client: finalState.registrations[issuer] as StoredRegistration,
      };
    }
  }

  /**
   * Marks a dynamically registered client as forgotten by its server (the token endpoint
   * answered `invalid_client`), so the next authorization registers a new one (API.md §6
   * item 11). A manual client is an operator's, and is left alone.
   *
   * @returns whether the registration was dynamic (and is now stale).
   */
  async markRegistrationStale(
    providerId: string,
    issuer: string,
    clientId: string,
  ): Promise<boolean> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const record = await this.#o.storage.getProvider(providerId);
      if (record === null) return false;
      const state = record.state as unknown as ProviderState;
      const client = state.registrations[issuer];
      if (client === undefined || client.client_id !== clientId || client.registration === 'manual')
        return false;
      if (client.stale === true) return true;
      const next: ProviderRecord = {
        ...record,
        state: {
          ...state,
          registrations: { ...state.registrations, [issuer]: { ...client, stale: true } },
        } as unknown as JsonObject,
        version: record.version + 1,
        updatedAt: this.#o.now(),
      };
      if (await this.#o.storage.compareAndSetProvider(next, record.version)) return true;
    }
    return true;
  }

  /**
   * After a move to another server or client: the provider's active connections go to
   * `error` (their tokens stay with the old party), and the count is kept on the provider.
   */
  async #recordPartyChange(record: ProviderRecord, state: ProviderState): Promise<ProviderRecord> {
    const affected = (await this.#o.onPartyChanged?.(record.id)) ?? 0;
    if (affected === 0 || !state.last_party_change) return record;
    const next: ProviderRecord = {
      ...record,
      state: {
        ...state,
        last_party_change: {
          ...state.last_party_change,
          connections_reauthorization_required: affected,
        },
      } as unknown as JsonObject,
      version: record.version + 1,
    };
    // A concurrent PUT wins: it recorded its own change.
    return (await this.#o.storage.compareAndSetProvider(next, record.version)) ? next : record;
  }

  /**
   * Reads a provider.
   *
   * @throws {KeywayError} `provider_management_disabled`, `invalid_path`,
   *   `insufficient_scope`, `not_found`.
   */
  async get(principal: Principal, id: string): Promise<ProviderView> {
    this.#assertManagement();
    const providerId = parseResourcePath(id);
    assertCoversPath(principal, providerId);
    await this.#ensureDeclared(providerId);
    const record = await this.#o.storage.getProvider(providerId);
    if (record === null)
      throw new KeywayError('not_found', `no provider ${JSON.stringify(providerId)}`);
    return this.#view(record);
  }

  /** Lists the providers the caller's scopes cover, ordered by id. */
  async list(
    principal: Principal,
    options: ListOptions & { prefix?: string | undefined } = {},
  ): Promise<Page<ProviderView>> {
    this.#assertManagement();
    const prefix =
      options.prefix === undefined ? undefined : parseResourcePath(options.prefix, 'prefix');
    const { limit, after } = parseListOptions(options);
    for (const id of Object.keys(this.#o.declared)) await this.#ensureDeclared(id);
    const within = listableSubtrees(principal, prefix);
    const records = await this.#o.storage.listProviders({
      ...(within === undefined ? {} : { within }),
      ...(after === undefined ? {} : { after }),
      limit: limit + 1,
    });
    return toPage(
      records,
      limit,
      (record) => record.id,
      (record) => this.#view(record),
    );
  }

  /**
   * Deletes a provider and its secrets.
   *
   * @throws {KeywayError} `provider_management_disabled`, `invalid_path`,
   *   `insufficient_scope`, `not_found`, `conflict` (connections still use it).
   */
  async delete(principal: Principal, id: string): Promise<void> {
    this.#assertManagement();
    const providerId = parseResourcePath(id);
    assertCoversPath(principal, providerId);
    const record = await this.#o.storage.getProvider(providerId);
    if (record === null)
      throw new KeywayError('not_found', `no provider ${JSON.stringify(providerId)}`);
    const state = record.state as unknown as ProviderState;
    const keys = Object.keys(state.registrations).flatMap((issuer) => [
      { kind: CLIENT_SECRET_KIND, key: secretKey(providerId, issuer) },
      { kind: REGISTRATION_TOKEN_KIND, key: secretKey(providerId, issuer) },
    ]);
    const outcome = await this.#o.storage.deleteProvider(providerId, keys);
    if (outcome === 'not_found')
      throw new KeywayError('not_found', `no provider ${JSON.stringify(providerId)}`);
    if (outcome === 'in_use') {
      throw new KeywayError(
        'conflict',
        `provider ${JSON.stringify(providerId)} still has connections; delete them first`,
      );
    }
  }

  /**
   * Runs discovery (API.md §6 steps 1–5) for a resource URL without storing anything, and
   * answers the trace the inspector shows. Needs provider management and any credential.
   */
  async discover(_principal: Principal, input: { resource_url: string }): Promise<DiscoveryTrace> {
    this.#assertManagement();
    const { resource_url } = parseShape(z.strictObject({ resource_url: z.string() }), input);
    return discover(this.#o.outbound, this.#resourceUrl(resource_url), {
      allowedHosts: this.#o.allowedHosts,
    });
  }

  /**
   * The provider and its client at its current authorization server, for connections.
   * Declared providers are discovered and registered on first use. Works whether or not
   * provider management is on.
   *
   * @throws {KeywayError} `not_found` and the errors of discovery and registration.
   */
  async resolve(id: string): Promise<ResolvedProvider> {
    await this.#ensureDeclared(id);
    const record = await this.#o.storage.getProvider(id);
    if (record === null) throw new KeywayError('not_found', `no provider ${JSON.stringify(id)}`);
    const state = record.state as unknown as ProviderState;
    const client = state.registrations[state.authorization_server.issuer];
    if (client === undefined)
      throw new KeywayError('internal_error', `provider ${id} has no client`);
    return { id: record.id, state, client };
  }

  /** The client secret of a provider at an issuer, from the vault, or `null`. */
  async clientSecret(providerId: string, issuer: string): Promise<string | null> {
    const entry = await this.#o.storage.getVaultEntry(
      CLIENT_SECRET_KIND,
      secretKey(providerId, issuer),
    );
    return entry === null ? null : this.#o.vault().open(entry);
  }

  /** Stores a provider declared in code the first time it is needed. */
  async #ensureDeclared(id: string): Promise<void> {
    const input = this.#o.declared[id];
    if (input === undefined) return;
    const existing = await this.#o.storage.getProvider(id);
    const state = existing?.state as unknown as ProviderState | undefined;
    if (
      state !== undefined &&
      state.configuration.resource_url === new URL(input.configuration.resource_url).href
    )
      return;
    let pending = this.#ensuring.get(id);
    if (pending === undefined) {
      pending = this.#put(rootPrincipal(), id, input, true).finally(() =>
        this.#ensuring.delete(id),
      );
      this.#ensuring.set(id, pending);
    }
    await pending;
  }
}
