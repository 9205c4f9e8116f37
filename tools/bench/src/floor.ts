import { createHmac, hash, hkdfSync, timingSafeEqual } from 'node:crypto';

/** What the floor reads of a token row. */
export interface FloorRow {
  scopes: string;
  expires_at: number | string;
}

/** The tag key of broker tokens, derived as Keyway derives it (HKDF-SHA-256 of the root key). */
export const tagKeyOf = (rootKey: string): Buffer =>
  Buffer.from(hkdfSync('sha256', rootKey, 'keyway/v1', 'keyway/v1/broker-token-tag', 32));

/**
 * The bare floor of a token check, written directly on node:crypto and the engine's
 * driver: parse, HMAC-SHA-256, constant-time compare, SHA-256 of the id, one point read,
 * expiry, scope match. No validation beyond that, no error objects, no abstractions.
 */
export function floorCheck(
  tagKey: Buffer,
  read: (idHash: string) => FloorRow | undefined | Promise<FloorRow | undefined>,
) {
  return async (token: string, path: string): Promise<void> => {
    if (token.length !== 68 || !token.startsWith('kw1_')) throw new Error('format');
    const body = Buffer.from(token.slice(4), 'base64url');
    const id = body.subarray(0, 16);
    const tag = createHmac('sha256', tagKey).update(id).digest();
    if (!timingSafeEqual(tag, body.subarray(16))) throw new Error('tag');
    const row = await read(hash('sha256', id, 'hex'));
    if (row === undefined || Number(row.expires_at) <= Date.now()) throw new Error('unknown');
    const scopes = JSON.parse(row.scopes) as string[];
    if (!scopes.some((scope) => `${path}/`.startsWith(scope.slice(0, -2))))
      throw new Error('scope');
  };
}

/** The identifier hash of a token, as storage keys it. */
export const idHashOf = (token: string): string =>
  hash('sha256', Buffer.from(token.slice(4), 'base64url').subarray(0, 16), 'hex');
