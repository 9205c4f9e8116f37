import { z } from 'zod';
import { KeywayError } from '../contract/errors.js';
import { parseIpAddress } from '../platform/address.js';
import type { Observer } from '../telemetry/observation.js';

/** A fixed-window counter of the rate limiter: its count and when its window ends. */
export interface CounterValue {
  count: number;
  /** End of the window, epoch milliseconds. */
  expiresAt: number;
}

/**
 * Counters of the rate limits (docs/api.md §12), shared by every instance on the storage. A
 * counter whose `expiresAt <= now` does not exist.
 */
export interface CounterStorage {
  /**
   * Adds one to the counter `key`. A missing or expired counter starts anew at 1 with the
   * window ending at `expiresAt`; a live one keeps its window. Atomic: of `n` concurrent
   * calls on a counter, each sees a different count.
   *
   * @returns the counter after the increment.
   */
  incrementCounter(key: string, expiresAt: number, now: number): Promise<CounterValue>;

  /** The live counter `key`, or `null`. */
  getCounter(key: string, now: number): Promise<CounterValue | null>;
}

const LIMIT = z.strictObject({
  limit: z.number().int().min(1).max(1_000_000_000),
  windowSeconds: z.number().int().min(1).max(86_400),
});

/** The `rateLimits` option of `createBroker` (docs/api.md §12). */
export const RateLimitsSchema = z.union(
  [
    z.literal(false),
    z.strictObject({
      auth: z.union([z.literal(false), LIMIT]).optional(),
      mint: z.union([z.literal(false), LIMIT]).optional(),
      discover: z.union([z.literal(false), LIMIT]).optional(),
      register: z.union([z.literal(false), LIMIT]).optional(),
      shared: z.boolean().optional(),
    }),
  ],
  {
    error:
      '"rateLimits" must be false or { auth?, mint?, discover?, register?, shared? } with limits like { limit: 20, ' +
      'windowSeconds: 60 } or false',
  },
);

/** One limit: at most `limit` events per window of `windowSeconds`. */
export interface RateLimit {
  limit: number;
  windowSeconds: number;
}

/**
 * The rate limits of docs/api.md §12. `false` turns one off; an omitted one keeps its default.
 *
 * @example
 * createBroker({ ..., rateLimits: { auth: { limit: 50, windowSeconds: 60 }, shared: true } });
 *
 * @see [docs/api.md §12](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#12-rate-limits)
 */
export interface RateLimitsConfig {
  /** Failed authentications per client address. Default 20 per 60 s. */
  auth?: RateLimit | false;
  /**
   * Tokens minted per delegation tree of scoped callers (`ci`, `ci.a`, `ci.a.b` share one
   * count; the root key is not limited). Default 60 per 60 s.
   */
  mint?: RateLimit | false;
  /**
   * Discoveries (`POST /api/admin/discover`, which fetches what the caller names) per
   * delegation tree of scoped callers; the root key is not limited. Default 30 per 60 s.
   */
  discover?: RateLimit | false;
  /**
   * Client registrations of MCP clients that sign in to Keyway (docs/api.md §17) per client
   * address. Default 20 per 3600 s.
   */
  register?: RateLimit | false;
  /**
   * Keep the counters in the broker's storage, so every instance on it shares them.
   * Default `false`: each instance counts on its own, in memory.
   */
  shared?: boolean;
}

export const DEFAULT_RATE_LIMITS: {
  auth: RateLimit;
  mint: RateLimit;
  discover: RateLimit;
  register: RateLimit;
} = {
  auth: { limit: 20, windowSeconds: 60 },
  mint: { limit: 60, windowSeconds: 60 },
  discover: { limit: 30, windowSeconds: 60 },
  register: { limit: 20, windowSeconds: 3600 },
};

/** Where counters are kept: {@link CounterStorage}, in memory or in the storage. */
type Counters = Pick<CounterStorage, 'incrementCounter' | 'getCounter'>;

/** Most counters an instance keeps in memory; beyond it the oldest windows are dropped. */
const MAX_INSTANCE_COUNTERS = 100_000;

/** Counters kept in this instance's memory, which can also be read synchronously. */
interface InstanceCounters extends Counters {
  /** How many windows are kept (live or not yet dropped). */
  size(): number;
  /** {@link CounterStorage.getCounter}, synchronously. */
  peekCounter(key: string, now: number): CounterValue | null;
}

/** Fixed-window counters of one instance, bounded in size. */
export function instanceCounters(maxKeys = MAX_INSTANCE_COUNTERS): InstanceCounters {
  const counters = new Map<string, CounterValue>();
  const peek = (key: string, now: number): CounterValue | null => {
    const live = counters.get(key);
    return live === undefined || live.expiresAt <= now ? null : { ...live };
  };
  return {
    size: () => counters.size,
    peekCounter: peek,
    async incrementCounter(key, expiresAt, now) {
      const live = counters.get(key);
      if (live !== undefined && live.expiresAt > now) {
        live.count += 1;
        return { ...live };
      }
      counters.delete(key);
      if (counters.size >= maxKeys) {
        for (const [old, value] of counters) if (value.expiresAt <= now) counters.delete(old);
        // Still full of live windows (many addresses at once): the oldest go first.
        for (const old of counters.keys()) {
          if (counters.size < maxKeys) break;
          counters.delete(old);
        }
      }
      const fresh = { count: 1, expiresAt };
      counters.set(key, fresh);
      return { ...fresh };
    },
    async getCounter(key, now) {
      return peek(key, now);
    },
  };
}

/**
 * The key of a client address: an IPv4 address as it is, an IPv6 address by its /64
 * prefix (one subscriber usually holds a whole /64, so counting single addresses would
 * give one client 2^64 windows).
 */
export function clientAddressKey(address: string): string {
  const parsed = parseIpAddress(address.trim());
  if (parsed === null) return address;
  if (parsed.version === 4) return parsed.octets.join('.');
  const { groups } = parsed;
  // IPv4-mapped (::ffff:a.b.c.d): the IPv4 client it is.
  if (groups.slice(0, 5).every((group) => group === 0) && groups[5] === 0xffff) {
    const [hi, lo] = [groups[6] as number, groups[7] as number];
    return [hi >> 8, hi & 0xff, lo >> 8, lo & 0xff].join('.');
  }
  return `${groups
    .slice(0, 4)
    .map((group) => group.toString(16))
    .join(':')}::/64`;
}

function rateLimited(what: string, counter: CounterValue, now: number): KeywayError {
  const retryAfter = Math.max(1, Math.ceil((counter.expiresAt - now) / 1000));
  return new KeywayError('rate_limited', `too many ${what}; retry after ${retryAfter} s`, {
    retryAfter,
  });
}

/** The rate limits of one broker. */
export class RateLimiter {
  readonly #auth: RateLimit | false;
  readonly #mint: RateLimit | false;
  readonly #discover: RateLimit | false;
  readonly #register: RateLimit | false;
  readonly #counters: Counters;
  /** The counters, when they are this instance's own: then checks need no `await`. */
  readonly #local: InstanceCounters | null;
  readonly #now: () => number;
  readonly #observe: Observer;

  constructor(
    config: RateLimitsConfig | false,
    counters: CounterStorage,
    now: () => number,
    observe: Observer = () => {},
  ) {
    const limits =
      config === false
        ? {
            auth: false as const,
            mint: false as const,
            discover: false as const,
            register: false as const,
          }
        : config;
    this.#auth = limits.auth ?? DEFAULT_RATE_LIMITS.auth;
    this.#mint = limits.mint ?? DEFAULT_RATE_LIMITS.mint;
    this.#discover = limits.discover ?? DEFAULT_RATE_LIMITS.discover;
    this.#register = limits.register ?? DEFAULT_RATE_LIMITS.register;
    this.#local = config !== false && config.shared === true ? null : instanceCounters();
    this.#counters = this.#local ?? counters;
    this.#now = now;
    this.#observe = observe;
  }

  /**
   * Refuses every authentication from an address that used up its failures, whatever the
   * credential (a right guess after the limit must not be told apart from a wrong one).
   *
   * Synchronous (`undefined`) with this instance's own counters, a promise with shared ones.
   *
   * @throws {KeywayError} `rate_limited` with `retryAfter` (thrown, or the promise rejects).
   */
  assertMayAuthenticate(address: string): Promise<void> | undefined {
    // Check, then count failures afterwards: a burst of parallel requests may get up to
    // (limit + concurrent requests) answers before the 429s start; a success is never counted.
    const auth = this.#auth;
    if (auth === false) return undefined;
    const local = this.#local;
    if (local !== null) {
      // No failure anywhere yet (the usual case): nothing to look up.
      if (local.size() === 0) return undefined;
      const now = this.#now();
      this.#refuseOver(auth, local.peekCounter(`auth:${clientAddressKey(address)}`, now), now);
      return undefined;
    }
    const now = this.#now();
    return this.#counters
      .getCounter(`auth:${clientAddressKey(address)}`, now)
      .then((counter) => this.#refuseOver(auth, counter, now));
  }

  #refuseOver(auth: RateLimit, counter: CounterValue | null, now: number): void {
    if (counter !== null && counter.count >= auth.limit) {
      this.#observe({ kind: 'rate_limited', limit: 'auth' });
      throw rateLimited('failed authentications from this address', counter, now);
    }
  }

  /** Counts a failed authentication of an address. */
  async recordFailedAuthentication(address: string): Promise<void> {
    if (this.#auth === false) return;
    const now = this.#now();
    await this.#counters.incrementCounter(
      `auth:${clientAddressKey(address)}`,
      now + this.#auth.windowSeconds * 1000,
      now,
    );
  }

  /**
   * Counts one mint by a scoped caller's delegation tree (its root name), refusing it
   * beyond the limit.
   *
   * @throws {KeywayError} `rate_limited` with `retryAfter`.
   */
  countMint(treeRoot: string): Promise<void> {
    return this.#count(this.#mint, 'mint', treeRoot, 'tokens minted');
  }

  /**
   * Counts one discovery by a scoped caller's delegation tree, refusing it beyond the limit:
   * discovery fetches URLs the caller names, and must not become an outbound fetcher.
   *
   * @throws {KeywayError} `rate_limited` with `retryAfter`.
   */
  countDiscovery(treeRoot: string): Promise<void> {
    return this.#count(this.#discover, 'discover', treeRoot, 'discoveries');
  }

  /**
   * Counts one client registration from a client address (docs/api.md §17), refusing it
   * beyond the limit: registration writes a record for anyone who asks.
   *
   * @throws {KeywayError} `rate_limited` with `retryAfter`.
   */
  countRegistration(address: string): Promise<void> {
    return this.#count(
      this.#register,
      'register',
      clientAddressKey(address),
      'client registrations from this address',
    );
  }

  async #count(
    limit: RateLimit | false,
    kind: 'mint' | 'discover' | 'register',
    treeRoot: string,
    what: string,
  ): Promise<void> {
    if (limit === false) return;
    const now = this.#now();
    const counter = await this.#counters.incrementCounter(
      `${kind}:${treeRoot}`,
      now + limit.windowSeconds * 1000,
      now,
    );
    if (counter.count > limit.limit) {
      this.#observe({ kind: 'rate_limited', limit: kind });
      throw rateLimited(what, counter, now);
    }
  }
}

/**
 * Parses `KEYWAY_RATE_LIMITS`: `on`, `off`, or `auth=20/60,mint=60/60,discover=30/60,register=20/3600` (count
 * per window in seconds; `auth=off` turns one off; a limit not named keeps its default).
 *
 * @throws {TypeError} naming what is wrong.
 *
 * @see [docs/api.md §12](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#12-rate-limits)
 */
export function parseRateLimits(text: string): RateLimitsConfig | false {
  const value = text.trim();
  if (value === '' || value === 'on') return {};
  if (value === 'off') return false;
  const config: RateLimitsConfig = {};
  for (const part of value.split(',')) {
    const match = part
      .trim()
      .match(/^(auth|mint|discover|register)=(?:(off)|([1-9][0-9]{0,8})\/([1-9][0-9]{0,5}))$/);
    if (match === null) {
      throw new TypeError(
        `invalid rate limit ${JSON.stringify(part.trim())}: use on, off, or ` +
          'auth=20/60,mint=60/60,discover=30/60,register=20/3600 ' +
          `(count per window in seconds, or name=off)`,
      );
    }
    const name = match[1] as 'auth' | 'mint' | 'discover' | 'register';
    config[name] =
      match[2] === 'off' ? false : { limit: Number(match[3]), windowSeconds: Number(match[4]) };
  }
  return config;
}
