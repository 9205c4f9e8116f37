import { delegationRoot } from '../auth/delegation.js';
import { listScope, pathsQuery } from '../auth/listing.js';
import { actorOf, assertCoversPath, type Principal } from '../auth/principal.js';
import type { RateLimiter } from '../auth/rate-limit.js';
import { parseResourcePath } from '../auth/resource-path.js';
import { mcpProfileView, type ProfileView, profileView } from '../catalog/catalog.js';
import { mcpCatalog } from '../catalog/mcp-profiles.js';
import { KeywayError } from '../contract/errors.js';
import { listPage, type Page } from '../contract/pagination.js';
import {
  DiscoverBody,
  type DiscoverInput,
  type ProviderInput,
  ProviderListQuery,
  type ProviderListQueryInput,
} from '../contract/schemas.js';
import { parseQuery, parseShape } from '../contract/validation.js';
import { discover } from '../discovery/index.js';
import type { EventLog } from '../events/log.js';
import type { OutboundFetch } from '../outbound/fetch.js';
import type { Storage } from '../storage/contract.js';
import type { Observer } from '../telemetry/observation.js';
import { type DiscoveryReport, doctorReport } from './doctor.js';
import type { ClientProfile } from './registration.js';
import type { ProviderRegistry } from './registry.js';
import {
  CLIENT_SECRET_KIND,
  IDP_SECRET_KIND,
  type ProviderView,
  providerNotFound,
  providerState,
  providerView,
  REGISTRATION_TOKEN_KIND,
  secretKey,
} from './state.js';

/** Options of the provider service, supplied by `createBroker`. */
export interface ProviderServiceOptions {
  storage: Storage;
  outbound: OutboundFetch;
  management: boolean;
  allowedHosts: readonly string[];
  registry: ProviderRegistry;
  events: EventLog;
  /** The deployment as authorization servers see it; `null` when `baseUrl` is not set. */
  profile: ClientProfile | null;
  /** Counts discoveries of scoped callers (docs/api.md §12). */
  limiter?: RateLimiter;
  /** Told of a provider deleted, so metrics drop its series. */
  observe?: Observer;
}

/**
 * Providers (docs/api.md §4): created from the `mcp` template by discovering a remote MCP
 * endpoint and registering a client with its authorization server, before anything is
 * stored. Reached as `broker.providers`; every operation takes the acting principal and
 * needs provider management (`providerManagement: true`).
 */
export class ProviderService {
  readonly #o: ProviderServiceOptions;

  constructor(options: ProviderServiceOptions) {
    this.#o = options;
  }

  /** Whether this deployment manages providers over its API (`providerManagement: true`). */
  get managed(): boolean {
    return this.#o.management;
  }

  #assertManagement(): void {
    if (!this.#o.management) {
      throw new KeywayError(
        'provider_management_disabled',
        'provider management is disabled in this deployment’s configuration',
      );
    }
  }

  /**
   * Creates or replaces a provider: validates, checks scope, runs discovery and (mode
   * `register`) registration, and only then stores the record and its secrets together.
   * If any step fails, nothing changes. A PUT that keeps the resource URL and mode reuses
   * the registration; in `custom` mode an omitted secret keeps the stored one while the
   * `client_id` is unchanged.
   *
   * @param input A {@link ProviderInput}, checked here.
   * @throws {KeywayError} `provider_management_disabled`, `invalid_path`,
   *   `invalid_request`, `insufficient_scope`, `discovery_failed`,
   *   `unsupported_authorization_server`, `registration_unsupported`,
   *   `registration_failed`, `conflict`.
   * @see [docs/api.md §4](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#4-providers), §6
   */
  async put(
    principal: Principal,
    id: string,
    input: ProviderInput,
  ): Promise<{ provider: ProviderView; created: boolean }> {
    this.#assertManagement();
    const providerId = parseResourcePath(id);
    const { record, created } = await this.#o.registry.write(principal, providerId, input, false);
    return { provider: providerView(record, this.#o.profile), created };
  }

  /**
   * Registers a new client for a provider at its current authorization server (mode
   * `register`), when the server forgot the old one: `POST /api/admin/providers/<id>/register`.
   * The provider's connections of the old client go to `error` with
   * `reauthorization_required`.
   *
   * @throws {KeywayError} `provider_management_disabled`, `invalid_path`,
   *   `insufficient_scope`, `not_found`, `conflict` (a `custom` provider),
   *   `registration_unsupported`, `registration_failed`.
   * @see [docs/api.md §6](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#6-mcp-discovery) item 11
   */
  async register(principal: Principal, id: string): Promise<ProviderView> {
    this.#assertManagement();
    const providerId = parseResourcePath(id);
    return providerView(await this.#o.registry.reregister(principal, providerId), this.#o.profile);
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
    return providerView(await this.#o.registry.require(providerId), this.#o.profile);
  }

  /**
   * Lists the providers the caller's scopes cover, ordered by id.
   *
   * @param query `{ prefix?, limit?, cursor? }`, checked here.
   */
  async list(principal: Principal, query?: ProviderListQueryInput): Promise<Page<ProviderView>> {
    this.#assertManagement();
    const options = parseQuery(ProviderListQuery, query);
    const scope = listScope(principal, options.prefix);
    for (const id of this.#o.registry.declaredIds()) await this.#o.registry.ensureDeclared(id);
    return listPage(
      options,
      (window) => this.#o.storage.listProviders(pathsQuery(scope, window)),
      (record) => record.id,
      (record) => providerView(record, this.#o.profile),
    );
  }

  /**
   * The profiles of the `oauth2` template (the built-in catalog and the app's own), by id,
   * for any valid credential: they are public facts about public APIs.
   *
   * @see [docs/api.md §15](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#15-provider-catalog)
   */
  profiles(_principal: Principal): Page<ProfileView> {
    const items = [
      ...[...this.#o.registry.profiles().values()].map(profileView),
      ...[...mcpCatalog().values()].map(mcpProfileView),
    ].sort((a, b) => (a.id < b.id ? -1 : 1));
    return { items, next_cursor: null };
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
    const state = providerState(await this.#o.registry.require(providerId));
    const keys = Object.keys(state.registrations).flatMap((issuer) => [
      { kind: CLIENT_SECRET_KIND, key: secretKey(providerId, issuer) },
      { kind: REGISTRATION_TOKEN_KIND, key: secretKey(providerId, issuer) },
    ]);
    const idp = state.identity_provider;
    if (idp !== undefined)
      keys.push({ kind: IDP_SECRET_KIND, key: secretKey(providerId, idp.issuer) });
    const outcome = await this.#o.events.recorded(
      { type: 'provider.deleted', actor: actorOf(principal), resource: providerId },
      (events) => this.#o.storage.deleteProvider(providerId, keys, events),
      (result) => result === 'deleted',
    );
    if (outcome === 'not_found') throw providerNotFound(providerId);
    if (outcome === 'in_use') {
      throw new KeywayError(
        'conflict',
        `provider ${JSON.stringify(providerId)} still has connections; delete them first`,
      );
    }
    this.#o.observe?.({ kind: 'provider_deleted', provider: providerId });
  }

  /**
   * Runs discovery (docs/api.md §6 steps 1–5) for a resource URL without storing anything, and
   * answers the trace the inspector shows. Needs provider management and any credential.
   *
   * @param input `{ resource_url }`, checked here.
   */
  async discover(principal: Principal, input: DiscoverInput): Promise<DiscoveryReport> {
    this.#assertManagement();
    const { resource_url, pkce, try_registration } = parseShape(DiscoverBody, input);
    // It fetches what the caller names: counted per delegation tree, like minting.
    if (principal.kind === 'token') {
      await this.#o.limiter?.countDiscovery(delegationRoot(principal.name));
    }
    const url = this.#o.registry.resourceUrl(resource_url);
    const trace = await discover(this.#o.outbound, url, {
      allowedHosts: this.#o.allowedHosts,
      ...(pkce === undefined ? {} : { pkce }),
    });
    const report = await doctorReport(
      this.#o.outbound,
      url,
      trace,
      this.#o.profile,
      try_registration === true,
    );
    return { ...trace, report };
  }
}
