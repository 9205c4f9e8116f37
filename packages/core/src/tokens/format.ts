import { hkdf } from '@noble/hashes/hkdf.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import { fromBase64Url, timingSafeEqual, toBase64Url, utf8 } from '../platform/bytes.js';
import { nobleCrypto, type PlatformCrypto } from '../platform/crypto.js';

/**
 * The version-marked prefix of every broker token. A new format gets a new prefix, so a
 * verifier never has to guess which format it reads.
 */
export const TOKEN_PREFIX = 'kw1_';

/** Bytes of the random token identifier: 128 bits, the minimum docs/api.md §3.3 allows. */
export const TOKEN_ID_BYTES = 16;
/** Bytes of the HMAC-SHA-256 tag. */
const TAG_BYTES = 32;
/** `id ‖ tag` is 48 bytes, exactly 64 base64url characters with no spare bits. */
const BODY_LENGTH = ((TOKEN_ID_BYTES + TAG_BYTES) / 3) * 4;

/** HKDF `info` of the tag key: a key derived for one purpose is useless for any other. */
const TAG_KEY_INFO = 'keyway/v1/broker-token-tag';
const TAG_KEY_SALT = 'keyway/v1';

/**
 * Issues and opens broker tokens for one root key. `kw1_` followed by the unpadded
 * base64url of `id ‖ HMAC-SHA-256(tagKey, id)`, where `id` is 16 random bytes and `tagKey`
 * is derived from the root key with HKDF-SHA-256. Storage keeps only `SHA-256(id)`.
 */
export interface TokenCodec {
  /** Formats the token for a fresh random identifier; returns it with the identifier's hash. */
  issue(id: Uint8Array): { token: string; idHash: string };
  /**
   * The identifier hash of an authentic token, or `null` for anything else: wrong prefix,
   * wrong length, any spelling other than the issued one, or a tag that does not verify
   * (compared in constant time). Costs one HMAC and one hash.
   */
  open(token: string): string | null;
}

/** The storage key of a token identifier: hex SHA-256. */
export function hashTokenId(id: Uint8Array, platform: PlatformCrypto = nobleCrypto): string {
  return platform.sha256Hex === undefined
    ? bytesToHex(platform.sha256(id))
    : platform.sha256Hex(id);
}

/**
 * Creates the codec for a root key. The key is derived once here (HKDF runs once, so it
 * stays in plain JavaScript), and the HMAC is keyed once too, so a verification never
 * derives a key. `platform` computes the HMAC and the identifier hash.
 *
 * @example
 * const codec = createTokenCodec(rootKey);
 * const { token, idHash } = codec.issue(crypto.getRandomValues(new Uint8Array(16)));
 * codec.open(token) === idHash; // true
 */
export function createTokenCodec(
  rootKey: string,
  platform: PlatformCrypto = nobleCrypto,
): TokenCodec {
  const tagKey = hkdf(sha256, utf8(rootKey), utf8(TAG_KEY_SALT), utf8(TAG_KEY_INFO), 32);
  const tag = platform.hmacSha256(tagKey);

  return {
    issue(id) {
      if (id.length !== TOKEN_ID_BYTES) {
        throw new TypeError(`"id" must be ${TOKEN_ID_BYTES} bytes`);
      }
      const body = new Uint8Array(TOKEN_ID_BYTES + TAG_BYTES);
      body.set(id, 0);
      body.set(tag(id), TOKEN_ID_BYTES);
      return { token: TOKEN_PREFIX + toBase64Url(body), idHash: hashTokenId(id, platform) };
    },
    open(token) {
      if (token.length !== TOKEN_PREFIX.length + BODY_LENGTH || !token.startsWith(TOKEN_PREFIX)) {
        return null;
      }
      const body = fromBase64Url(token, TOKEN_PREFIX.length);
      if (body === null) return null;
      const id = body.subarray(0, TOKEN_ID_BYTES);
      if (!timingSafeEqual(tag(id), body.subarray(TOKEN_ID_BYTES))) return null;
      return hashTokenId(id, platform);
    },
  };
}

/**
 * Checks a presented credential against the root key in constant time. Both sides are
 * hashed first, so neither the key's length nor the position of the first differing
 * character leaks.
 */
export function createRootKeyCheck(
  rootKey: string,
  platform: PlatformCrypto = nobleCrypto,
): (presented: string) => boolean {
  const expected = platform.sha256(utf8(rootKey));
  return (presented) => timingSafeEqual(platform.sha256(utf8(presented)), expected);
}
