import { createHmac, hash, hkdfSync, timingSafeEqual } from 'node:crypto';

/**
 * What the floor reads of a token row: the columns Keyway's check reads, since tokens may
 * be bound to one MCP endpoint (docs/api.md §17) and carry tool globs (§18). Empty text is
 * "none", as storage keeps it.
 */
export interface FloorRow {
  name: string;
  scopes: string;
  expires_at: number | string;
  audience: string;
  tools: string;
}

/** The floor's one point read of a token row (SQLite's placeholder; PostgreSQL: `$1`). */
export const FLOOR_TOKEN_READ =
  'SELECT name, scopes, expires_at, audience, tools FROM keyway_tokens WHERE id_hash = ?';

/** The tag key of broker tokens, derived as Keyway derives it (HKDF-SHA-256 of the root key). */
export const tagKeyOf = (rootKey: string): Buffer =>
  Buffer.from(hkdfSync('sha256', rootKey, 'keyway/v1', 'keyway/v1/broker-token-tag', 32));

/**
 * The bare floor of a token check, written directly on node:crypto and the engine's
 * driver: parse, HMAC-SHA-256, constant-time compare, SHA-256 of the id, one point read,
 * expiry, the endpoint a bound token is for (`audience`: the route's, none for a route of
 * the API), its tool globs, scope match. No validation beyond that, no error objects, no
 * abstractions.
 */
export function floorCheck(
  tagKey: Buffer,
  read: (idHash: string) => FloorRow | undefined | Promise<FloorRow | undefined>,
) {
  return async (token: string, path: string, audience?: string): Promise<void> => {
    if (token.length !== 68 || !token.startsWith('kw1_')) throw new Error('format');
    const body = Buffer.from(token.slice(4), 'base64url');
    const id = body.subarray(0, 16);
    const tag = createHmac('sha256', tagKey).update(id).digest();
    if (!timingSafeEqual(tag, body.subarray(16))) throw new Error('tag');
    const row = await read(hash('sha256', id, 'hex'));
    if (row === undefined || Number(row.expires_at) <= Date.now()) throw new Error('unknown');
    if (row.audience !== '' && row.audience !== audience) throw new Error('audience');
    if (row.tools !== '') JSON.parse(row.tools);
    const scopes = JSON.parse(row.scopes) as string[];
    if (!scopes.some((scope) => `${path}/`.startsWith(scope.slice(0, -2))))
      throw new Error('scope');
  };
}

/** The identifier hash of a token, as storage keys it. */
export const idHashOf = (token: string): string =>
  hash('sha256', Buffer.from(token.slice(4), 'base64url').subarray(0, 16), 'hex');
