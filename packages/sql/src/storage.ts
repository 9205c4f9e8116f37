import type { EventWrite, ListConnectionsQuery, Storage, VaultWrite } from '@keyway/core/storage';
import { compile, type Dialect } from './dialect.js';
import { all, get, type Program, type Row, run, type SqlDriver } from './program.js';
import {
  AUDIT_EVENTS,
  CONNECTIONS,
  PENDING_AUTHORIZATIONS,
  PROVIDERS,
  type RowCodec,
  TOKEN_CHECKS,
  TOKENS,
  VAULT_ENTRIES,
  WEBHOOK_DELIVERIES,
} from './rows.js';
import { MIGRATION_STEPS } from './schema.js';

import {
  asRow,
  auditListQuery,
  CONNECTION_BY_ID,
  connectionListQuery,
  counterOf,
  DELETE_VAULT,
  deleteVault,
  handOutOf,
  handOutStatement,
  INSERT_CONNECTION,
  INSERT_PENDING,
  INSERT_PROVIDER,
  INSERT_TOKEN,
  notUnderKeyQuery,
  PROVIDER_BY_ID,
  PUT_VAULT,
  pathListQuery,
  pointRead,
  putVault,
  putVaultParams,
  putVaultResult,
  type SqlQuery,
  subtreePageQuery,
  TOKEN_BY_ID_HASH,
  TOKEN_BY_LIVE_NAME,
  TOKEN_CHECK_BY_ID_HASH,
  TOKENS_READ,
  TREE,
  tokenSubtree,
  tokensReadOf,
  treeParams,
  UPDATE_CONNECTION,
  UPDATE_PROVIDER,
  UPDATE_TOKEN,
  VAULT_ENTRY_BY_KEY,
  valuesOf,
  writeEvents,
  writeWithVault,
} from './statements.js';

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
  const handOutSql = handOutStatement(dialect.engine);
  // A point read answers the row's values, read in the codec's order (its `select`).
  const find = async <R>(codec: RowCodec<R>, sql: string, params: unknown[]): Promise<R | null> =>
    valuesOf(codec, await driver.query(pointRead(sql, params)));

  return {
    listConnectionsSql(query) {
      const { sql, params } = connectionListQuery(query);
      return { sql: compile(dialect, sql), params };
    },

    // ─── tokens ───
    insertToken: (record, now, events) => atomic(insertTokenProgram(record, now, events)),

    findTokenByIdHash: (idHash) => find(TOKENS, TOKEN_BY_ID_HASH, [idHash]),

    fastPaths: {
      // The check's three columns, for an engine read asynchronously (and offered by all).
      findTokenCheckByIdHash: (idHash) => find(TOKEN_CHECKS, TOKEN_CHECK_BY_ID_HASH, [idHash]),
      ...(driver.synchronous === true
        ? {
            findTokenByIdHashSync: (idHash: string) =>
              valuesOf(TOKEN_CHECKS, driver.query(pointRead(TOKEN_CHECK_BY_ID_HASH, [idHash]))),
            readForHandOutSync: (id: string, vaultKind: string) =>
              handOutOf(dialect.engine, driver.query(pointRead(handOutSql, [vaultKind, id]))),
            readWithTokensSync: (id: string, vaultKind: string) =>
              tokensReadOf(driver.query(pointRead(TOKENS_READ, [vaultKind, id]))),
          }
        : {}),
      // A hand-out's three reads in one statement.
      readForHandOut: async (id, vaultKind) =>
        handOutOf(dialect.engine, await driver.query(pointRead(handOutSql, [vaultKind, id]))),
      // A connection and its tokens in one statement, without the provider (the gateway's).
      readWithTokens: async (id, vaultKind) =>
        tokensReadOf(await driver.query(pointRead(TOKENS_READ, [vaultKind, id]))),
    },

    findLiveTokenByName: (name, now) => find(TOKENS, TOKEN_BY_LIVE_NAME, [name, now]),

    listLiveTokens({ treeOf, after, limit, now }) {
      const where = ['expires_at > ?'];
      const params: unknown[] = [now];
      if (after !== undefined) {
        where.push('name > ?');
        params.push(after);
      }
      if (treeOf !== undefined) {
        const query = subtreePageQuery(
          'tokens',
          'name',
          [tokenSubtree(treeOf)],
          { where, params },
          limit,
        );
        return list(TOKENS, query);
      }
      const sql = `SELECT * FROM {tokens} WHERE ${where.join(' AND ')} ORDER BY name LIMIT ?`;
      return list(TOKENS, { sql, params: [...params, limit] });
    },

    updateTokenTree: (name, now, plan) => atomic(updateTokenTreeProgram(name, now, plan)),

    deleteTokenTree: (name, now, events) => atomic(deleteTokenTreeProgram(name, now, events)),

    // ─── providers ───
    getProvider: (id) => find(PROVIDERS, PROVIDER_BY_ID, [id]),

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
      atomic(deleteProviderProgram(id, vaultDeletes, events)),

    // ─── connections ───
    getConnection: (id) => find(CONNECTIONS, CONNECTION_BY_ID, [id]),

    listConnections: (query) => list(CONNECTIONS, connectionListQuery(query)),

    insertConnection: (record, changes, events) =>
      atomic(insertConnectionProgram(locks, record, changes, events)),

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
      atomic(deleteConnectionProgram(id, vaultDeletes, events)),

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
    getVaultEntry: (kind, key) => find(VAULT_ENTRIES, VAULT_ENTRY_BY_KEY, [kind, key]),

    putVaultEntry: async (write, now, events) =>
      events === undefined
        ? putVaultResult(await one(PUT_VAULT, putVaultParams(write, now)))
        : atomic(putVaultEntryProgram(write, now, events)),

    deleteVaultEntry: async (kind, key, events) =>
      events === undefined
        ? (await changed(DELETE_VAULT, [kind, key])) === 1
        : atomic(deleteVaultEntryProgram(kind, key, events)),

    listVaultEntries: ({ kind, ...query }) =>
      list(VAULT_ENTRIES, pathListQuery('vault_entries', 'key', query, { kind })),

    listVaultEntriesNotUnderKey: (keyId, after, limit) =>
      list(VAULT_ENTRIES, notUnderKeyQuery(keyId, after, limit)),

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
    purgeExpired: (now, limit) => once(purgeExpiredProgram(now, limit)),

    async health() {
      const row = await one('SELECT MAX(version) AS version FROM {migrations}', []);
      const version = row?.version === null || row?.version === undefined ? 0 : Number(row.version);
      return {
        engine: dialect.engine,
        schema: { version, expected: MIGRATION_STEPS.length },
      };
    },
  };
}

/*
 * The programs of the writes of several statements, each a generator function declared
 * once. Written inline (`atomic((function* () { … })())`), each call made a new generator
 * function, and with it a new hidden class for its generator object (docs/benchmarks.md,
 * #51).
 */

/** The statements of `insertToken`. */
function* insertTokenProgram(...[record, now, events]: Parameters<Storage['insertToken']>) {
  yield* run('DELETE FROM {tokens} WHERE name = ? AND expires_at <= ?', [record.name, now]);
  // A concurrent insert of the name waits on the unique index, then does nothing.
  if ((yield* run(INSERT_TOKEN, TOKENS.toRow(record))) !== 1) return false;
  yield* writeEvents(events);
  return true;
}

/** The statements of `updateTokenTree`. */
function* updateTokenTreeProgram(...[name, now, plan]: Parameters<Storage['updateTokenTree']>) {
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
}

/** The statements of `deleteTokenTree`. */
function* deleteTokenTreeProgram(...[name, now, events]: Parameters<Storage['deleteTokenTree']>) {
  const live = yield* get(
    'SELECT 1 AS live FROM {tokens} WHERE name = ? AND expires_at > ?{lock FOR UPDATE}',
    [name, now],
  );
  if (live === undefined) return false;
  yield* run(`DELETE FROM {tokens} WHERE ${TREE}`, treeParams(name));
  yield* writeEvents(events);
  return true;
}

/** The statements of `deleteProvider`. */
function* deleteProviderProgram(
  ...[id, vaultDeletes, events]: Parameters<Storage['deleteProvider']>
) {
  // The row lock makes a concurrent insertConnection (which key-share locks the
  // provider) either finish first, and be seen below, or wait and find it gone.
  const found = yield* get('SELECT 1 AS found FROM {providers} WHERE id = ?{lock FOR UPDATE}', [
    id,
  ]);
  if (found === undefined) return 'not_found' as const;
  const used = yield* get('SELECT 1 AS used FROM {connections} WHERE provider_id = ? LIMIT 1', [
    id,
  ]);
  if (used !== undefined) return 'in_use' as const;
  yield* run('DELETE FROM {providers} WHERE id = ?', [id]);
  yield* deleteVault(vaultDeletes);
  yield* writeEvents(events);
  return 'deleted' as const;
}

/** The statements of `insertConnection`. */
function* insertConnectionProgram(
  locks: boolean,
  ...[record, changes, events]: Parameters<Storage['insertConnection']>
) {
  // Key-share lock on the provider: a concurrent deleteProvider either sees this
  // connection or waits for it.
  const lock = 'SELECT 1 AS found FROM {providers} WHERE id = ?{lock FOR KEY SHARE}';
  if (locks) yield* get(lock, [record.providerId]);
  return yield* writeWithVault(
    INSERT_CONNECTION,
    CONNECTIONS.toRow(record),
    changes,
    record.updatedAt,
    events,
  );
}

/** The statements of `deleteConnection`. */
function* deleteConnectionProgram(
  ...[id, vaultDeletes, events]: Parameters<Storage['deleteConnection']>
) {
  yield* deleteVault(vaultDeletes);
  if ((yield* run('DELETE FROM {connections} WHERE id = ?', [id])) !== 1) return false;
  yield* writeEvents(events);
  return true;
}

/** The statements of `purgeExpired`. */
function* purgeExpiredProgram(...[now, limit]: Parameters<Storage['purgeExpired']>) {
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
      `DELETE FROM {${table}} WHERE ${key} IN (SELECT ${key} FROM {${table}} WHERE expires_at <= ? LIMIT ` +
        `?{lock FOR UPDATE SKIP LOCKED})`,
      [now, limit],
    );
  }
  return removed;
}

/** The statements of `putVaultEntry` with events. */
function* putVaultEntryProgram(
  write: VaultWrite,
  now: number,
  events: (created: boolean) => EventWrite,
) {
  const result = yield* putVault(write, now);
  yield* writeEvents(events(result.created));
  return result;
}

/** The statements of `deleteVaultEntry` with events. */
function* deleteVaultEntryProgram(kind: string, key: string, events: EventWrite) {
  if ((yield* run(DELETE_VAULT, [kind, key])) !== 1) return false;
  yield* writeEvents(events);
  return true;
}
