import { Webhook } from 'standardwebhooks';
import { z } from 'zod';
import type { RateLimitsConfig } from '../auth/rate-limit.js';
import { EVENT_TYPES } from '../contract/codes.js';
import type { ProviderInput } from '../contract/schemas.js';
import { parseDuration } from '../contract/time.js';
import { EventLog, type KeywayEvent, type WebhookEndpoint } from '../events/log.js';
import { createOutboundFetch, endpointProblem, type OutboundFetch } from '../outbound/fetch.js';
import { allowedHostSet } from '../outbound/hosts.js';
import type { Transport } from '../outbound/transport.js';
import { nobleCrypto, type PlatformCrypto } from '../platform/crypto.js';
import type { ClientProfile } from '../providers/registration.js';
import { STORAGE_METHODS, type Storage } from '../storage/contract.js';
import { TOKEN_PREFIX } from '../tokens/format.js';
import { deriveVaultKey, Vault } from '../vault/vault.js';

/** Shortest root key accepted (API.md §1.1). */
export const MIN_ROOT_KEY_LENGTH = 32;

/** Least character-frequency entropy estimate of a root key, in bits. */
export const MIN_ROOT_KEY_BITS = 72;

/**
 * Why a root key is guessable, or `null`. A guard against obvious mistakes (`aaaa…`, a word
 * repeated), not a measure of strength: the estimate is the Shannon entropy of the key's
 * character frequencies times its length, and a key must not repeat a shorter part of it.
 * A random hex key of 32 characters passes (about 115 bits by this estimate).
 */
export function rootKeyWeakness(key: string): string | null {
  for (let period = 1; period <= key.length / 2; period++) {
    let repeats = true;
    for (let i = period; i < key.length && repeats; i++) repeats = key[i] === key[i - period];
    if (repeats) return 'it repeats a shorter part of itself';
  }
  const counts = new Map<string, number>();
  for (const char of key) counts.set(char, (counts.get(char) ?? 0) + 1);
  let bits = 0;
  for (const count of counts.values()) {
    const p = count / key.length;
    bits -= count * Math.log2(p);
  }
  if (bits < MIN_ROOT_KEY_BITS) {
    return `its characters carry about ${Math.floor(bits)} bits, at least ${MIN_ROOT_KEY_BITS} are needed`;
  }
  return null;
}

const WEAK_ROOT_KEY =
  'generate one with `openssl rand -base64 32`, or start `keyway serve` without KEYWAY_ROOT_KEY to have one printed';

/**
 * Options of {@link createBroker}.
 *
 * @see API.md §1.1, §6, §12; docs/security.md
 */
export interface BrokerConfig {
  /**
   * The deployment secret: at least 32 characters. It can do everything, and every broker
   * token's tag is keyed by a key derived from it, so changing it invalidates them all.
   */
  rootKey: string;
  /** Where records live: `memoryStorage()`, `sqliteStorage(…)`, `postgresStorage(…)`. */
  storage: Storage;
  /** The clock, epoch milliseconds. Injected for tests; default `Date.now`. */
  now?: () => number;
  /** The random source. Injected for tests; default `crypto.getRandomValues`. */
  randomBytes?: (length: number) => Uint8Array;
  /**
   * SHA-256 and HMAC-SHA-256 of the token check. Default {@link nobleCrypto} (plain
   * JavaScript, every runtime); on Node, `nodeCrypto` from `@keyway/http` is about twice
   * as fast.
   */
  crypto?: PlatformCrypto;
  /**
   * The vault key ring: base64url-encoded 32-byte keys (`generateVaultKey()` makes one).
   * The first encrypts; all decrypt, so a new key goes first and an old one stays until
   * `broker.vault.rewrap()` has moved every entry. Default: one key derived from the root
   * key (`deriveVaultKey`), so the vault works with nothing more; set your own keys to
   * rotate the root key and the vault independently.
   */
  vaultKeys?: string[];
  /**
   * The transport of every outbound request (discovery, registration, token endpoints).
   * Default: on Node, `createNodeFetch()`, which checks every address a host name resolves
   * to and pins the connection to them; on Deno and Bun, their resolvers check the
   * addresses before the platform's `fetch`; on other runtimes host names not in
   * `allowedHosts` are refused (pass a resolving `fetch` there).
   */
  fetch?: Transport;
  /**
   * Hosts that outbound requests may reach over plain `http` and on loopback or private
   * addresses: for development and tests only. Default none.
   */
  allowedHosts?: string[];
  /** Limits of outbound requests: whole-request timeout and largest body read. */
  outbound?: { timeoutMs?: number; maxResponseBytes?: number };
  /**
   * The public base URL of the deployment, including where the handler is mounted; the
   * OAuth callback is `{baseUrl}/api/oauth/callback`. Required with `providerManagement`
   * or `providers` (a `TypeError` at construction otherwise); without it, the broker does
   * tokens and secrets only.
   */
  baseUrl?: string;
  /**
   * The client-ID metadata document URL, when it is hosted elsewhere. Default
   * `{baseUrl}/api/oauth/client-metadata.json`. Used only when it is `https`.
   */
  clientMetadataUrl?: string;
  /** `client_name` at authorization servers. Default `Keyway`. */
  clientName?: string;
  /** Whether the provider endpoints work (`/api/admin/providers`, discover). Default false. */
  providerManagement?: boolean;
  /** Providers declared in code, by id; they work with provider management off. */
  providers?: Record<string, ProviderInput>;
  /**
   * Origins that `redirect_to` of an authorize call may point to
   * (`https://app.example.com`). Default none.
   */
  allowedRedirects?: string[];
  /**
   * Called with every event (token, provider, secret and connection changes). Never
   * receives a secret. A hook that throws or rejects does not break the request; its
   * error goes to `onBackgroundError`.
   */
  onEvent?: (event: KeywayEvent) => void | Promise<void>;
  /**
   * Webhook endpoints (API.md §11): each event of the listed `types` (all when absent) is
   * POSTed to `url`, signed as Standard Webhooks says with `secret` (`whsec_` and a base64
   * key), at least once, from an outbox in the storage. Default none.
   */
  webhooks?: WebhookEndpoint[];
  /**
   * How often this instance looks for webhook deliveries that are due (retries, and events
   * written by other instances), in milliseconds; `false` turns it off (call
   * `broker.events.deliverDue()` yourself). A delivery of this instance's own event starts
   * at once either way. Default 1000.
   */
  webhookPollIntervalMs?: number | false;
  /** Days the audit log keeps an event, and the outbox an ended delivery (1–3650). Default 90. */
  auditRetentionDays?: number;
  /**
   * How often expired tokens, pending authorizations and leases are purged in the
   * background, in milliseconds; `false` turns it off (call `broker.purgeExpired()`
   * yourself, e.g. from a cron job). Default 60000.
   */
  purgeIntervalMs?: number | false;
  /**
   * Refresh an access token when it expires within this many milliseconds (0–3600000).
   * Default 60000.
   */
  refreshMarginMs?: number;
  /**
   * How long one instance holds a connection's refresh lease, in milliseconds; the lease is
   * renewed every third of it while the refresh runs, and another instance may take it
   * only once it has run out (its holder died). Default 30000.
   */
  refreshLeaseMs?: number;
  /**
   * Refresh active, refreshable connections that nothing has refreshed for this long, in
   * the background (with the refresh lease, so once across instances): refresh tokens that
   * expire when idle (Microsoft's after 90 days) stay alive. Milliseconds, or a duration
   * such as `"7d"`, at least one second; `false` (the default) turns it off.
   *
   * @see docs/connections.md "Idle refresh"
   */
  refreshIdleAfter?: number | string | false;
  /**
   * Rate limits (API.md §12): failed authentications per client address (default 20 per
   * minute; the handler passes the address) and tokens minted per scoped caller (default 60
   * per minute). `false` turns all off, `{ auth: false }` one; `shared: true` keeps the
   * counters in the storage so several instances share them. Default: on, per instance.
   */
  rateLimits?: RateLimitsConfig | false;
  /**
   * Called with errors of background work (purging). Default: `console.error`. Requests
   * never wait on background work, and its errors never reach them.
   */
  onBackgroundError?: (error: unknown) => void;
}

const isFunction = (value: unknown) => typeof value === 'function';

const WEBHOOK_SECRET =
  'a webhook "secret" must be "whsec_" followed by a base64 key (Standard Webhooks)';

function signingKeyProblem(secret: string): string | null {
  if (!/^whsec_[A-Za-z0-9+/]{16,}={0,2}$/.test(secret)) return WEBHOOK_SECRET;
  try {
    new Webhook(secret);
    return null;
  } catch {
    return WEBHOOK_SECRET;
  }
}

const WebhookSchema = z.strictObject(
  {
    url: z.string(),
    secret: z.string().refine((secret) => signingKeyProblem(secret) === null, WEBHOOK_SECRET),
    types: z.array(z.enum(EVENT_TYPES)).min(1).optional(),
  },
  { error: '"webhooks" must be an array of { url, secret, types? }' },
);
const POLL_INTERVAL = '"webhookPollIntervalMs" must be false or an integer from 100 to 3600000';
const RETENTION = '"auditRetentionDays" must be an integer from 1 to 3650';
const REFRESH_IDLE =
  '"refreshIdleAfter" must be false, milliseconds (at least 1000) or a duration such as "7d"';
const PURGE_INTERVAL = '"purgeIntervalMs" must be false or an integer from 1000 to 86400000';

const RATE_LIMITS =
  '"rateLimits" must be false or { auth?, mint?, discover?, shared? } with limits like { limit: 20, windowSeconds: 60 } or false';
const RateLimitSchema = z.strictObject({
  limit: z.number().int().min(1).max(1_000_000_000),
  windowSeconds: z.number().int().min(1).max(86_400),
});

const BrokerConfigSchema = z.object({
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
  storage: z.custom<Storage>(
    (value) =>
      typeof value === 'object' &&
      value !== null &&
      STORAGE_METHODS.every((method) => isFunction((value as Record<string, unknown>)[method])),
    { message: '"storage" must implement the Storage interface of @keyway/core' },
  ),
  now: z.custom<() => number>(isFunction, { message: '"now" must be a function' }).optional(),
  randomBytes: z
    .custom<(length: number) => Uint8Array>(isFunction, {
      message: '"randomBytes" must be a function',
    })
    .optional(),
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
  vaultKeys: z.array(z.string(), { error: '"vaultKeys" must be an array of strings' }).optional(),
  fetch: z.custom<Transport>(isFunction, { message: '"fetch" must be a function' }).optional(),
  baseUrl: z
    .url({ protocol: /^https?$/, error: '"baseUrl" must be an absolute http(s) URL' })
    .refine((url) => !url.includes('?') && !url.includes('#'), {
      message: '"baseUrl" must not have a query or fragment',
    })
    .optional(),
  clientMetadataUrl: z
    .url({ protocol: /^https?$/, error: '"clientMetadataUrl" must be an absolute http(s) URL' })
    .optional(),
  clientName: z.string().min(1).max(200).optional(),
  allowedRedirects: z
    .array(
      z.url({
        protocol: /^https?$/,
        error: '"allowedRedirects" must be origins like https://app.example.com',
      }),
    )
    .optional(),
  onEvent: z
    .custom<(event: KeywayEvent) => void>(isFunction, { message: '"onEvent" must be a function' })
    .optional(),
  webhooks: z.array(WebhookSchema, { error: '"webhooks" must be an array' }).optional(),
  webhookPollIntervalMs: z
    .union(
      [
        z.literal(false),
        z.number().int(POLL_INTERVAL).min(100, POLL_INTERVAL).max(3_600_000, POLL_INTERVAL),
      ],
      { error: POLL_INTERVAL },
    )
    .optional(),
  auditRetentionDays: z
    .number({ error: RETENTION })
    .int(RETENTION)
    .min(1, RETENTION)
    .max(3650, RETENTION)
    .optional(),
  providerManagement: z.boolean({ error: '"providerManagement" must be a boolean' }).optional(),
  providers: z
    .record(
      z.string(),
      z.custom<ProviderInput>((value) => typeof value === 'object' && value !== null),
    )
    .optional(),
  allowedHosts: z
    .array(z.string().min(1), { error: '"allowedHosts" must be an array of host names' })
    .optional(),
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
  refreshMarginMs: z
    .number()
    .int('"refreshMarginMs" must be an integer from 0 to 3600000')
    .min(0, '"refreshMarginMs" must be an integer from 0 to 3600000')
    .max(3_600_000, '"refreshMarginMs" must be an integer from 0 to 3600000')
    .optional(),
  refreshLeaseMs: z
    .number()
    .int('"refreshLeaseMs" must be an integer from 300 to 600000')
    .min(300, '"refreshLeaseMs" must be an integer from 300 to 600000')
    .max(600_000, '"refreshLeaseMs" must be an integer from 300 to 600000')
    .optional(),
  refreshIdleAfter: z
    .union([z.literal(false), z.number(), z.string()], { error: REFRESH_IDLE })
    .optional(),
  rateLimits: z
    .union(
      [
        z.literal(false),
        z.strictObject({
          auth: z.union([z.literal(false), RateLimitSchema]).optional(),
          mint: z.union([z.literal(false), RateLimitSchema]).optional(),
          discover: z.union([z.literal(false), RateLimitSchema]).optional(),
          shared: z.boolean().optional(),
        }),
      ],
      { error: RATE_LIMITS },
    )
    .optional(),
  onBackgroundError: z
    .custom<(error: unknown) => void>(isFunction, {
      message: '"onBackgroundError" must be a function',
    })
    .optional(),
});

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
  allowedHosts: string[];
  profile: ClientProfile | null;
  providerManagement: boolean;
  providers: Record<string, ProviderInput>;
  allowedRedirects: string[];
  events: EventLog;
  webhooks: WebhookEndpoint[];
  webhookPollIntervalMs: number | false;
  purgeIntervalMs: number | false;
  refreshMarginMs: number;
  refreshLeaseMs: number;
  refreshIdleAfterMs: number | false;
  rateLimits: RateLimitsConfig | false;
  onBackgroundError: (error: unknown) => void;
}

/** `refreshIdleAfter` in milliseconds, or `false`. @throws {TypeError} naming the option. */
function refreshIdleAfterMs(value: number | string | false | undefined): number | false {
  if (value === undefined || value === false) return false;
  let ms: number;
  try {
    ms = typeof value === 'number' ? value : parseDuration(value);
  } catch (error) {
    throw new TypeError(
      `invalid broker configuration: "refreshIdleAfter": ${(error as Error).message}`,
    );
  }
  if (!Number.isInteger(ms) || ms < 1000) {
    throw new TypeError(`invalid broker configuration: ${REFRESH_IDLE}`);
  }
  return ms;
}

function profileOf(
  baseUrl: string | undefined,
  clientMetadataUrl: string | undefined,
  clientName: string | undefined,
): ClientProfile | null {
  if (baseUrl === undefined) return null;
  const base = baseUrl.replace(/\/+$/, '');
  return {
    redirectUri: `${base}/api/oauth/callback`,
    metadataDocumentUrl: clientMetadataUrl ?? `${base}/api/oauth/client-metadata.json`,
    clientName: clientName ?? 'Keyway',
  };
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
      'invalid broker configuration: "baseUrl" is required with providerManagement or providers: the OAuth callback is {baseUrl}/api/oauth/callback',
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
  const now = parsed.now ?? Date.now;
  const randomBytes =
    parsed.randomBytes ?? ((length: number) => crypto.getRandomValues(new Uint8Array(length)));
  return {
    rootKey: parsed.rootKey,
    storage: parsed.storage,
    now,
    randomBytes,
    crypto: parsed.crypto ?? nobleCrypto,
    vault: new Vault(parsed.vaultKeys ?? [deriveVaultKey(parsed.rootKey)]),
    allowedHosts: parsed.allowedHosts ?? [],
    profile: profileOf(parsed.baseUrl, parsed.clientMetadataUrl, parsed.clientName),
    providerManagement: parsed.providerManagement ?? false,
    providers: parsed.providers ?? {},
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
    outbound: createOutboundFetch({
      ...(parsed.fetch === undefined ? {} : { fetch: parsed.fetch }),
      allowedHosts: parsed.allowedHosts ?? [],
      ...parsed.outbound,
    }),
    purgeIntervalMs: parsed.purgeIntervalMs ?? 60_000,
    refreshMarginMs: parsed.refreshMarginMs ?? 60_000,
    refreshLeaseMs: parsed.refreshLeaseMs ?? 30_000,
    refreshIdleAfterMs: refreshIdleAfterMs(parsed.refreshIdleAfter),
    rateLimits: parsed.rateLimits ?? {},
    onBackgroundError,
  };
}
