import { hmac } from '@noble/hashes/hmac.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { builtinModules } from './builtin.js';

/**
 * The hash functions on the hot path of every authenticated request: SHA-256 and
 * HMAC-SHA-256 (RFC 2104). By default core uses the runtime's `node:crypto` where it has
 * one (Node, Bun, Deno: native code, about twice as fast), reached through
 * `process.getBuiltinModule`, and {@link nobleCrypto} elsewhere.
 *
 * An implementation must return fresh arrays (callers may keep them) and must not keep or
 * log its inputs: they are token identifiers and keys.
 *
 * @example
 * const broker = createBroker({ rootKey, storage, crypto: nobleCrypto }); // pure JavaScript
 *
 * @see docs/benchmarks.md (what each costs)
 */
export interface PlatformCrypto {
  /** SHA-256 (FIPS 180-4) of `data`: 32 bytes. */
  sha256(data: Uint8Array): Uint8Array;
  /** Optional: SHA-256 of `data` as lowercase hex, where the platform makes it directly. */
  sha256Hex?(data: Uint8Array): string;
  /**
   * HMAC-SHA-256 keyed with `key`: the returned function computes the 32-byte tag of its
   * data. Keyed once, called for every token checked.
   */
  hmacSha256(key: Uint8Array): (data: Uint8Array) => Uint8Array;
}

/**
 * {@link PlatformCrypto} in plain JavaScript (@noble/hashes): runs on every runtime. The
 * HMAC's keyed inner and outer states are computed once per key.
 *
 * @see https://github.com/paulmillr/noble-hashes
 */
export const nobleCrypto: PlatformCrypto = {
  sha256: (data) => sha256(data),
  hmacSha256(key) {
    const keyed = hmac.create(sha256, key);
    return (data) => keyed.clone().update(data).digest();
  },
};

/** What core uses of `node:crypto`. */
interface NodeCryptoModule {
  createHash(algorithm: 'sha256'): {
    update(data: Uint8Array): { digest(): Uint8Array; digest(encoding: 'hex'): string };
  };
  createHmac(
    algorithm: 'sha256',
    key: Uint8Array,
  ): { update(data: Uint8Array): { digest(): Uint8Array } };
  /** One-shot digest (Node 20.12 and later): no `Hash` object made, about 3× faster. */
  hash?: {
    (algorithm: 'sha256', data: Uint8Array, encoding: 'hex'): string;
    (algorithm: 'sha256', data: Uint8Array, encoding: 'buffer'): Uint8Array;
  };
}

/**
 * {@link PlatformCrypto} from the runtime's `node:crypto` (OpenSSL, native code), or `null`
 * where there is none.
 */
export function builtinCrypto(): PlatformCrypto | null {
  const load = builtinModules();
  const module = load === null ? undefined : (load('node:crypto') as NodeCryptoModule | undefined);
  if (module === undefined) return null;
  const { hash } = module;
  const buffers = load?.('node:buffer') as
    | { Buffer?: { from(data: Uint8Array): Uint8Array } }
    | undefined;
  return {
    sha256:
      typeof hash === 'function'
        ? (data) => hash('sha256', data, 'buffer')
        : (data) => module.createHash('sha256').update(data).digest(),
    sha256Hex:
      typeof hash === 'function'
        ? (data) => hash('sha256', data, 'hex')
        : (data) => module.createHash('sha256').update(data).digest('hex'),
    hmacSha256: (key) => {
      // A copy as a Buffer, which node:crypto takes as it is: a plain Uint8Array key is
      // converted on every call (measured: 5.4 µs an HMAC of a token id against 4.3).
      const copy = buffers?.Buffer?.from(key) ?? Uint8Array.from(key);
      // A Buffer is a fresh Uint8Array: returned as it is.
      return (data) => module.createHmac('sha256', copy).update(data).digest();
    },
  };
}

/** The default {@link PlatformCrypto}: the runtime's `node:crypto`, else {@link nobleCrypto}. */
export const defaultCrypto = (): PlatformCrypto => builtinCrypto() ?? nobleCrypto;
