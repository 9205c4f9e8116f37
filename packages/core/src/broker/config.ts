import { z } from 'zod';
import { type RateLimitsConfig, RateLimitsSchema } from '../auth/rate-limit.js';
import { catalogOf } from '../catalog/catalog.js';
import type { Profile, ProfileInput } from '../catalog/schema.js';
import {
  EXPIRING_NOTICE,
  expiringNoticeMs,
  REFRESH_AHEAD,
  REFRESH_IDLE,
  refreshIdleAfterMs,
} from '../connections/refresh.js';
import type { ProviderInput } from '../contract/schemas.js';
import { EventLog, type KeywayEvent, type WebhookEndpoint } from '../events/log.js';
import { WebhookSchema } from '../events/webhook-config.js';
import { createOutboundFetch, endpointProblem, type OutboundFetch } from '../outbound/fetch.js';
import { allowedHostSet } from '../outbound/hosts.js';
import { observedOutbound } from '../outbound/observed.js';
import { createStreamingFetch, type StreamingFetch } from '../outbound/stream.js';
import type { Transport } from '../outbound/transport.js';
import { defaultCrypto, type PlatformCrypto } from '../platform/crypto.js';
import { pooledRandomBytes } from '../platform/random.js';
import { PortalSchema, type PortalSettings, portalSettings } from '../portal/portal-options.js';
import { type AssertionSource, AssertionSourcesSchema } from '../providers/assertion-sources.js';
import { type ClientProfile, profileOf } from '../providers/registration.js';
import { SignInSchema, type SignInSettings, signInSettings } from '../sign-in/settings.js';
import { STORAGE_METHODS, type Storage } from '../storage/contract.js';
import { type Observer, safeObserver } from '../telemetry/observation.js';
import { TOKEN_PREFIX } from '../tokens/format.js';
import { MIN_ROOT_KEY_LENGTH, rootKeyWeakness } from '../tokens/root-key.js';
import { type GatewayLimits, GatewayLimitsSchema, gatewayLimits } from '../upstream/limits.js';
import { deriveVaultKey, Vault } from '../vault/vault.js';

const WEAK_ROOT_KEY =
  'generate one with `openssl rand -base64 32`, or start `keyway serve` without KEYWAY_ROOT_KEY to have one printed';

const isFunction = (value: unknown) => typeof value === 'function';
const FUNCTION = (field: string) => `"${field}" must be a function`;
/** A value taken as given (an object), checked where it is used. */
const objectOf = <T>() => z.custom<T>((value) => typeof value === 'object' && value !== null);

const POLL_INTERVAL = '"webhookPollIntervalMs" must be false or an integer from 100 to 3600000';
const RETENTION = '"auditRetentionDays" must be an integer from 1 to 3650';
const NO_PATTERN = '"allowedHosts" takes host names, not patterns: "*" would allow nothing';
const PURGE_INTERVAL = '"purgeIntervalMs" must be false or an integer from 1000 to 86400000';

// The options of createBroker, each checked and documented once: `BrokerConfig` is this
// schema's input type, and each field's comment is what an editor shows for it.
const BrokerConfigSchema = z.object({
  /**
   * The deployment secret: at least 32 characters. It can do everything, and every broker
   * token's tag is keyed by a key derived from it, so changing it invalidates them all.
   */
  rootKey: z
    .string({ error: '"rootKey" must be a string' })
    .min(MIN_ROOT_KEY_LENGTH, `"rootKey" must be at least ${MIN_ROOT_KEY_LENGTH} characters`)
    .regex(/^[\x21-\x7e]+$/, {
      message: '"rootKey" must be visible ASCII without spaces, so it can be sent in a header',
    })
    .refine((key) => !key.startsWith(TOKEN_PREFIX), {
      message: `"rootKey" must not start with "${TOKEN_PREFIX}", the broker token prefix`,
    })
    .superRefine((key, context) => {
      if (key.length < MIN_ROOT_KEY_LENGTH) return;
      const weakness = rootKeyWeakness(key);
      if (weakness !== null) {
        context.addIssue({
          code: 'custom',
          message: `"rootKey" is too easy to guess (${weakness}): ${WEAK_ROOT_KEY}`,
        });
      }
    }),
  /** Where records live: `memoryStorage()`, `sqliteStorage(…)`, `postgresStorage(…)`. */
  storage: z.custom<Storage>(
    (value) =>
      typeof value === 'object' &&
      value !== null &&
      STORAGE_METHODS.every((method) => isFunction((value as Record<string, unknown>)[method])),
    { message: '"storage" must implement the Storage interface of @keyway/core' },
  ),
  /** The clock, epoch milliseconds. Injected for tests; default `Date.now`. */
  now: z.custom<() => number>(isFunction, { message: '"now" must be a function' }).optional(),
  /** The random source. Injected for tests; default `crypto.getRandomValues`, drawn a pool at a time. */
  randomBytes: z
    .custom<(length: number) => Uint8Array>(isFunction, {
      message: '"randomBytes" must be a function',
    })
    .optional(),
  /**
   * SHA-256 and HMAC-SHA-256 of the token check. Default: the runtime's `node:crypto`
   * where it has one (Node, Bun, Deno; native code), else plain JavaScript (@noble/hashes).
   */
  crypto: z
    .custom<PlatformCrypto>(
      (value) =>
        typeof value === 'object' &&
        value !== null &&
        isFunction((value as Record<string, unknown>).sha256) &&
        isFunction((value as Record<string, unknown>).hmacSha256),
      { message: '"crypto" must have the functions sha256 and hmacSha256' },
    )
    .optional(),
  /**
   * The vault key ring: base64url-encoded 32-byte keys (`generateVaultKey()` makes one).
   * The first encrypts; all decrypt, so a new key goes first and an old one stays until
   * `broker.vault.rewrap()` has moved every entry. Default: one key derived from the root
   * key (`deriveVaultKey`), so the vault works with nothing more; set your own keys to
   * rotate the root key and the vault independently.
   */
  vaultKeys: z.array(z.string(), { error: '"vaultKeys" must be an array of strings' }).optional(),
  /**
   * The transport of every outbound request (discovery, registration, token endpoints).
   * Default: on Node, `createNodeFetch()`, which checks every address a host name resolves
   * to and pins the connection to them; on Deno and Bun, their resolvers check the
   * addresses before the platform's `fetch`; on other runtimes host names not in
   * `allowedHosts` are refused (pass a resolving `fetch` there).
   */
  fetch: z.custom<Transport>(isFunction, { message: '"fetch" must be a function' }).optional(),
  /**
   * The public base URL of the deployment, including where the handler is mounted; the
   * OAuth callback is `{baseUrl}/api/oauth/callback`. Required with `providerManagement`
   * or `providers` (a `TypeError` at construction otherwise); without it, the broker does
   * tokens and secrets only.
   */
  baseUrl: z
    .url({ protocol: /^https?$/, error: '"baseUrl" must be an absolute http(s) URL' })
    .refine((url) => !url.includes('?') && !url.includes('#'), {
      message: '"baseUrl" must not have a query or fragment',
    })
    .optional(),
  /**
   * The client-ID metadata document URL, when it is hosted elsewhere. Default
   * `{baseUrl}/api/oauth/client-metadata.json`. Used only when it is `https`.
   */
  clientMetadataUrl: z
    .url({ protocol: /^https?$/, error: '"clientMetadataUrl" must be an absolute http(s) URL' })
    .optional(),
  /** `client_name` at authorization servers. Default `Keyway`. */
  clientName: z.string().min(1).max(200).optional(),
  /**
   * Sign-in for MCP clients (docs/api.md §17): Keyway becomes the authorization server of its
   * MCP endpoints, so a client reaches a connection by its URL alone. `methods` lists how a
   * user signs in (`token`: a pasted broker token; `oidc`: the OpenID provider of `oidc`).
   * Needs `baseUrl` (the issuer). Default off.
   */
  signIn: SignInSchema.optional(),
  /**
   * The portal (docs/api.md §18): how long lists wait for servers and are kept, how long idle
   * sessions live, how much one portal holds, and whether calls are recorded
   * (`auditToolCalls`).
   */
  portal: PortalSchema.optional(),
  /**
   * Origins that `redirect_to` of an authorize call may point to
   * (`https://app.example.com`). Default none.
   */
  allowedRedirects: z
    .array(
      z.url({
        protocol: /^https?$/,
        error: '"allowedRedirects" must be origins like https://app.example.com',
      }),
    )
    .optional(),
  /**
   * Called with every event (token, provider, secret and connection changes). Never
   * receives a secret. A hook that throws or rejects does not break the request; its
   * error goes to `onBackgroundError`.
   */
  onEvent: z
    .custom<(event: KeywayEvent) => void | Promise<void>>(isFunction, {
      message: '"onEvent" must be a function',
    })
    .optional(),
  /**
   * Told what the broker did, for metrics (docs/api.md §16; `@keyway/http/metrics`), never a
   * secret. A hook that throws breaks nothing: its error goes to `onBackgroundError`.
   */
  observe: z.custom<Observer>(isFunction, { message: '"observe" must be a function' }).optional(),
  /**
   * Webhook endpoints (docs/api.md §11): each event of the listed `types` (all when absent) is
   * POSTed to `url`, signed as Standard Webhooks says with `secret` (`whsec_` and a base64
   * key), at least once, from an outbox in the storage. Default none.
   */
  webhooks: z.array(WebhookSchema, { error: '"webhooks" must be an array' }).optional(),
  /**
   * How often this instance looks for webhook deliveries that are due (retries, and events
   * written by other instances), in milliseconds; `false` turns it off (call
   * `broker.events.deliverDue()` yourself). A delivery of this instance's own event starts
   * at once either way. Default 1000.
   */
  webhookPollIntervalMs: z
    .union(
      [
        z.literal(false),
        z.number().int(POLL_INTERVAL).min(100, POLL_INTERVAL).max(3_600_000, POLL_INTERVAL),
      ],
      { error: POLL_INTERVAL },
    )
    .optional(),
  /** Days the audit log keeps an event, and the outbox an ended delivery (1–3650). Default 90. */
  auditRetentionDays: z
    .number({ error: RETENTION })
    .int(RETENTION)
    .min(1, RETENTION)
    .max(3650, RETENTION)
    .optional(),
  /** Whether the provider endpoints work (`/api/admin/providers`, discover). Default false. */
  providerManagement: z.boolean({ error: '"providerManagement" must be a boolean' }).optional(),
  /**
   * The app's own profiles of the `oauth2` template, beside the built-in catalog (docs/api.md
   * §15); each checked here, an id of the catalog refused.
   */
  profiles: z.array(objectOf<ProfileInput>()).optional(),
  /**
   * Where `jwt_bearer` providers read their assertions (docs/api.md §14, workload identity):
   * names to `{ file }`, `{ directory }` (a provider names a file of it), `{ env }` or a
   * function. Read at each token request, never stored. Default none.
   */
  assertionSources: AssertionSourcesSchema.optional(),
  /** Providers declared in code, by id; they work with provider management off. */
  providers: z.record(z.string(), objectOf<ProviderInput>()).optional(),
  /**
   * Hosts that outbound requests may reach over plain `http` and on loopback or private
   * addresses: for development and tests only. Default none.
   */
  allowedHosts: z
    .array(
      z
        .string()
        .min(1)
        .refine((host) => !host.includes('*'), NO_PATTERN),
      {
        error: '"allowedHosts" must be an array of host names',
      },
    )
    .optional(),
  /** Limits of outbound requests: whole-request timeout and largest body read. */
  outbound: z
    .strictObject(
      {
        timeoutMs: z.number().int().min(1).max(300_000).optional(),
        maxResponseBytes: z
          .number()
          .int()
          .min(1024)
          .max(64 * 1024 * 1024)
          .optional(),
      },
      { error: '"outbound" must be { timeoutMs?, maxResponseBytes? } with integers in range' },
    )
    .optional(),
  /**
   * The MCP gateway's limits (docs/api.md §13): `maxBodyBytes` (default 4 MiB),
   * `idleTimeoutMs` (default 5 min), `maxStreamsPerConnection` (64), `maxStreamsPerCaller` (256).
   */
  gateway: GatewayLimitsSchema.optional(),
  /**
   * How often expired tokens, pending authorizations and leases are purged in the
   * background, in milliseconds; `false` turns it off (call `broker.purgeExpired()`
   * yourself, e.g. from a cron job). Default 60000.
   */
  purgeIntervalMs: z
    .union(
      [
        z.literal(false),
        z.number().int(PURGE_INTERVAL).min(1000, PURGE_INTERVAL).max(86_400_000, PURGE_INTERVAL),
      ],
      {
        error: PURGE_INTERVAL,
      },
    )
    .optional(),
  /**
   * Refresh an access token when it expires within this many milliseconds (0–3600000).
   * Default 60000.
   */
  refreshMarginMs: z
    .number()
    .int('"refreshMarginMs" must be an integer from 0 to 3600000')
    .min(0, '"refreshMarginMs" must be an integer from 0 to 3600000')
    .max(3_600_000, '"refreshMarginMs" must be an integer from 0 to 3600000')
    .optional(),
  /**
   * How long one instance holds a connection's refresh lease, in milliseconds; the lease is
   * renewed every third of it while the refresh runs, and another instance may take it
   * only once it has run out (its holder died). Default 30000.
   */
  refreshLeaseMs: z
    .number()
    .int('"refreshLeaseMs" must be an integer from 300 to 600000')
    .min(300, '"refreshLeaseMs" must be an integer from 300 to 600000')
    .max(600_000, '"refreshLeaseMs" must be an integer from 300 to 600000')
    .optional(),
  /**
   * Refresh active, refreshable connections that nothing has refreshed for this long, in
   * the background (with the refresh lease, so once across instances): refresh tokens that
   * expire when idle (Microsoft's after 90 days) stay alive. Milliseconds, or a duration
   * such as `"7d"`, at least one second; `false` (the default) turns it off.
   *
   * @see docs/connections.md "Idle refresh"
   */
  refreshIdleAfter: z
    .union([z.literal(false), z.number(), z.string()], { error: REFRESH_IDLE })
    .optional(),
  /**
   * Refresh ahead, in a background sweep of the active connections (with the refresh lease,
   * so once across instances): `"rotating"` refreshes the connections whose server rotates
   * refresh tokens (seen on a refresh, or documented by their catalog profile) before their
   * access token expires, instead of at first use; `"all"` every refreshable one; `false`
   * (the default) none. The same sweep sends `connection.expiring` before a refresh token's
   * known end.
   *
   * @see docs/connections.md "Refresh ahead"
   */
  refreshAhead: z
    .union([z.literal(false), z.enum(['rotating', 'all'])], { error: REFRESH_AHEAD })
    .optional(),
  /**
   * How long before a refresh token's known end (`refresh_token_expires_in`, or its profile's
   * documented lifetime) `connection.expiring` is sent: milliseconds or a duration such as
   * `"7d"`, at least one minute. Default `"7d"`.
   */
  expiringNotice: z.union([z.number(), z.string()], { error: EXPIRING_NOTICE }).optional(),
  /**
   * Rate limits (docs/api.md §12): failed authentications per client address (default 20 per
   * minute; the handler passes the address) and tokens minted per scoped caller (default 60
   * per minute). `false` turns all off, `{ auth: false }` one; `shared: true` keeps the
   * counters in the storage so several instances share them. Default: on, per instance.
   */
  rateLimits: RateLimitsSchema.optional(),
  /**
   * Called with errors of background work (purging). Default: `console.error`. Requests
   * never wait on background work, and its errors never reach them.
   */
  onBackgroundError: z
    .custom<(error: unknown) => void>(isFunction, { message: FUNCTION('onBackgroundError') })
    .optional(),
});

/**
 * Options of {@link createBroker}: the fields and their defaults are documented on each
 * (an editor shows them); a wrong value is a `TypeError` naming the field.
 *
 * @see [docs/api.md §1.1](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#11-authentication), §6, §12; docs/security.md
 */
export type BrokerConfig = z.input<typeof BrokerConfigSchema>;

/** The validated configuration with defaults applied. */
export interface ResolvedBrokerConfig {
  rootKey: string;
  storage: Storage;
  now: () => number;
  randomBytes: (length: number) => Uint8Array;
  crypto: PlatformCrypto;
  vault: Vault;
  /** The guarded fetch every outbound request goes through. */
  outbound: OutboundFetch;
  /** The guarded streaming fetch of the gateway (no deadline for the whole body). */
  stream: StreamingFetch;
  gateway: GatewayLimits;
  allowedHosts: string[];
  profile: ClientProfile | null;
  /** The deployment's base URL without a trailing slash, or `null`. */
  baseUrl: string | null;
  /** Sign-in for MCP clients, or `null` when off. */
  signIn: SignInSettings | null;
  portal: PortalSettings;
  providerManagement: boolean;
  providers: Record<string, ProviderInput>;
  profiles: ReadonlyMap<string, Profile>;
  assertionSources: Readonly<Record<string, AssertionSource>>;
  allowedRedirects: string[];
  events: EventLog;
  webhooks: WebhookEndpoint[];
  webhookPollIntervalMs: number | false;
  purgeIntervalMs: number | false;
  refreshMarginMs: number;
  refreshLeaseMs: number;
  refreshIdleAfterMs: number | false;
  refreshAhead: false | 'rotating' | 'all';
  expiringNoticeMs: number;
  rateLimits: RateLimitsConfig | false;
  onBackgroundError: (error: unknown) => void;
  /** The `observe` hook, made safe (never throws); a no-op without one. */
  observe: Observer;
}

/**
 * Validates broker options. A caller's mistake is a `TypeError` naming the option; the
 * root key itself is never part of the message.
 */
export function resolveBrokerConfig(config: BrokerConfig): ResolvedBrokerConfig {
  const result = BrokerConfigSchema.safeParse(config);
  if (!result.success) {
    const messages = result.error.issues.map((issue) =>
      issue.path.length > 0 && !issue.message.startsWith('"')
        ? `"${issue.path.join('.')}": ${issue.message}`
        : issue.message,
    );
    throw new TypeError(`invalid broker configuration: ${messages.join('; ')}`);
  }
  const parsed = result.data;
  const usesProviders =
    parsed.providerManagement === true || Object.keys(parsed.providers ?? {}).length > 0;
  if (usesProviders && parsed.baseUrl === undefined) {
    throw new TypeError(
      'invalid broker configuration: "baseUrl" is required with providerManagement or providers: the OAuth callback ' +
        'is {baseUrl}/api/oauth/callback',
    );
  }
  if (parsed.signIn !== undefined && parsed.baseUrl === undefined) {
    throw new TypeError(
      'invalid broker configuration: "baseUrl" is required with signIn: it is the issuer MCP clients sign in at',
    );
  }
  const onBackgroundError =
    parsed.onBackgroundError ??
    ((error: unknown) => console.error('keyway: background work failed', error));
  const webhooks = parsed.webhooks ?? [];
  const allowedHosts = allowedHostSet(parsed.allowedHosts);
  webhooks.forEach((endpoint, index) => {
    const problem = endpointProblem(endpoint.url, allowedHosts);
    if (problem !== null) {
      throw new TypeError(`invalid broker configuration: "webhooks.${index}.url": ${problem}`);
    }
  });
  if (new Set(webhooks.map((endpoint) => endpoint.url)).size !== webhooks.length) {
    throw new TypeError('invalid broker configuration: two "webhooks" have the same url');
  }
  const observe = safeObserver(parsed.observe, onBackgroundError);
  const gateway = gatewayLimits(parsed.gateway);
  const now = parsed.now ?? Date.now;
  const randomBytes = parsed.randomBytes ?? pooledRandomBytes();
  return {
    rootKey: parsed.rootKey,
    storage: parsed.storage,
    now,
    randomBytes,
    crypto: parsed.crypto ?? defaultCrypto(),
    vault: new Vault(parsed.vaultKeys ?? [deriveVaultKey(parsed.rootKey)]),
    allowedHosts: parsed.allowedHosts ?? [],
    profile: profileOf(parsed.baseUrl, parsed.clientMetadataUrl, parsed.clientName),
    baseUrl: parsed.baseUrl === undefined ? null : parsed.baseUrl.replace(/\/+$/, ''),
    signIn: parsed.signIn === undefined ? null : signInSettings(parsed.signIn),
    portal: portalSettings(parsed.portal),
    providerManagement: parsed.providerManagement ?? false,
    providers: parsed.providers ?? {},
    profiles: catalogOf(parsed.profiles),
    assertionSources: parsed.assertionSources ?? {},
    allowedRedirects: (parsed.allowedRedirects ?? []).map((url) => new URL(url).origin),
    events: new EventLog({
      storage: parsed.storage,
      now,
      randomBytes,
      retentionDays: parsed.auditRetentionDays ?? 90,
      webhooks,
      onEvent: parsed.onEvent,
      onError: (error) => onBackgroundError(error),
    }),
    webhooks,
    webhookPollIntervalMs: parsed.webhookPollIntervalMs ?? 1000,
    outbound: observedOutbound(
      createOutboundFetch({
        ...(parsed.fetch === undefined ? {} : { fetch: parsed.fetch }),
        allowedHosts: parsed.allowedHosts ?? [],
        ...parsed.outbound,
      }),
      allowedHosts,
      observe,
    ),
    stream: observedOutbound(
      createStreamingFetch({
        ...(parsed.fetch === undefined ? {} : { fetch: parsed.fetch }),
        allowedHosts: parsed.allowedHosts ?? [],
        timeoutMs: gateway.idleTimeoutMs,
        idleTimeoutMs: gateway.idleTimeoutMs,
      }),
      allowedHosts,
      observe,
    ),
    gateway,
    purgeIntervalMs: parsed.purgeIntervalMs ?? 60_000,
    refreshMarginMs: parsed.refreshMarginMs ?? 60_000,
    refreshLeaseMs: parsed.refreshLeaseMs ?? 30_000,
    refreshIdleAfterMs: refreshIdleAfterMs(parsed.refreshIdleAfter),
    refreshAhead: parsed.refreshAhead ?? false,
    expiringNoticeMs: expiringNoticeMs(parsed.expiringNotice),
    rateLimits: parsed.rateLimits ?? {},
    onBackgroundError,
    observe,
  };
}
