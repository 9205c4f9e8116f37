import { createDecipheriv } from 'node:crypto';
import Database from 'better-sqlite3';
import { FLOOR_TOKEN_READ, type FloorRow, floorCheck, tagKeyOf } from './floor.js';
import type { Swap } from './hop.js';

/**
 * What the same-work hop reads of a connection: the gateway's one statement (the SQL
 * storage's `readWithTokens`), the columns it uses.
 */
const WITH_TOKENS = `SELECT c.status, c.state, v.ciphertext
  FROM keyway_connections AS c
  LEFT JOIN keyway_vault_entries AS v ON v.kind = 'connection_tokens' AND v.key = c.id
  WHERE c.id = ?`;

/** A compact JWE (`dir`, A256GCM) opened with node:crypto: the vault's format, no checks. */
function open(key: Buffer, jwe: string): string {
  const [header, , iv, ciphertext, tag] = jwe.split('.') as [
    string,
    string,
    string,
    string,
    string,
  ];
  const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'), {
    authTagLength: 16,
  });
  decipher.setAAD(Buffer.from(header, 'ascii'));
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  const plaintext = decipher.update(Buffer.from(ciphertext, 'base64url'));
  return Buffer.concat([plaintext, decipher.final()]).toString('utf8');
}

/** What a same-work hop leaves out, to weigh each part of its work (`--gateway-shares`). */
export interface SameWorkSkips {
  /** The token check: every caller is let through. */
  check?: boolean;
  /** The connection's read: its first row (and state) kept and used again. */
  read?: boolean;
}

/**
 * The least a gateway in front of `/mcp/<connection>` can do before it forwards a call, on
 * the SQLite file `keyway serve` keeps (read-only): the token check's floor (floor.ts) for
 * the connection, the connection with its sealed tokens in one prepared
 * read, its state parsed, the tokens opened once per ciphertext (as Keyway keeps them
 * opened), their expiry checked, and the access token swapped in. No validation, no error
 * objects, no log. With the hop's guards (hop.ts `HopGuards`), the rest of what §13 and the
 * SSRF rule ask of a call follows: the stream slots, the body held under its limits, the
 * endpoint's address policy, the head deadline and the idle limit. `skip` leaves the check or
 * the read out (a measurement of what each costs, never a hop to compare the gateway with).
 */
export function sameWorkSwap(options: {
  file: string;
  rootKey: string;
  vaultKey: string;
  skip?: SameWorkSkips;
}): Swap {
  const db = new Database(options.file, { readonly: true });
  const find = db.prepare(FLOOR_TOKEN_READ);
  const check = floorCheck(tagKeyOf(options.rootKey), (idHash) => find.get(idHash) as FloorRow);
  const withTokens = db.prepare(WITH_TOKENS).raw();
  const key = Buffer.from(options.vaultKey, 'base64url');
  type Opened = { ciphertext: string; token: string; expiresAt: number | null; endpoint: string };
  const opened = new Map<string, Opened>();
  type Row = [string, string, string | null] | undefined;
  const kept = new Map<string, Row>();
  const { check: skipCheck = false, read: skipRead = false } = options.skip ?? {};
  return async (req) => {
    const connection = /^\/mcp\/(.+)$/.exec(req.url ?? '')?.[1];
    const token = /^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (connection === undefined || token === undefined) return null;
    if (!skipCheck) {
      try {
        await check(token, connection);
      } catch {
        return null;
      }
    }
    let row = skipRead ? kept.get(connection) : undefined;
    if (row === undefined) {
      row = withTokens.get(connection) as Row;
      if (skipRead) kept.set(connection, row);
      if (row !== undefined) JSON.parse(row[1]);
    }
    if (row === undefined || row[0] !== 'active' || row[2] === null) return null;
    let tokens = opened.get(connection);
    if (tokens?.ciphertext !== row[2]) {
      const sealed = JSON.parse(open(key, row[2])) as {
        access_token: string;
        expires_at: number | null;
        party?: { resource_url?: string };
      };
      const endpoint = sealed.party?.resource_url;
      if (typeof sealed.access_token !== 'string' || typeof endpoint !== 'string') {
        throw new Error('no access token or endpoint sealed');
      }
      tokens = {
        ciphertext: row[2],
        token: sealed.access_token,
        expiresAt: sealed.expires_at,
        endpoint,
      };
      opened.set(connection, tokens);
    }
    if (tokens.expiresAt !== null && tokens.expiresAt <= Date.now()) return null;
    return {
      path: '/mcp',
      token: tokens.token,
      connection,
      caller: token,
      endpoint: tokens.endpoint,
    };
  };
}
