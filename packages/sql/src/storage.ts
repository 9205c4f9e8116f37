import type {
  CounterValue,
  EventWrite,
  ListAuditQuery,
  ListConnectionsQuery,
  ListPathsQuery,
  Storage,
  VaultChanges,
  VaultKey,
  VaultWrite,
} from '@keyway/core/storage';
import { compile, type Dialect, marks } from './dialect.js';
import { all, get, type Program, type Row, run, type SqlDriver } from './program.js';
import {
  AUDIT_EVENTS,
  CONNECTIONS,
  PENDING_AUTHORIZATIONS,
  PROVIDERS,
  type RowCodec,
  TOKENS,
  VAULT_ENTRIES,
  WEBHOOK_DELIVERIES,
} from './rows.js';

/** A query in the shared notation and its parameters. */
export interface SqlQuery {
  sql: string;
  params: unknown[];
}

/**
 * The subtree-ranged list of a path-keyed table: for each root `p`, `p` itself or the keys
 * in [`p/`, `p0`) (`'0'` follows `'/'`), two index range scans per root; then the cursor,
 * equality filters, the order and the limit.
 */
export function pathListQuery(
  table: string,
  keyColumn: string,
  query: ListPathsQuery,
  equal: Record<string, unknown> = {},
): SqlQuery {
  const where: string[] = [];
  const params: unknown[] = [];
  if (query.within !== undefined) {
    if (query.within.length === 0) where.push('FALSE');
    else {
      const ranges = query.within.map(
        () => `${keyColumn} = ? OR (${keyColumn} >= ? AND ${keyColumn} < ?)`,
      );
      where.push(`(${ranges.join(' OR ')})`);
      for (const root of query.within) params.push(root, `${root}/`, `${root}0`);
    }
  }
  if (query.after !== undefined) {
    where.push(`${keyColumn} > ?`);
    params.push(query.after);
  }
  for (const [column, value] of Object.entries(equal)) {
    if (value === undefined) continue;
    where.push(`${column} = ?`);
    params.push(value);
  }
  params.push(query.limit);
  const filter = where.length > 0 ? ` WHERE ${where.join(' AND ')}` : '';
  return { sql: `SELECT * FROM {${table}}${filter} ORDER BY ${keyColumn} LIMIT ?`, params };
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

const INSERT_TOKEN = insertSql(TOKENS, ' ON CONFLICT (name) DO NOTHING');
const UPDATE_TOKEN = updateSql(TOKENS, 'id_hash = ?');
const INSERT_PROVIDER = insertSql(PROVIDERS, ' ON CONFLICT (id) DO NOTHING');
const UPDATE_PROVIDER = updateSql(PROVIDERS, 'id = ? AND version = ?');
const INSERT_CONNECTION = insertSql(CONNECTIONS, ' ON CONFLICT (id) DO NOTHING');
const UPDATE_CONNECTION = updateSql(CONNECTIONS, 'id = ? AND version = ?');
const INSERT_PENDING = insertSql(PENDING_AUTHORIZATIONS, '');
// No conflict clause: an id that exists fails the statement, and the transaction with it.
const INSERT_EVENT = insertSql(AUDIT_EVENTS, '');
const INSERT_DELIVERY = insertSql(WEBHOOK_DELIVERIES, '');
const PUT_VAULT = `INSERT INTO {vault_entries} (kind, key, ciphertext, key_id, version, created_at, updated_at)
  VALUES (?, ?, ?, ?, 1, ?, ?)
  ON CONFLICT (kind, key) DO UPDATE SET
    ciphertext = excluded.ciphertext, key_id = excluded.key_id,
    version = {vault_entries}.version + 1, updated_at = excluded.updated_at
  RETURNING *`;
/** A token and its descendants: `name`, or names in [`name.`, `name/`) (`/` follows `.`). */
const TREE = '(name = ? OR (name >= ? AND name < ?))';
const treeParams = (name: string) => [name, `${name}.`, `${name}/`];

const putVaultParams = (write: VaultWrite, now: number) => [
  write.kind,
  write.key,
  write.ciphertext,
  write.keyId,
  now,
  now,
];
const putVaultResult = (row: Row | undefined) => {
  const entry = VAULT_ENTRIES.fromRow(row ?? {});
  return { entry, created: entry.version === 1 };
};

function* putVault(write: VaultWrite, now: number) {
  return putVaultResult(yield* get(PUT_VAULT, putVaultParams(write, now)));
}

const DELETE_VAULT = 'DELETE FROM {vault_entries} WHERE kind = ? AND key = ?';

function* deleteVault(keys: VaultKey[] | undefined) {
  for (const { kind, key } of keys ?? []) yield* run(DELETE_VAULT, [kind, key]);
}

/** Appends events and their deliveries. */
function* writeEvents(write: EventWrite | undefined) {
  for (const event of write?.events ?? []) yield* run(INSERT_EVENT, AUDIT_EVENTS.toRow(event));
  for (const delivery of write?.deliveries ?? []) {
    yield* run(INSERT_DELIVERY, WEBHOOK_DELIVERIES.toRow(delivery));
  }
}

/** Writes one row (an insert or a compare-and-set), its vault changes and events, or nothing. */
function* writeWithVault(
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

function counterOf(row: Row | undefined): CounterValue | null {
  return row === undefined ? null : { count: Number(row.count), expiresAt: Number(row.expires_at) };
}

/** A driver's answer to a `get`: the row, or `undefined` when there is none. */
const asRow = (answer: unknown): Row | undefined =>
  typeof answer === 'object' && answer !== null ? (answer as Row) : undefined;

/** The hot path of every authenticated request: one point read on the primary key. */
const TOKEN_BY_ID_HASH = 'SELECT * FROM {tokens} WHERE id_hash = ?';

/**
 * Keyway's {@link Storage} on SQL, written once for SQLite and PostgreSQL: each operation is
 * a program of statements (see `program.ts`) that the engine's driver runs, as one
 * transaction where the operation's promise spans several statements. Row locks
 * (`{lock …}`) apply on PostgreSQL, where concurrent transactions interleave; SQLite's
 * `BEGIN IMMEDIATE` already serializes writers.
 */
export function sqlStorage(
  dialect: Dialect,
  driver: SqlDriver,
): Omit<Storage, 'close'> & { listConnectionsSql(query: ListConnectionsQuery): SqlQuery } {
  const locks = dialect.engine === 'postgres';
  const once = <T>(program: Program<T>) => driver.execute(program, false);
  const atomic = <T>(program: Program<T>) => driver.execute(program, true);
  // One statement each: straight to the driver, no program around them.
  const changed = async (sql: string, params: unknown[]): Promise<number> => {
    const changes = await driver.query({ kind: 'run', sql, params });
    return typeof changes === 'number' ? changes : 0;
  };
  const one = async (sql: string, params: unknown[]): Promise<Row | undefined> =>
    asRow(await driver.query({ kind: 'get', sql, params }));
  const list = async <R>(codec: RowCodec<R>, { sql, params }: SqlQuery): Promise<R[]> => {
    const rows = await driver.query({ kind: 'all', sql, params });
    return Array.isArray(rows) ? rows.map((row: Row) => codec.fromRow(row)) : [];
  };
  const find = async <R>(codec: RowCodec<R>, sql: string, params: unknown[]): Promise<R | null> => {
    const row = await one(sql, params);
    return row === undefined ? null : codec.fromRow(row);
  };

  return {
    listConnectionsSql(query) {
      const { sql, params } = connectionListQuery(query);
      return { sql: compile(dialect, sql), params };
    },

    // ─── tokens ───
    insertToken: (record, now, events) =>
      atomic(
        (function* () {
          yield* run('DELETE FROM {tokens} WHERE name = ? AND expires_at <= ?', [record.name, now]);
          // A concurrent insert of the name waits on the unique index, then does nothing.
          if ((yield* run(INSERT_TOKEN, TOKENS.toRow(record))) !== 1) return false;
          yield* writeEvents(events);
          return true;
        })(),
      ),

    findTokenByIdHash: (idHash) => find(TOKENS, TOKEN_BY_ID_HASH, [idHash]),

    ...(driver.synchronous === true
      ? {
          findTokenByIdHashSync(idHash: string) {
            const row = asRow(
              driver.query({ kind: 'get', sql: TOKEN_BY_ID_HASH, params: [idHash] }),
            );
            return row === undefined ? null : TOKENS.fromRow(row);
          },
        }
      : {}),

    findLiveTokenByName: (name, now) =>
      find(TOKENS, 'SELECT * FROM {tokens} WHERE name = ? AND expires_at > ?', [name, now]),

    listLiveTokens({ treeOf, after, limit, now }) {
      const where = ['expires_at > ?'];
      const params: unknown[] = [now];
      if (treeOf !== undefined) {
        where.push(TREE);
        params.push(...treeParams(treeOf));
      }
      if (after !== undefined) {
        where.push('name > ?');
        params.push(after);
      }
      params.push(limit);
      const sql = `SELECT * FROM {tokens} WHERE ${where.join(' AND ')} ORDER BY name LIMIT ?`;
      return list(TOKENS, { sql, params });
    },

    updateTokenTree: (name, now, plan) =>
      atomic(
        (function* () {
          // Row locks: a concurrent narrowing of the same tree waits, then reads our result.
          const rows = yield* all(
            `SELECT * FROM {tokens} WHERE ${TREE} AND expires_at > ? ORDER BY name{lock FOR UPDATE}`,
            [...treeParams(name), now],
          );
          const tree = rows.map((row) => TOKENS.fromRow(row));
          if (tree[0]?.name !== name) return false;
          const changes = plan(tree);
          for (const record of changes.update) {
            yield* run(UPDATE_TOKEN, [...TOKENS.toRow(record), record.idHash]);
          }
          for (const idHash of changes.delete) {
            yield* run('DELETE FROM {tokens} WHERE id_hash = ?', [idHash]);
          }
          yield* writeEvents(changes.events);
          return true;
        })(),
      ),

    deleteTokenTree: (name, now, events) =>
      atomic(
        (function* () {
          const live = yield* get(
            'SELECT 1 AS live FROM {tokens} WHERE name = ? AND expires_at > ?{lock FOR UPDATE}',
            [name, now],
          );
          if (live === undefined) return false;
          yield* run(`DELETE FROM {tokens} WHERE ${TREE}`, treeParams(name));
          yield* writeEvents(events);
          return true;
        })(),
      ),

    // ─── providers ───
    getProvider: (id) => find(PROVIDERS, 'SELECT * FROM {providers} WHERE id = ?', [id]),

    listProviders: (query) => list(PROVIDERS, pathListQuery('providers', 'id', query)),

    insertProvider: (record, changes, events) =>
      atomic(
        writeWithVault(INSERT_PROVIDER, PROVIDERS.toRow(record), changes, record.updatedAt, events),
      ),

    compareAndSetProvider: (record, expectedVersion, changes, events) =>
      atomic(
        writeWithVault(
          UPDATE_PROVIDER,
          [...PROVIDERS.toRow(record), record.id, expectedVersion],
          changes,
          record.updatedAt,
          events,
        ),
      ),

    deleteProvider: (id, vaultDeletes, events) =>
      atomic(
        (function* () {
          // The row lock makes a concurrent insertConnection (which key-share locks the
          // provider) either finish first, and be seen below, or wait and find it gone.
          const found = yield* get(
            'SELECT 1 AS found FROM {providers} WHERE id = ?{lock FOR UPDATE}',
            [id],
          );
          if (found === undefined) return 'not_found' as const;
          const used = yield* get(
            'SELECT 1 AS used FROM {connections} WHERE provider_id = ? LIMIT 1',
            [id],
          );
          if (used !== undefined) return 'in_use' as const;
          yield* run('DELETE FROM {providers} WHERE id = ?', [id]);
          yield* deleteVault(vaultDeletes);
          yield* writeEvents(events);
          return 'deleted' as const;
        })(),
      ),

    // ─── connections ───
    getConnection: (id) => find(CONNECTIONS, 'SELECT * FROM {connections} WHERE id = ?', [id]),

    listConnections: (query) => list(CONNECTIONS, connectionListQuery(query)),

    insertConnection: (record, changes, events) =>
      atomic(
        (function* () {
          // Key-share lock on the provider: a concurrent deleteProvider either sees this
          // connection or waits for it.
          if (locks) {
            yield* get('SELECT 1 AS found FROM {providers} WHERE id = ?{lock FOR KEY SHARE}', [
              record.providerId,
            ]);
          }
          return yield* writeWithVault(
            INSERT_CONNECTION,
            CONNECTIONS.toRow(record),
            changes,
            record.updatedAt,
            events,
          );
        })(),
      ),

    // Concurrent writers from one version queue on the row lock; when the first commits,
    // the others re-check the version and update nothing.
    compareAndSetConnection: (record, expectedVersion, changes, events) =>
      atomic(
        writeWithVault(
          UPDATE_CONNECTION,
          [...CONNECTIONS.toRow(record), record.id, expectedVersion],
          changes,
          record.updatedAt,
          events,
        ),
      ),

    deleteConnection: (id, vaultDeletes, events) =>
      atomic(
        (function* () {
          yield* deleteVault(vaultDeletes);
          if ((yield* run('DELETE FROM {connections} WHERE id = ?', [id])) !== 1) return false;
          yield* writeEvents(events);
          return true;
        })(),
      ),

    // ─── pending authorizations ───
    insertPendingAuthorization: async (record) => {
      await changed(INSERT_PENDING, PENDING_AUTHORIZATIONS.toRow(record));
    },

    // One statement: exactly one concurrent caller deletes the row and gets it back.
    takePendingAuthorization: (stateHash, now) =>
      find(
        PENDING_AUTHORIZATIONS,
        'DELETE FROM {pending_authorizations} WHERE state_hash = ? AND expires_at > ? RETURNING *',
        [stateHash, now],
      ),

    // ─── vault ───
    getVaultEntry: (kind, key) =>
      find(VAULT_ENTRIES, 'SELECT * FROM {vault_entries} WHERE kind = ? AND key = ?', [kind, key]),

    putVaultEntry: async (write, now, events) =>
      events === undefined
        ? putVaultResult(await one(PUT_VAULT, putVaultParams(write, now)))
        : atomic(
            (function* () {
              const result = yield* putVault(write, now);
              yield* writeEvents(events(result.created));
              return result;
            })(),
          ),

    deleteVaultEntry: async (kind, key, events) =>
      events === undefined
        ? (await changed(DELETE_VAULT, [kind, key])) === 1
        : atomic(
            (function* () {
              if ((yield* run(DELETE_VAULT, [kind, key])) !== 1) return false;
              yield* writeEvents(events);
              return true;
            })(),
          ),

    listVaultEntries: ({ kind, ...query }) =>
      list(VAULT_ENTRIES, pathListQuery('vault_entries', 'key', query, { kind })),

    listVaultEntriesNotUnderKey: (keyId, after, limit) =>
      list(
        VAULT_ENTRIES,
        after === null
          ? {
              sql: 'SELECT * FROM {vault_entries} WHERE key_id <> ? ORDER BY kind, key LIMIT ?',
              params: [keyId, limit],
            }
          : {
              sql: 'SELECT * FROM {vault_entries} WHERE key_id <> ? AND (kind, key) > (?, ?) ORDER BY kind, key LIMIT ?',
              params: [keyId, after.kind, after.key, limit],
            },
      ),

    replaceVaultCiphertext: async (kind, key, expected, next) =>
      (await changed(
        'UPDATE {vault_entries} SET ciphertext = ?, key_id = ? WHERE kind = ? AND key = ? AND ciphertext = ?',
        [next.ciphertext, next.keyId, kind, key, expected],
      )) === 1,

    // ─── leases ───
    acquireLease: async (key, owner, expiresAt, now) =>
      (await changed(
        `INSERT INTO {leases} (key, owner, expires_at) VALUES (?, ?, ?)
         ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
         WHERE {leases}.expires_at <= ? OR {leases}.owner = excluded.owner`,
        [key, owner, expiresAt, now],
      )) === 1,

    releaseLease: async (key, owner) => {
      await changed('DELETE FROM {leases} WHERE key = ? AND owner = ?', [key, owner]);
    },

    // ─── counters ───
    incrementCounter: async (key, expiresAt, now) => {
      const row = await one(
        `INSERT INTO {counters} (key, count, expires_at) VALUES (?, 1, ?)
         ON CONFLICT (key) DO UPDATE SET
           count = CASE WHEN {counters}.expires_at <= ? THEN 1 ELSE {counters}.count + 1 END,
           expires_at = CASE WHEN {counters}.expires_at <= ? THEN excluded.expires_at
                             ELSE {counters}.expires_at END
         RETURNING count, expires_at`,
        [key, expiresAt, now, now],
      );
      return counterOf(row) ?? { count: 1, expiresAt };
    },

    getCounter: async (key, now) =>
      counterOf(
        await one('SELECT count, expires_at FROM {counters} WHERE key = ? AND expires_at > ?', [
          key,
          now,
        ]),
      ),

    // ─── events ───
    appendEvents: (events) => atomic(writeEvents(events)),

    listAuditEvents: (query) => list(AUDIT_EVENTS, auditListQuery(query)),

    // One statement: the subquery locks the due rows it picks, skipping rows another
    // instance is claiming (PostgreSQL); SQLite runs the statement alone.
    claimWebhookDeliveries: async (owner, leaseExpiresAt, now, limit) => {
      const claimed = await list(WEBHOOK_DELIVERIES, {
        sql: `UPDATE {webhook_deliveries} SET lease_owner = ?, lease_expires_at = ?
          WHERE id IN (SELECT id FROM {webhook_deliveries}
            WHERE status = 'pending' AND next_attempt_at <= ? AND lease_expires_at <= ?
            ORDER BY next_attempt_at, id LIMIT ?{lock FOR UPDATE SKIP LOCKED})
          RETURNING *`,
        params: [owner, leaseExpiresAt, now, now, limit],
      });
      return claimed.sort((a, b) => a.nextAttemptAt - b.nextAttemptAt || (a.id < b.id ? -1 : 1));
    },

    finishWebhookAttempt: async (id, owner, outcome) =>
      (await changed(
        `UPDATE {webhook_deliveries} SET status = ?, attempts = ?, next_attempt_at = ?,
           last_attempt_at = ?, last_status = ?, last_error = ?, expires_at = ?,
           lease_owner = '', lease_expires_at = 0
         WHERE id = ? AND lease_owner = ?`,
        [
          outcome.status,
          outcome.attempts,
          outcome.nextAttemptAt,
          outcome.lastAttemptAt,
          outcome.lastStatus,
          outcome.lastError,
          outcome.expiresAt,
          id,
          owner,
        ],
      )) === 1,

    listWebhookDeliveries: ({ status, after, limit }) => {
      const where: string[] = [];
      const params: unknown[] = [];
      if (status !== undefined) {
        where.push('status = ?');
        params.push(status);
      }
      if (after !== undefined) {
        where.push('id > ?');
        params.push(after);
      }
      params.push(limit);
      const filter = where.length > 0 ? ` WHERE ${where.join(' AND ')}` : '';
      return list(WEBHOOK_DELIVERIES, {
        sql: `SELECT * FROM {webhook_deliveries}${filter} ORDER BY id LIMIT ?`,
        params,
      });
    },

    // ─── maintenance ───
    purgeExpired: (now, limit) =>
      once(
        (function* () {
          let removed = 0;
          for (const [table, key] of [
            ['tokens', 'id_hash'],
            ['pending_authorizations', 'state_hash'],
            ['leases', 'key'],
            ['counters', 'key'],
            ['audit_events', 'id'],
            ['webhook_deliveries', 'id'],
          ] as const) {
            // One short statement per table: a batch, never a long lock; on PostgreSQL,
            // rows a request is working on are skipped and left for the next round.
            removed += yield* run(
              `DELETE FROM {${table}} WHERE ${key} IN (SELECT ${key} FROM {${table}} WHERE expires_at <= ? LIMIT ?{lock FOR UPDATE SKIP LOCKED})`,
              [now, limit],
            );
          }
          return removed;
        })(),
      ),
  };
}
