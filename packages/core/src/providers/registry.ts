import { actorOf, assertCoversPath, type Principal, rootPrincipal } from '../auth/principal.js';
import { KeywayError } from '../contract/errors.js';
import { ProviderBody, type ProviderInput } from '../contract/schemas.js';
import { parseShape } from '../contract/validation.js';
import {
  discoverAuthorizationServer,
  discoverOrThrow,
  discoverResource,
  resourceMismatched,
  throwUnlessDiscovered,
} from '../discovery/index.js';
import type { EventLog } from '../events/log.js';
import type { OutboundFetch } from '../outbound/fetch.js';
import type { ProviderRecord, Storage, VaultKey, VaultWrite } from '../storage/contract.js';
import type { AuthorizationServerInfo, ProviderState } from '../storage/states.js';
import type { Vault } from '../vault/vault.js';
import { checkResourceUrl, invalid, registerAt } from './client.js';
import { type ClientProfile, customAuthMethod } from './registration.js';
import {
  CLIENT_SECRET_KIND,
  currentClient,
  notePartyChange,
  type PartyMove,
  providerState,
  type ResolvedProvider,
  registrationUsable,
  secretKey,
} from './state.js';

/** Options of the provider registry, supplied by `createBroker`. */
export interface ProviderRegistryOptions {
  storage: Storage;
  vault: () => Vault;
  outbound: OutboundFetch;
  now: () => number;
  allowedHosts: readonly string[];
  /** The deployment as authorization servers see it; `null` when `baseUrl` is not set. */
  profile: ClientProfile | null;
  declared: Record<string, ProviderInput>;
  events: EventLog;
  /**
   * Called after a provider moved to another authorization server or client: puts its
   * active connections in `error` and answers how many.
   */
  onPartyChanged?: (providerId: string, moved: PartyMove) => Promise<number>;
}

/**
 * The parameters Keyway sends itself in authorization and token requests: a provider's
 * extra parameters can never set or override one (API.md §4), in any letter case.
 */
export const RESERVED_PARAMS: readonly string[] = [
  'response_type',
  'client_id',
  'redirect_uri',
  'state',
  'code_challenge',
  'code_challenge_method',
  'scope',
  'resource',
  'grant_type',
  'code',
  'code_verifier',
  'refresh_token',
  'client_secret',
  'client_assertion',
  'client_assertion_type',
];
const RESERVED = new Set(RESERVED_PARAMS);

/**
 * Checks a provider's extra parameters (already shaped by the schema): none may be one of
 * {@link RESERVED_PARAMS}, nor start with `code_challenge` or `client_assertion`.
 *
 * @throws {KeywayError} `invalid_request` naming the parameter.
 */
function checkExtraParams(
  field: string,
  params: Record<string, string> | undefined,
): Record<string, string> | undefined {
  if (params === undefined) return undefined;
  for (const name of Object.keys(params)) {
    const lower = name.toLowerCase();
    if (
      RESERVED.has(lower) ||
      lower.startsWith('code_challenge') ||
      lower.startsWith('client_assertion')
    ) {
      throw invalid(
        `${field}.${name}`,
        `"${field}" cannot set ${JSON.stringify(name)}: Keyway sends that parameter itself`,
      );
    }
  }
  return Object.keys(params).length === 0 ? undefined : { ...params };
}

/** The error of a provider changed by another write while this one was being made. */
const concurrentChange = (id: string): KeywayError =>
  new KeywayError('conflict', `provider ${JSON.stringify(id)} was changed concurrently; retry`);

/** The error of an operation that needs the OAuth callback on a broker without `baseUrl`. */
export function noBaseUrl(): KeywayError {
  return new KeywayError(
    'internal_error',
    'the broker has no baseUrl, so it has no OAuth callback',
  );
}

/**
 * The providers as the rest of core uses them, without a principal: discovery,
 * registration and storage of providers, their secrets, and their use by connections
 * (re-discovery on authorize, clients the server forgot). Internal: `broker.providers`
 * ({@link ProviderService}) is the public face, where every operation takes a principal.
 */
export class ProviderRegistry {
  readonly #o: ProviderRegistryOptions;
  readonly #ensuring = new Map<string, Promise<unknown>>();

  constructor(options: ProviderRegistryOptions) {
    this.#o = options;
  }

  profile(): ClientProfile {
    if (this.#o.profile === null) throw noBaseUrl();
    return this.#o.profile;
  }

  /** Validates a resource URL (see {@link checkResourceUrl}). */
  resourceUrl(text: string): string {
    return checkResourceUrl(text, this.#o.allowedHosts);
  }

  /** The stored provider, a declared one stored first; `null` when there is none. */
  async read(id: string): Promise<ProviderRecord | null> {
    await this.ensureDeclared(id);
    return this.#o.storage.getProvider(id);
  }

  /**
   * Creates or replaces a provider: validates the input, runs discovery and (mode
   * `register`) registration, and only then stores the record and its secrets together.
   * If any step fails, nothing changes.
   */
  async write(
    principal: Principal,
    providerId: string,
    input: unknown,
    declared: boolean,
  ): Promise<{ record: ProviderRecord; created: boolean }> {
    const shape = parseShape(ProviderBody, input);
    if (shape.template !== 'mcp')
      throw invalid(
        'template',
        `unknown template ${JSON.stringify(shape.template.slice(0, 40))}; the only one is "mcp"`,
      );
    const resourceUrl = this.resourceUrl(shape.configuration.resource_url);
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
    const callback = shape.credentials?.callback;
    if (mode === 'register' && callback !== undefined) {
      throw invalid(
        'credentials.callback',
        'mode "register" chooses the redirect URI itself; "callback" is for mode "custom"',
      );
    }
    const authorizationParams = checkExtraParams(
      'configuration.authorization_params',
      shape.configuration.authorization_params,
    );
    const tokenParams = checkExtraParams(
      'configuration.token_params',
      shape.configuration.token_params,
    );
    const pkce = shape.configuration.pkce;
    assertCoversPath(principal, providerId);
    this.profile();
    const configuredScopes = shape.configuration.scopes ?? [];

    const existing = await this.#o.storage.getProvider(providerId);
    const previous = existing === null ? null : providerState(existing);

    const discovery = await discoverOrThrow(this.#o.outbound, resourceUrl, {
      scopes: configuredScopes,
      allowedHosts: this.#o.allowedHosts,
      ...(pkce === undefined ? {} : { pkce }),
    });
    const issuer = discovery.authorization_server.issuer;
    const now = this.#o.now();
    const vault = this.#o.vault();
    const puts: VaultWrite[] = [];
    const deletes: VaultKey[] = [];
    const registrations: ProviderState['registrations'] = { ...(previous?.registrations ?? {}) };
    const key = secretKey(providerId, issuer);

    if (mode === 'custom' && clientId !== undefined) {
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
        client_id: clientId,
        registration: 'manual',
        token_endpoint_auth_method: customAuthMethod(
          discovery.authorization_server.token_endpoint_auth_methods_supported,
          hasSecret,
        ),
        client_secret_expires_at: null,
        registration_client_uri: null,
        client_secret_set: hasSecret,
        callback: callback ?? 'shared',
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
      configuration: {
        resource_url: resourceUrl,
        scopes: configuredScopes,
        ...(authorizationParams === undefined ? {} : { authorization_params: authorizationParams }),
        ...(tokenParams === undefined ? {} : { token_params: tokenParams }),
        ...(pkce === undefined ? {} : { pkce }),
      },
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
      state,
      version: (existing?.version ?? 0) + 1,
      createdAt: existing?.createdAt ?? now,
      updatedAt: now,
    };
    const changes = {
      put: puts,
      delete: deletes.filter((d) => !puts.some((p) => p.kind === d.kind && p.key === d.key)),
    };
    const written = await this.#o.events.recorded(
      {
        type: existing === null ? 'provider.created' : 'provider.updated',
        actor: actorOf(principal),
        resource: providerId,
        data: { template: 'mcp', mode, issuer: discovery.authorization_server.issuer },
      },
      (events) =>
        existing === null
          ? this.#o.storage.insertProvider(record, changes, events)
          : this.#o.storage.compareAndSetProvider(record, existing.version, changes, events),
    );
    if (!written) throw concurrentChange(providerId);
    const final = moved === null ? record : await this.#recordPartyChange(record, state, moved);
    return { record: final, created: existing === null };
  }

  /** Registers a client at a server, with the vault writes of its secrets. */
  #register(providerId: string, server: AuthorizationServerInfo) {
    return registerAt(this.#o.outbound, this.#o.vault(), this.profile(), providerId, server);
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
    for (let attempt = 0; ; attempt++) {
      const record = await this.read(id);
      if (record === null) throw new KeywayError('not_found', `no provider ${JSON.stringify(id)}`);
      const state = providerState(record);
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
                ...(state.configuration.pkce === undefined
                  ? {}
                  : { pkce: state.configuration.pkce }),
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
        return { id, state, client: currentClient(id, state) };
      }
      const final = await this.#update(
        record,
        next,
        { put: puts, delete: deletes },
        {
          actor: 'system',
          reason: puts.length > 0 ? 'client_registered' : 'metadata_changed',
        },
      );
      // Another authorization or a PUT changed it meanwhile: start again from theirs.
      if (final === null) {
        if (attempt < 3) continue;
        throw concurrentChange(id);
      }
      const finalState = providerState(final);
      return { id, state: finalState, client: currentClient(id, finalState) };
    }
  }

  /**
   * Writes a provider's next state by compare-and-set, with its vault changes and a
   * `provider.updated` event, then puts the connections of a party it left in `error`.
   *
   * @returns the record as it stands after, or `null` when another write came first.
   */
  async #update(
    record: ProviderRecord,
    next: ProviderState,
    changes: { put: VaultWrite[]; delete: VaultKey[] },
    event: { actor: string; reason: 'client_registered' | 'metadata_changed' },
  ): Promise<ProviderRecord | null> {
    const now = this.#o.now();
    const moved = notePartyChange(providerState(record), next, now);
    const written: ProviderRecord = {
      ...record,
      state: next,
      version: record.version + 1,
      updatedAt: now,
    };
    const stored = await this.#o.events.recorded(
      {
        type: 'provider.updated',
        actor: event.actor,
        resource: record.id,
        data: { reason: event.reason, issuer: next.authorization_server.issuer },
      },
      (events) => this.#o.storage.compareAndSetProvider(written, record.version, changes, events),
    );
    if (!stored) return null;
    return moved === null ? written : this.#recordPartyChange(written, next, moved);
  }

  /**
   * Registers a new client at the provider's current authorization server, on request
   * (issue 23): the way out when the server forgot the client but said so only on its own
   * error page, which never reaches Keyway. Connections of the old client need authorizing
   * again (its grants belong to the forgotten client).
   *
   * @throws {KeywayError} `insufficient_scope`, `not_found`, `conflict` (a `custom`
   *   provider: its operator registers its client), and the errors of registration.
   */
  async reregister(principal: Principal, providerId: string): Promise<ProviderRecord> {
    assertCoversPath(principal, providerId);
    for (let attempt = 0; attempt < 3; attempt++) {
      const record = await this.read(providerId);
      if (record === null) {
        throw new KeywayError('not_found', `no provider ${JSON.stringify(providerId)}`);
      }
      const state = providerState(record);
      if (state.mode !== 'register') {
        throw new KeywayError(
          'conflict',
          `provider ${JSON.stringify(providerId)} uses a custom client, which its operator registers: PUT it with the new client's credentials`,
        );
      }
      const server = state.authorization_server;
      const registered = await this.#register(providerId, server);
      const next: ProviderState = {
        ...state,
        registrations: { ...state.registrations, [server.issuer]: registered.registration },
      };
      const written = await this.#update(
        record,
        next,
        { put: registered.puts, delete: registered.deletes },
        { actor: actorOf(principal), reason: 'client_registered' },
      );
      if (written !== null) return written;
    }
    throw concurrentChange(providerId);
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
      const state = providerState(record);
      const client = state.registrations[issuer];
      if (client === undefined || client.client_id !== clientId || client.registration === 'manual')
        return false;
      if (client.stale === true) return true;
      const next: ProviderRecord = {
        ...record,
        state: {
          ...state,
          registrations: { ...state.registrations, [issuer]: { ...client, stale: true } },
        } satisfies ProviderState,
        version: record.version + 1,
        updatedAt: this.#o.now(),
      };
      const marked = await this.#o.events.recorded(
        {
          type: 'provider.updated',
          actor: 'system',
          resource: providerId,
          data: { reason: 'registration_stale', issuer },
        },
        (events) => this.#o.storage.compareAndSetProvider(next, record.version, undefined, events),
      );
      if (marked) return true;
    }
    return true;
  }

  /**
   * After a move to another resource, server or client: the provider's active connections
   * go to `error` (their tokens stay with the old party), and the count is kept on the
   * provider.
   */
  async #recordPartyChange(
    record: ProviderRecord,
    state: ProviderState,
    moved: PartyMove,
  ): Promise<ProviderRecord> {
    const affected = (await this.#o.onPartyChanged?.(record.id, moved)) ?? 0;
    if (affected === 0 || !state.last_party_change) return record;
    const next: ProviderRecord = {
      ...record,
      state: {
        ...state,
        last_party_change: {
          ...state.last_party_change,
          connections_reauthorization_required: affected,
        },
      } satisfies ProviderState,
      version: record.version + 1,
    };
    const stored = await this.#o.events.recorded(
      {
        type: 'provider.updated',
        actor: 'system',
        resource: record.id,
        data: { reason: 'connections_reauthorization_required', connections: affected },
      },
      (events) => this.#o.storage.compareAndSetProvider(next, record.version, undefined, events),
    );
    // A concurrent PUT wins: it recorded its own change.
    return stored ? next : record;
  }

  /**
   * The provider and its client at its current authorization server, for connections.
   * Declared providers are discovered and registered on first use.
   *
   * @throws {KeywayError} `not_found` and the errors of discovery and registration.
   */
  async resolve(id: string): Promise<ResolvedProvider> {
    const record = await this.read(id);
    if (record === null) throw new KeywayError('not_found', `no provider ${JSON.stringify(id)}`);
    const state = providerState(record);
    return { id: record.id, state, client: currentClient(id, state) };
  }

  /** The client secret of a provider at an issuer, from the vault, or `null`. */
  async clientSecret(providerId: string, issuer: string): Promise<string | null> {
    const entry = await this.#o.storage.getVaultEntry(
      CLIENT_SECRET_KIND,
      secretKey(providerId, issuer),
    );
    return entry === null ? null : this.#o.vault().open(entry);
  }

  /** The ids of the providers declared in code. */
  declaredIds(): string[] {
    return Object.keys(this.#o.declared);
  }

  /** Stores a provider declared in code the first time it is needed. */
  async ensureDeclared(id: string): Promise<void> {
    const input = this.#o.declared[id];
    if (input === undefined) return;
    const existing = await this.#o.storage.getProvider(id);
    const state = existing === null ? undefined : providerState(existing);
    if (
      state !== undefined &&
      state.configuration.resource_url === new URL(input.configuration.resource_url).href
    )
      return;
    let pending = this.#ensuring.get(id);
    if (pending === undefined) {
      pending = this.write(rootPrincipal(), id, input, true).finally(() =>
        this.#ensuring.delete(id),
      );
      this.#ensuring.set(id, pending);
    }
    await pending;
  }
}
