import type {
  CounterValue,
  EventWrite,
  HandOutRead,
  ListAuditQuery,
  ListConnectionsQuery,
  ListPathsQuery,
  TokensRead,
  VaultChanges,
  VaultKey,
  VaultWrite,
} from '@keyway/core/storage';
import { marks } from './dialect.js';
import { get, type Row, run, type Statement } from './program.js';
import {
  AUDIT_EVENTS,
  CONNECTIONS,
  objectColumn,
  PENDING_AUTHORIZATIONS,
  PROVIDERS,
  type RowCodec,
  StoredRowError,
  TOKEN_CHECKS,
  TOKENS,
  VAULT_ENTRIES,
  WEBHOOK_DELIVERIES,
} from './rows.js';

/*
 * The statements of the SQL storage, in the shared notation of `dialect.ts` (`?` marks,
 * `{table}` names), and the write steps several operations share.
 */

/** A query in the shared notation and its parameters. */
export interface SqlQuery {
  sql: string;
  params: unknown[];
}

/** A subtree: its root key, and the range of its descendants' keys [`from`, `to`). */
export interface Subtree {
  root: string;
  from: string;
  to: string;
}

/**
 * A page of the rows under some subtrees, in key order: for each subtree its root (one
 * point read) and the first `limit` of its descendants (one index range, read in key
 * order and cut at `limit`), merged and cut again. A page costs its size, not the
 * subtree's: an `OR` of ranges would make the engine read every descendant and sort them
 * all for the first ten (a soak slowed as one token tree grew).
 *
 * @param filters conditions every row meets, with their parameters.
 */
export function subtreePageQuery(
  table: string,
  keyColumn: string,
  subtrees: readonly Subtree[],
  filters: { where: string[]; params: unknown[] },
  limit: number,
): SqlQuery {
  if (subtrees.length === 0) {
    return { sql: `SELECT * FROM {${table}} WHERE FALSE LIMIT ?`, params: [limit] };
  }
  const pieces: string[] = [];
  const params: unknown[] = [];
  const where = (first: string[]) => [...first, ...filters.where].join(' AND ');
  subtrees.forEach((tree, i) => {
    pieces.push(`SELECT * FROM {${table}} WHERE ${where([`${keyColumn} = ?`])}`);
    params.push(tree.root, ...filters.params);
    pieces.push(
      `SELECT * FROM (SELECT * FROM {${table}} ` +
        `WHERE ${where([`${keyColumn} >= ?`, `${keyColumn} < ?`])} ` +
        `ORDER BY ${keyColumn} LIMIT ?) AS below${i}`,
    );
    params.push(tree.from, tree.to, ...filters.params, limit);
  });
  params.push(limit);
  // UNION, not UNION ALL: subtrees that overlap give a row once.
  return { sql: `${pieces.join(' UNION ')} ORDER BY ${keyColumn} LIMIT ?`, params };
}

/** The subtree of a resource path: its descendants are [`root/`, `root0`) (`0` follows `/`). */
export const pathSubtree = (root: string): Subtree => ({ root, from: `${root}/`, to: `${root}0` });

/** The tree of a token: its descendants are [`name.`, `name/`) (`/` follows `.`). */
export const tokenSubtree = (name: string): Subtree => ({
  root: name,
  from: `${name}.`,
  to: `${name}/`,
});

/**
 * A page of a table keyed by resource path, in key order: `within` the given subtrees (all
 * rows when absent), after a key, with columns equal to values.
 */
export function pathListQuery(
  table: string,
  keyColumn: string,
  query: ListPathsQuery,
  equal: Record<string, unknown> = {},
): SqlQuery {
  const where: string[] = [];
  const params: unknown[] = [];
  if (query.after !== undefined) {
    where.push(`${keyColumn} > ?`);
    params.push(query.after);
  }
  for (const [column, value] of Object.entries(equal)) {
    if (value === undefined) continue;
    where.push(`${column} = ?`);
    params.push(value);
  }
  if (query.within !== undefined) {
    return subtreePageQuery(
      table,
      keyColumn,
      query.within.map(pathSubtree),
      { where, params },
      query.limit,
    );
  }
  const filter = where.length > 0 ? ` WHERE ${where.join(' AND ')}` : '';
  return {
    sql: `SELECT * FROM {${table}}${filter} ORDER BY ${keyColumn} LIMIT ?`,
    params: [...params, query.limit],
  };
}

/** The connection listing's query (exported for EXPLAIN in the adapters' tests). */
export function connectionListQuery(query: ListConnectionsQuery): SqlQuery {
  return pathListQuery('connections', 'id', query, {
    provider_id: query.providerId,
    status: query.status,
  });
}

/** The audit log's query, newest first (exported for EXPLAIN in the adapters' tests). */
export function auditListQuery(query: ListAuditQuery): SqlQuery {
  const where: string[] = [];
  const params: unknown[] = [];
  const visible: string[] = [];
  if (query.within === undefined) visible.push("resource_kind = 'path'");
  else if (query.within.length > 0) {
    const ranges = query.within.map(() => 'resource = ? OR (resource >= ? AND resource < ?)');
    visible.push(`(resource_kind = 'path' AND (${ranges.join(' OR ')}))`);
    for (const root of query.within) params.push(root, `${root}/`, `${root}0`);
  }
  if (query.tokensBelow === undefined) visible.push("resource_kind = 'token'");
  else if (query.tokensBelow !== null) {
    // Names starting `N.`: the range [`N.`, `N/`) (`/` follows `.`).
    visible.push("(resource_kind = 'token' AND resource >= ? AND resource < ?)");
    params.push(`${query.tokensBelow}.`, `${query.tokensBelow}/`);
  }
  where.push(visible.length === 0 ? 'FALSE' : `(${visible.join(' OR ')})`);
  if (query.type !== undefined) {
    where.push('type = ?');
    params.push(query.type);
  }
  if (query.since !== undefined) {
    where.push('time >= ?');
    params.push(query.since);
  }
  if (query.before !== undefined) {
    where.push('id < ?');
    params.push(query.before);
  }
  params.push(query.limit);
  return {
    sql: `SELECT * FROM {audit_events} WHERE ${where.join(' AND ')} ORDER BY id DESC LIMIT ?`,
    params,
  };
}

const insertSql = (codec: RowCodec<unknown>, conflict: string) =>
  `INSERT INTO {${codec.table}} (${codec.columns.join(', ')}) VALUES (${marks(codec.columns)})${conflict}`;
const updateSql = (codec: RowCodec<unknown>, where: string) =>
  `UPDATE {${codec.table}} SET (${codec.columns.join(', ')}) = (${marks(codec.columns)}) WHERE ${where}`;

export const INSERT_TOKEN = insertSql(TOKENS, ' ON CONFLICT (name) DO NOTHING');
export const UPDATE_TOKEN = updateSql(TOKENS, 'id_hash = ?');
export const INSERT_PROVIDER = insertSql(PROVIDERS, ' ON CONFLICT (id) DO NOTHING');
export const UPDATE_PROVIDER = updateSql(PROVIDERS, 'id = ? AND version = ?');
export const INSERT_CONNECTION = insertSql(CONNECTIONS, ' ON CONFLICT (id) DO NOTHING');
export const UPDATE_CONNECTION = updateSql(CONNECTIONS, 'id = ? AND version = ?');
export const INSERT_PENDING = insertSql(PENDING_AUTHORIZATIONS, '');
// No conflict clause: an id that exists fails the statement, and the transaction with it.
const INSERT_EVENT = insertSql(AUDIT_EVENTS, '');
const INSERT_DELIVERY = insertSql(WEBHOOK_DELIVERIES, '');
export const PUT_VAULT = `INSERT INTO {vault_entries} (kind, key, ciphertext, key_id, version, created_at, updated_at)
  VALUES (?, ?, ?, ?, 1, ?, ?)
  ON CONFLICT (kind, key) DO UPDATE SET
    ciphertext = excluded.ciphertext, key_id = excluded.key_id,
    version = {vault_entries}.version + 1, updated_at = excluded.updated_at
  RETURNING *`;
/** A token and its descendants: `name`, or names in [`name.`, `name/`) (`/` follows `.`). */
export const TREE = '(name = ? OR (name >= ? AND name < ?))';
export const treeParams = (name: string) => {
  const tree = tokenSubtree(name);
  return [tree.root, tree.from, tree.to];
};

export const putVaultParams = (write: VaultWrite, now: number) => [
  write.kind,
  write.key,
  write.ciphertext,
  write.keyId,
  now,
  now,
];
export const putVaultResult = (row: Row | undefined) => {
  const entry = VAULT_ENTRIES.fromRow(row ?? {});
  return { entry, created: entry.version === 1 };
};

export function* putVault(write: VaultWrite, now: number) {
  return putVaultResult(yield* get(PUT_VAULT, putVaultParams(write, now)));
}

export const DELETE_VAULT = 'DELETE FROM {vault_entries} WHERE kind = ? AND key = ?';

export function* deleteVault(keys: VaultKey[] | undefined) {
  for (const { kind, key } of keys ?? []) yield* run(DELETE_VAULT, [kind, key]);
}

/** Appends events and their deliveries. */
export function* writeEvents(write: EventWrite | undefined) {
  for (const event of write?.events ?? []) yield* run(INSERT_EVENT, AUDIT_EVENTS.toRow(event));
  for (const delivery of write?.deliveries ?? []) {
    yield* run(INSERT_DELIVERY, WEBHOOK_DELIVERIES.toRow(delivery));
  }
}

/** Writes one row (an insert or a compare-and-set), its vault changes and events, or nothing. */
export function* writeWithVault(
  sql: string,
  values: unknown[],
  changes: VaultChanges | undefined,
  now: number,
  events: EventWrite | undefined,
) {
  if ((yield* run(sql, values)) !== 1) return false;
  for (const write of changes?.put ?? []) yield* putVault(write, now);
  yield* deleteVault(changes?.delete);
  yield* writeEvents(events);
  return true;
}

export function counterOf(row: Row | undefined): CounterValue | null {
  return row === undefined ? null : { count: Number(row.count), expiresAt: Number(row.expires_at) };
}

/** A driver's answer to a `get`: the row, or `undefined` when there is none. */
export const asRow = (answer: unknown): Row | undefined =>
  typeof answer === 'object' && answer !== null ? (answer as Row) : undefined;

/** A point read's statement: its row answered as values, in the order it selects them. */
export const pointRead = (sql: string, params: readonly unknown[]): Statement => ({
  kind: 'get',
  sql,
  params,
  values: true,
});

/** A point read answered as values (`values: true`): the codec's record, or `null`. */
export const valuesOf = <R>(codec: RowCodec<R>, answer: unknown): R | null =>
  Array.isArray(answer) ? codec.fromValues(answer) : null;

// The point reads, each selecting its codec's columns in order (read with `valuesOf`).
/** The hot path of every authenticated request: one point read on the primary key. */
export const TOKEN_BY_ID_HASH = `${TOKENS.select} WHERE id_hash = ?`;
/** The same read as the token check makes it: its three columns only (`TOKEN_CHECKS`). */
export const TOKEN_CHECK_BY_ID_HASH = `${TOKEN_CHECKS.select} WHERE id_hash = ?`;
export const TOKEN_BY_LIVE_NAME = `${TOKENS.select} WHERE name = ? AND expires_at > ?`;
export const PROVIDER_BY_ID = `${PROVIDERS.select} WHERE id = ?`;
export const CONNECTION_BY_ID = `${CONNECTIONS.select} WHERE id = ?`;
export const VAULT_ENTRY_BY_KEY = `${VAULT_ENTRIES.select} WHERE kind = ? AND key = ?`;

const qualified = (alias: string, codec: RowCodec<unknown>): string =>
  codec.columns.map((column) => `${alias}.${column}`).join(', ');

/**
 * A credential hand-out's three reads in one statement (`readForHandOut`, read with
 * {@link handOutOf}): the connection's columns, its vault entry's, then its provider's id and
 * the `hand_out` member of the provider's state. SQLite's `->` answers the member as JSON
 * text, `NULL` when absent, and the provider's state (discovery documents, registrations) is
 * never decoded in JavaScript. PostgreSQL's `json` operators refuse a document holding a
 * `\u0000` (which a remote server may send): there the state is read whole and decoded
 * here. One read transaction either way. Parameters: the vault kind, the connection id.
 */
export function handOutStatement(engine: 'sqlite' | 'postgres'): string {
  const member = engine === 'postgres' ? 'p.state' : "p.state -> '$.hand_out'";
  return `SELECT ${qualified('c', CONNECTIONS)}, ${qualified('v', VAULT_ENTRIES)}, p.id, ${member}
    FROM {connections} AS c
    LEFT JOIN {vault_entries} AS v ON v.kind = ? AND v.key = c.id
    LEFT JOIN {providers} AS p ON p.id = c.provider_id
    WHERE c.id = ?`;
}

/**
 * A connection and its vault entry of one kind in one statement (`readWithTokens`, read with
 * {@link tokensReadOf}): {@link handOutStatement} without the provider. The gateway, the API
 * proxy and the probe make this read on every call and never need the provider's state,
 * which is often larger than what a row keeps in its page (SQLite then reads the rest from
 * the file on every read; PostgreSQL sends it whole). Parameters: the vault kind, the
 * connection id.
 */
export const TOKENS_READ = `SELECT ${qualified('c', CONNECTIONS)}, ${qualified('v', VAULT_ENTRIES)}
    FROM {connections} AS c
    LEFT JOIN {vault_entries} AS v ON v.kind = ? AND v.key = c.id
    WHERE c.id = ?`;

/**
 * The answer of {@link TOKENS_READ} (values; or the start of {@link handOutStatement}'s), or
 * `null` when it found no connection.
 * @throws {StoredRowError}
 */
export function tokensReadOf(answer: unknown): TokensRead | null {
  if (!Array.isArray(answer)) return null;
  const vaultAt = CONNECTIONS.columns.length;
  const end = vaultAt + VAULT_ENTRIES.columns.length;
  return {
    connection: CONNECTIONS.fromValues(answer.slice(0, vaultAt)),
    vaultEntry:
      answer[vaultAt] === null ? null : VAULT_ENTRIES.fromValues(answer.slice(vaultAt, end)),
  };
}

/** The `hand_out` member of a provider state read whole (PostgreSQL), as JSON text. */
function handOutMemberOf(state: unknown): string | null {
  const parsed = objectColumn('providers', 'state', state);
  return parsed.hand_out === undefined ? null : JSON.stringify(parsed.hand_out);
}

/**
 * The answer of {@link handOutStatement} (values), or `null` when it found no connection.
 * @throws {StoredRowError}
 */
export function handOutOf(engine: 'sqlite' | 'postgres', answer: unknown): HandOutRead | null {
  const read = tokensReadOf(answer);
  if (read === null) return null;
  const providerAt = CONNECTIONS.columns.length + VAULT_ENTRIES.columns.length;
  const values = answer as unknown[];
  let member = values[providerAt + 1];
  if (engine === 'postgres' && member !== null) member = handOutMemberOf(member);
  if (member !== null && typeof member !== 'string') {
    throw new StoredRowError('providers', 'state', 'member hand_out is not JSON text');
  }
  return {
    connection: read.connection,
    vaultEntry: read.vaultEntry,
    provider: values[providerAt] === null ? null : { handOut: member },
  };
}

/** The vault entries not sealed under `keyId`, after `after`, in key order (a re-wrap's page). */
export function notUnderKeyQuery(keyId: string, after: VaultKey | null, limit: number): SqlQuery {
  return after === null
    ? {
        sql: 'SELECT * FROM {vault_entries} WHERE key_id <> ? ORDER BY kind, key LIMIT ?',
        params: [keyId, limit],
      }
    : {
        sql: 'SELECT * FROM {vault_entries} WHERE key_id <> ? AND (kind, key) > (?, ?) ORDER BY kind, key LIMIT ?',
        params: [keyId, after.kind, after.key, limit],
      };
}
