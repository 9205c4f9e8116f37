import { hmac } from '@noble/hashes/hmac.js';
import { sha256 } from '@noble/hashes/sha2.js';

/**
 * The hash functions on the hot path of every authenticated request: SHA-256 and
 * HMAC-SHA-256 (RFC 2104). Core is runtime-agnostic and uses {@link nobleCrypto} unless
 * given another; on Node, `nodeCrypto` of `@keyway/http` (node:crypto, native code) is
 * about twice as fast, and `keyway serve` uses it.
 *
 * An implementation must return fresh arrays (callers may keep them) and must not keep or
 * log its inputs: they are token identifiers and keys.
 *
 * @example
 * import { nodeCrypto } from '@keyway/http';
 * const broker = createBroker({ rootKey, storage, crypto: nodeCrypto });
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
