import { assertCoversPath, type Principal } from '../auth/principal.js';
import { RateLimiter } from '../auth/rate-limit.js';
import { parseResourcePath } from '../auth/resource-path.js';
import { ConnectSessions } from '../connect/service.js';
import type { ConnectionDeps } from '../connections/deps.js';
import { ConnectionRecords } from '../connections/records.js';
import { Refresher } from '../connections/refresh.js';
import { ConnectionService } from '../connections/service.js';
import { EventService } from '../events/service.js';
import { WebhookSender } from '../events/webhooks.js';
import type { OutboundFetch } from '../outbound/fetch.js';
import { toBase64Url } from '../platform/bytes.js';
import { Portal } from '../portal/service.js';
import { PARTY_CHANGED, RESOURCE_CHANGED } from '../providers/party.js';
import { clientMetadataDocument } from '../providers/registration.js';
import { ProviderRegistry } from '../providers/registry.js';
import { ProviderService } from '../providers/service.js';
import type { SignInDeps } from '../sign-in/deps.js';
import { SignInService } from '../sign-in/service.js';
import type { Storage, StorageHealth } from '../storage/contract.js';
import { createTokenCodec } from '../tokens/format.js';
import { type AuthenticationContext, TokenService } from '../tokens/service.js';
import { probeConnection } from '../upstream/connection-probe.js';
import type { UpstreamDeps } from '../upstream/deps.js';
import { Gateway } from '../upstream/gateway.js';
import { StreamSlots } from '../upstream/limits.js';
import { ApiProxy } from '../upstream/proxy.js';
import { SecretService } from '../vault/secrets.js';
import type { Vault } from '../vault/vault.js';
import { type BrokerConfig, resolveBrokerConfig } from './config.js';

/**
 * A Keyway broker: every operation of the HTTP contract, callable in process.
 *
 * @see [docs/api.md](https://github.com/keyway-dev/keyway/blob/main/docs/api.md) §1–§7 (each operation names its section); [docs/ARCHITECTURE.md](https://github.com/keyway-dev/keyway/blob/main/docs/ARCHITECTURE.md) "Core"
 */
export interface Broker {
  /** Broker tokens (docs/api.md §3). */
  readonly tokens: TokenService;
  /** Secrets in the namespace (docs/api.md §7). */
  readonly secrets: SecretService;
  /** Providers (docs/api.md §4, §6). */
  readonly providers: ProviderService;
  /** Connections (docs/api.md §5). */
  readonly connections: ConnectionService;
  /** The MCP gateway (docs/api.md §13): connections used without their tokens leaving. */
  readonly gateway: Gateway;
  /** The API proxy (docs/api.md §13): classic APIs called with a connection's token. */
  readonly proxy: ApiProxy;
  /** The audit log and the webhook outbox (docs/api.md §11). */
  readonly events: EventService;
  /**
   * Keyway as the authorization server of its MCP endpoints (docs/api.md §17), when
   * `signIn` is configured (`signIn.enabled`).
   */
  readonly signIn: SignInService;
  /** The portal (docs/api.md §18): one MCP endpoint for a namespace's connections. */
  readonly portal: Portal;
  /** Connect sessions and the hosted connect page's access (docs/api.md §19). */
  readonly connectSessions: ConnectSessions;
  /**
   * The public base URL the broker was configured with (no trailing slash), or `null`. Its
   * origin is the one a browser may call the MCP endpoints from (DNS rebinding protection).
   */
  readonly baseUrl: string | null;
  /**
   * The client-ID metadata document of this deployment (served at
   * `GET /api/oauth/client-metadata.json`), or `null` without a `baseUrl`.
   */
  clientMetadataDocument(): Record<string, unknown> | null;
  /** The vault: re-wrap onto the active key with `broker.vault.rewrap(broker.storage)`. */
  readonly vault: Vault;
  /** The storage the broker was built with. */
  readonly storage: Storage;
  /** The guarded fetch (SSRF policy, timeout, size cap) every outbound request uses. */
  readonly outbound: OutboundFetch;
  /**
   * Establishes the principal behind a bearer credential (the root key or a broker token).
   * Pass the client's address so that failed authentications are limited (docs/api.md §12).
   *
   * @throws {KeywayError} `invalid_token`, `rate_limited`.
   */
  authenticate(
    credential: string | null | undefined,
    context?: AuthenticationContext,
  ): Promise<Principal>;
  /**
   * Checks that a principal's scopes cover a resource path, for apps that guard their own
   * resources in the namespace with broker tokens. Returns the canonical path.
   *
   * @throws {KeywayError} `invalid_path`, `insufficient_scope`.
   */
  authorize(principal: Principal, path: string): string;
  /**
   * Deletes expired tokens, pending authorizations, leases, counters, and audit events and
   * ended webhook deliveries past their retention, in batches of 500 until
   * none is left. Runs in the background every `purgeIntervalMs`; call it yourself when
   * that is off.
   *
   * @returns how many records were deleted.
   */
  purgeExpired(): Promise<number>;
  /**
   * Whether this broker can serve: its storage answers and holds at least the schema this
   * code needs. For readiness probes; never throws.
   *
   * @see [docs/api.md §16](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#16-health-metrics-logs-shutdown)
   */
  health(): Promise<BrokerHealth>;
  /** Stops background work and closes the storage. */
  close(): Promise<void>;
}

/**
 * A broker's readiness, as {@link Broker.health} answers it.
 *
 * @see [docs/api.md §16](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#16-health-metrics-logs-shutdown)
 */
export interface BrokerHealth {
  ready: boolean;
  /** What the storage said of itself, or `null` when it could not answer. */
  storage: StorageHealth | null;
  /** Why the broker is not ready (for an operator, not for the public), or `null`. */
  reason: string | null;
}

const PURGE_BATCH = 500;

/**
 * Creates a broker. Options are validated up front: a mistake is a `TypeError` naming it.
 *
 * @example
 * import { createBroker, rootPrincipal } from '@keyway/core';
 * import { memoryStorage } from '@keyway/store-memory';
 *
 * const broker = createBroker({ rootKey: process.env.KEYWAY_ROOT_KEY, storage: memoryStorage() });
 * const { access_token } = await broker.tokens.mint(rootPrincipal(), {
 *   name: 'alice',
 *   scopes: ['acme/users/alice'],
 * });
 *
 * @see [docs/api.md §1.1](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#11-authentication) (the root key), [README.md "Embedding"](https://github.com/keyway-dev/keyway/blob/main/README.md#embedding)
 */
export function createBroker(config: BrokerConfig): Broker {
  const resolved = resolveBrokerConfig(config);
  const limiter = new RateLimiter(
    resolved.rateLimits,
    resolved.storage,
    resolved.now,
    resolved.observe,
  );
  const tokens = new TokenService({ ...resolved, limiter });
  const { events, storage } = resolved;
  const vault = (): Vault => resolved.vault;
  const secrets = new SecretService({ storage, vault, now: resolved.now, events });
  const registry: ProviderRegistry = new ProviderRegistry({
    storage,
    vault,
    outbound: resolved.outbound,
    now: resolved.now,
    allowedHosts: resolved.allowedHosts,
    profile: resolved.profile,
    declared: resolved.providers,
    profiles: resolved.profiles,
    assertionSources: resolved.assertionSources,
    events,
    onPartyChanged: (providerId, moved) =>
      records.requireReauthorizationOf(
        providerId,
        moved === 'resource' ? RESOURCE_CHANGED : PARTY_CHANGED,
      ),
  });
  const providers = new ProviderService({
    storage,
    outbound: resolved.outbound,
    management: resolved.providerManagement,
    allowedHosts: resolved.allowedHosts,
    registry,
    events,
    profile: resolved.profile,
    limiter,
    observe: resolved.observe,
  });
  const connectionDeps: ConnectionDeps = {
    storage,
    vault,
    outbound: resolved.outbound,
    providers: registry,
    now: resolved.now,
    randomBytes: resolved.randomBytes,
    profile: resolved.profile,
    allowedRedirects: resolved.allowedRedirects,
    allowedHosts: resolved.allowedHosts,
    refreshMarginMs: resolved.refreshMarginMs,
    refreshLeaseMs: resolved.refreshLeaseMs,
    refreshIdleAfterMs: resolved.refreshIdleAfterMs,
    refreshAhead: resolved.refreshAhead,
    expiringNoticeMs: resolved.expiringNoticeMs,
    assertionSources: resolved.assertionSources,
    events,
    observe: resolved.observe,
  };
  const records = new ConnectionRecords(connectionDeps);
  const refresher = new Refresher(connectionDeps, records);
  // The upstream layer sends with connections; the connection service starts authorizations
  // for it and answers its probe: wired here, so neither imports the other.
  const upstream: UpstreamDeps = {
    records,
    refresher,
    providers: registry,
    storage,
    now: resolved.now,
    randomBytes: resolved.randomBytes,
    outbound: resolved.outbound,
    authorize: (principal, providerId, input) =>
      connections.authorize(principal, providerId, input),
    stream: resolved.stream,
    limits: resolved.gateway,
    slots: new StreamSlots(resolved.gateway, resolved.observe),
    observe: resolved.observe,
  };
  const connections = new ConnectionService(connectionDeps, records, refresher, (principal, id) =>
    probeConnection(upstream, principal, id),
  );
  const gatewayOptions = upstream;
  const gateway = new Gateway(gatewayOptions);
  // Idle refresh, so refresh tokens that expire when unused stay alive: a tenth of the
  // idle time between rounds, 1 s to 1 h.
  const idle =
    resolved.refreshIdleAfterMs === false
      ? null
      : rounds(
          clamp(resolved.refreshIdleAfterMs / 10, 1000, 3_600_000),
          () => connections.refreshIdle(),
          resolved.onBackgroundError,
        );
  // Refresh ahead and the expiring notice: a round every half refresh margin, 1 s to 1 min,
  // so a token is seen within its window (twice the margin) before it expires.
  const ahead =
    resolved.refreshAhead === false
      ? null
      : rounds(
          clamp(resolved.refreshMarginMs / 2, 1000, 60_000),
          () => connections.refreshAhead(),
          resolved.onBackgroundError,
        );
  const sender =
    resolved.webhooks.length === 0
      ? null
      : new WebhookSender({
          storage,
          outbound: resolved.outbound,
          now: resolved.now,
          webhooks: resolved.webhooks,
          retentionMs: events.retentionMs,
          owner: toBase64Url(resolved.randomBytes(12)),
          onError: resolved.onBackgroundError,
          observe: resolved.observe,
        });
  if (sender !== null) {
    events.onDeliveries = () => sender.wake();
    if (resolved.webhookPollIntervalMs !== false) {
      sender.start(resolved.webhookPollIntervalMs);
      // Deliveries left by a previous run (a crash, a restart) go out at once.
      sender.wake();
    }
  }
  const eventService = new EventService(storage, sender);
  const signInDeps: SignInDeps | null =
    resolved.signIn === null || resolved.baseUrl === null
      ? null
      : {
          settings: resolved.signIn,
          issuer: resolved.baseUrl,
          storage,
          vault,
          codec: createTokenCodec(resolved.rootKey, resolved.crypto),
          outbound: resolved.outbound,
          events,
          limiter,
          now: resolved.now,
          randomBytes: resolved.randomBytes,
          authenticate: (credential, context) => tokens.authenticate(credential, context),
        };
  const signIn = new SignInService(signInDeps);
  const portal = new Portal({
    gateway,
    storage,
    authorize: (principal, providerId, input) =>
      connections.authorize(principal, providerId, input),
    settings: resolved.portal,
    events,
    observe: resolved.observe,
    now: resolved.now,
    randomBytes: resolved.randomBytes,
    onError: resolved.onBackgroundError,
  });

  const connectSessions = new ConnectSessions({
    baseUrl: resolved.baseUrl,
    allowedRedirects: resolved.allowedRedirects,
    storage,
    vault,
    events,
    limiter,
    authorize: (principal, providerId, input, options) =>
      connections.authorize(principal, providerId, input, options),
    disconnect: (principal, connectionId) => connections.delete(principal, connectionId),
    now: resolved.now,
    randomBytes: resolved.randomBytes,
  });

  async function purgeExpired(): Promise<number> {
    let total = 0;
    for (;;) {
      // Short batches: each is a few quick statements, never a long lock on a table.
      const removed = await storage.purgeExpired(resolved.now(), PURGE_BATCH);
      total += removed;
      if (removed < PURGE_BATCH) break;
    }
    // Clients that registered to sign in and went unused for 30 days (docs/api.md §17).
    return total + (await signIn.forgetIdleClients());
  }

  let purging: Promise<unknown> | null = null;
  let timer: ReturnType<typeof setInterval> | undefined;
  if (resolved.purgeIntervalMs !== false) {
    timer = setInterval(() => {
      if (purging !== null) return; // the previous round is still going
      purging = purgeExpired()
        .catch(resolved.onBackgroundError)
        .finally(() => {
          purging = null;
        });
    }, resolved.purgeIntervalMs);
    // A purge timer alone must not keep a process alive (Node, Bun; Deno ignores this).
    (timer as { unref?: () => void }).unref?.();
  }

  return {
    tokens,
    secrets,
    providers,
    connections,
    gateway,
    proxy: new ApiProxy(gatewayOptions),
    events: eventService,
    signIn,
    portal,
    connectSessions,
    baseUrl: resolved.baseUrl,
    clientMetadataDocument() {
      return resolved.profile === null ? null : clientMetadataDocument(resolved.profile);
    },
    get vault() {
      return vault();
    },
    storage,
    outbound: resolved.outbound,
    authenticate: (credential, context) => tokens.authenticate(credential, context),
    authorize(principal, path) {
      const canonical = parseResourcePath(path);
      assertCoversPath(principal, canonical);
      return canonical;
    },
    purgeExpired,
    async health() {
      let storageHealth: StorageHealth;
      try {
        storageHealth = await storage.health();
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        return { ready: false, storage: null, reason: `storage: ${message.slice(0, 200)}` };
      }
      const { schema } = storageHealth;
      if (schema !== null && schema.version < schema.expected) {
        return {
          ready: false,
          storage: storageHealth,
          reason: `storage: schema version ${schema.version}, this code needs ${schema.expected}`,
        };
      }
      return { ready: true, storage: storageHealth, reason: null };
    },
    async close() {
      clearInterval(timer);
      await portal.close();
      await sender?.stop();
      await purging;
      await idle?.stop();
      await ahead?.stop();
      await storage.close();
    },
  };
}

/** `value` rounded down into `[min, max]`. */
function clamp(value: number, min: number, max: number): number {
  return Math.min(Math.max(Math.floor(value), min), max);
}

/**
 * Background work in rounds `every` ms apart, one at a time (a round still running skips
 * the next), its errors reported; `stop` ends them and waits for the one running.
 */
function rounds(
  every: number,
  round: () => Promise<unknown>,
  onError: (error: unknown) => void,
): { stop(): Promise<void> } {
  let running: Promise<unknown> | null = null;
  const timer = setInterval(() => {
    if (running !== null) return;
    running = round()
      .catch(onError)
      .finally(() => {
        running = null;
      });
  }, every);
  (timer as { unref?: () => void }).unref?.();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
