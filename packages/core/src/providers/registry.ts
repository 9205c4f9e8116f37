import { actorOf, assertCoversPath, type Principal, rootPrincipal } from '../auth/principal.js';
import type { Profile } from '../catalog/schema.js';
import { KeywayError } from '../contract/errors.js';
import type { ProviderInput } from '../contract/schemas.js';
import type { EventLog } from '../events/log.js';
import type { OutboundFetch } from '../outbound/fetch.js';
import type { Storage } from '../storage/contract.js';
import type { ProviderRecord, VaultKey, VaultWrite } from '../storage/record-types.js';
import type { AuthorizationServerInfo, ProviderState } from '../storage/states.js';
import type { Vault } from '../vault/vault.js';
import type { AssertionSource } from './assertion-sources.js';
import { checkResourceUrl, registerAt } from './client.js';
import { type ProviderSpec, parseProviderInput } from './input.js';
import { rediscovered } from './rediscovery.js';
import type { ClientMetadata, ClientProfile } from './registration.js';
import { rootOnly } from './root-only.js';
import {
  CLIENT_SECRET_KIND,
  currentClient,
  noBaseUrl,
  notePartyChange,
  type PartyMove,
  providerNotFound,
  providerState,
  type ResolvedProvider,
  registrationUsable,
  secretKey,
} from './state.js';
import { declaredUnchanged, mcpWrite, oauth2Write } from './templates.js';

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
  /** The `oauth2` profiles: the built-in catalog and the app's own. */
  profiles: ReadonlyMap<string, Profile>;
  /** The configured assertion sources (`jwt_bearer`, docs/api.md §14). */
  assertionSources: Readonly<Record<string, AssertionSource>>;
  events: EventLog;
  /**
   * Called after a provider moved to another authorization server or client: puts its
   * active connections in `error` and answers how many.
   */
  onPartyChanged?: (providerId: string, moved: PartyMove) => Promise<number>;
}

/** The error of a provider changed by another write while this one was being made. */
const concurrentChange = (id: string): KeywayError =>
  new KeywayError('conflict', `provider ${JSON.stringify(id)} was changed concurrently; retry`);

/**
 * The providers as the rest of core uses them, without a principal: discovery,
 * registration and storage of providers, their secrets, and their use by connections
 * (re-discovery on authorize, clients the server forgot). Internal: `broker.providers`
 * ({@link ProviderService}) is the public face, where every operation takes a principal.
 */
export class ProviderRegistry {
  readonly #o: ProviderRegistryOptions;
  readonly #ensuring = new Map<string, Promise<unknown>>();
  /** The declared providers, parsed once (their inputs do not change). */
  readonly #declaredSpecs = new Map<string, ProviderSpec>();

  constructor(options: ProviderRegistryOptions) {
    this.#o = options;
  }

  profile(): ClientProfile {
    if (this.#o.profile === null) throw noBaseUrl();
    return this.#o.profile;
  }

  /** Validates a resource URL or an endpoint (see {@link checkResourceUrl}). */
  resourceUrl(text: string, field?: string): string {
    return checkResourceUrl(text, this.#o.allowedHosts, field);
  }

  /** The `oauth2` profiles: the built-in catalog and the app's own. */
  profiles(): ReadonlyMap<string, Profile> {
    return this.#o.profiles;
  }

  /** Parses a provider's input (see {@link parseProviderInput}). */
  parse(input: ProviderInput): ProviderSpec {
    return parseProviderInput(
      input,
      (text, field) => this.resourceUrl(text, field),
      this.#o.profiles,
      Object.keys(this.#o.assertionSources),
    );
  }

  /** The stored provider, a declared one stored first; `null` when there is none. */
  async read(id: string): Promise<ProviderRecord | null> {
    await this.ensureDeclared(id);
    return this.#o.storage.getProvider(id);
  }

  /** The provider, read as {@link read} does. @throws {KeywayError} `not_found`. */
  async require(id: string): Promise<ProviderRecord> {
    const record = await this.read(id);
    if (record === null) throw providerNotFound(id);
    return record;
  }

  /**
   * Creates or replaces a provider: validates the input, runs discovery and (mode
   * `register`) registration, and only then stores the record and its secrets together.
   * If any step fails, nothing changes.
   */
  async write(
    principal: Principal,
    providerId: string,
    input: ProviderInput,
    declared: boolean,
  ): Promise<{ record: ProviderRecord; created: boolean }> {
    const parsed = this.parse(input);
    assertCoversPath(principal, providerId);
    this.profile();

    const existing = await this.#o.storage.getProvider(providerId);
    const previous = existing === null ? null : providerState(existing);
    const spec = rootOnly(principal, providerId, parsed, previous, this.#o.assertionSources);
    const { state, puts, deletes } =
      spec.oauth2 !== undefined && spec.clientId !== undefined
        ? await oauth2Write(
            providerId,
            { ...spec, oauth2: spec.oauth2, clientId: spec.clientId },
            previous,
            declared,
            this.#o.vault(),
          )
        : await mcpWrite(
            {
              outbound: this.#o.outbound,
              allowedHosts: this.#o.allowedHosts,
              now: this.#o.now(),
              vault: this.#o.vault(),
              register: (server) => this.#register(providerId, server, spec.clientMetadata),
            },
            providerId,
            spec,
            previous,
            declared,
          );
    const now = this.#o.now();
    const moved = notePartyChange(previous, state, now);
    const record: ProviderRecord = {
      id: providerId,
      template: state.template ?? 'mcp',
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
        data: {
          template: record.template,
          mode: spec.mode,
          issuer: state.authorization_server.issuer,
        },
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
  #register(
    providerId: string,
    server: AuthorizationServerInfo,
    metadata: ClientMetadata | undefined,
  ) {
    const profile = this.profile();
    return registerAt(this.#o.outbound, this.#o.vault(), profile, providerId, server, metadata);
  }

  /**
   * The provider as a new authorization must use it (docs/api.md §6 items 4, 11): discovered
   * again ({@link rediscovered}), with a client registered at a new server before any
   * consent URL is built (connections of the old server need authorizing again), and a
   * registration the server forgot, or whose secret expired, replaced.
   *
   * @throws {KeywayError} `not_found`, `discovery_failed`, `unsupported_authorization_server`,
   *   `registration_unsupported`, `registration_failed`, `conflict` (a `custom` provider
   *   whose resource moved: its client belongs to the old server).
   */
  async forAuthorization(id: string): Promise<ResolvedProvider> {
    for (let attempt = 0; ; attempt++) {
      const record = await this.require(id);
      const state = providerState(record);
      const next = await rediscovered(this.#o.outbound, this.#o.allowedHosts, state, id);
      const issuer = next.authorization_server.issuer;
      const now = this.#o.now();
      const client = next.registrations[issuer];
      const puts: VaultWrite[] = [];
      const deletes: VaultKey[] = [];
      if (client === undefined || !registrationUsable(client, now)) {
        if (state.mode === 'custom') {
          throw new KeywayError(
            'conflict',
            `the resource of provider ${JSON.stringify(id)} moved to the authorization server ${issuer}; its custom ` +
              `client belongs to ${state.authorization_server.issuer}: PUT the provider with credentials for the new ` +
              `server`,
          );
        }
        const registered = await this.#register(
          id,
          next.authorization_server,
          state.client_metadata,
        );
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
   * Registers a new client at the provider's current authorization server, on request:
   * the way out when the server forgot the client but said so only on its own
   * error page, which never reaches Keyway. Connections of the old client need authorizing
   * again (its grants belong to the forgotten client).
   *
   * @throws {KeywayError} `insufficient_scope`, `not_found`, `conflict` (a `custom`
   *   provider: its operator registers its client), and the errors of registration.
   */
  async reregister(principal: Principal, providerId: string): Promise<ProviderRecord> {
    assertCoversPath(principal, providerId);
    for (let attempt = 0; attempt < 3; attempt++) {
      const record = await this.require(providerId);
      const state = providerState(record);
      if (state.mode !== 'register') {
        throw new KeywayError(
          'conflict',
          `provider ${JSON.stringify(providerId)} uses a custom client, which its operator registers: PUT it with ` +
            `the new client's credentials`,
        );
      }
      const server = state.authorization_server;
      const registered = await this.#register(providerId, server, state.client_metadata);
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
   * answered `invalid_client`), so the next authorization registers a new one (docs/api.md §6
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
   * go to `error` (their tokens stay with the old party), and the count is kept on it.
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
    const record = await this.require(id);
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

  /** A declared provider's declaration (`providers` of `createBroker`), parsed once; else null. */
  declaredSpec(id: string): ProviderSpec | null {
    // Own keys only: a provider named `constructor` is not Object.prototype's member.
    if (!Object.hasOwn(this.#o.declared, id)) return null;
    let wanted = this.#declaredSpecs.get(id);
    if (wanted === undefined) {
      wanted = this.parse(this.#o.declared[id] as ProviderInput);
      this.#declaredSpecs.set(id, wanted);
    }
    return wanted;
  }

  /** Stores a provider declared in code the first time it is needed, or as it changed. */
  async ensureDeclared(id: string): Promise<void> {
    const wanted = this.declaredSpec(id);
    if (wanted === null) return;
    const input = this.#o.declared[id] as ProviderInput;
    const existing = await this.#o.storage.getProvider(id);
    if (existing !== null && declaredUnchanged(providerState(existing), wanted)) return;
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
