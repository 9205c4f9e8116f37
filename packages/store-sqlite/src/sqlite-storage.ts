import {
  CONNECTION_COLUMNS,
  connectionFromRow,
  connectionRowValues,
  type ListConnectionsQuery,
  type ListPathsQuery,
  PENDING_AUTHORIZATION_COLUMNS,
  PROVIDER_COLUMNS,
  pendingAuthorizationFromRow,
  pendingAuthorizationRowValues,
  providerFromRow,
  providerRowValues,
  type Storage,
  TOKEN_COLUMNS,
  tokenFromRow,
  tokenRowValues,
  type VaultChanges,
  type VaultKey,
  type VaultWrite,
  vaultEntryFromRow,
} from '@keyway/core';
import Database from 'better-sqlite3';
import { MIGRATIONS } from './schema.js';

type DB = Database.Database;

const marks = (columns: string) =>
  columns
    .split(',')
    .map(() => '?')
    .join(', ');
const INSERT_TOKEN = `INSERT INTO keyway_tokens (${TOKEN_COLUMNS}) VALUES (${marks(TOKEN_COLUMNS)}) ON CONFLICT (name) DO NOTHING`;
const UPDATE_TOKEN = `UPDATE keyway_tokens SET (${TOKEN_COLUMNS}) = (${marks(TOKEN_COLUMNS)}) WHERE id_hash = ?`;
const INSERT_PROVIDER = `INSERT INTO keyway_providers (${PROVIDER_COLUMNS}) VALUES (${marks(PROVIDER_COLUMNS)}) ON CONFLICT (id) DO NOTHING`;
const UPDATE_PROVIDER = `UPDATE keyway_providers SET (${PROVIDER_COLUMNS}) = (${marks(PROVIDER_COLUMNS)}) WHERE id = ? AND version = ?`;
const INSERT_CONNECTION = `INSERT INTO keyway_connections (${CONNECTION_COLUMNS}) VALUES (${marks(CONNECTION_COLUMNS)}) ON CONFLICT (id) DO NOTHING`;
const UPDATE_CONNECTION = `UPDATE keyway_connections SET (${CONNECTION_COLUMNS}) = (${marks(CONNECTION_COLUMNS)}) WHERE id = ? AND version = ?`;
const INSERT_PENDING = `INSERT INTO keyway_pending_authorizations (${PENDING_AUTHORIZATION_COLUMNS}) VALUES (${marks(PENDING_AUTHORIZATION_COLUMNS)})`;
type Row = Record<string, unknown>;

/** Options of {@link sqliteStorage}. */
export interface SqliteStorageOptions {
  /** How long a write waits for another connection's lock, in ms. Default 5000. */
  busyTimeoutMs?: number;
}

/** SQLite storage, plus what its own tests and tools need. */
export interface SqliteStorage extends Storage {
  /** The better-sqlite3 connection (for inspection and tests; do not write through it). */
  readonly database: DB;
  /** The SQL and parameters the adapter runs for a connection listing (for EXPLAIN). */
  listConnectionsSql(query: ListConnectionsQuery): { sql: string; params: unknown[] };
}

/**
 * The rows of one subtree-ranged list query: for each root `p`, `p` itself or the keys in
 * [`p/`, `p0`), since `'0'` is the character after `'/'`. Two index range scans per root.
 */
export function buildPathListSql(
  table: string,
  keyColumn: string,
  query: ListPathsQuery,
  extra: { column: string; value: unknown }[] = [],
): { sql: string; params: unknown[] } {
  const where: string[] = [];
  const params: unknown[] = [];
  if (query.within !== undefined) {
    if (query.within.length === 0) where.push('0');
    else {
      where.push(
        `(${query.within
          .map(() => `${keyColumn} = ? OR (${keyColumn} >= ? AND ${keyColumn} < ?)`)
          .join(' OR ')})`,
      );
      for (const root of query.within) params.push(root, `${root}/`, `${root}0`);
    }
  }
  if (query.after !== undefined) {
    where.push(`${keyColumn} > ?`);
    params.push(query.after);
  }
  for (const { column, value } of extra) {
    where.push(`${column} = ?`);
    params.push(value);
  }
  const sql = `SELECT * FROM ${table}${where.length ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY ${keyColumn} LIMIT ?`;
  params.push(query.limit);
  return { sql, params };
}

/** Runs `fn` again while SQLite answers SQLITE_BUSY, for at most `timeoutMs`. */
function retryWhileBusy(fn: () => void, timeoutMs: number): void {
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 0; ; attempt++) {
    try {
      fn();
      return;
    } catch (error) {
      const busy = (error as { code?: string }).code?.startsWith('SQLITE_BUSY') === true;
      if (!busy || Date.now() >= deadline) throw error;
      // A short synchronous pause: this runs once, while the storage is being opened.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, Math.min(5 + attempt * 5, 50));
    }
  }
}

/** Applies the versioned migrations that `db` lacks, serialized across processes. */
export function migrate(db: DB): void {
  db.exec(
    'CREATE TABLE IF NOT EXISTS keyway_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)',
  );
  db.transaction(() => {
    const row = db.prepare('SELECT MAX(version) AS version FROM keyway_migrations').get() as Row;
    const current = (row.version as number | null) ?? 0;
    for (let version = current + 1; version <= MIGRATIONS.length; version++) {
      db.exec(MIGRATIONS[version - 1] as string);
      db.prepare('INSERT INTO keyway_migrations (version, applied_at) VALUES (?, ?)').run(
        version,
        Date.now(),
      );
    }
  }).immediate();
}

/**
 * Keyway storage on SQLite through better-sqlite3: one file, WAL journal, a busy timeout so
 * several processes can share it, versioned migrations applied on open, and prepared
 * statements for every query. Every promise that spans statements runs in a
 * `BEGIN IMMEDIATE` transaction, which SQLite serializes across connections and processes.
 *
 * Pass a file path (the storage opens it and closes it on `close()`) or an open
 * better-sqlite3 `Database` (which you keep and close yourself).
 *
 * @example
 * import { createBroker } from '@keyway/core';
 * import { sqliteStorage } from '@keyway/store-sqlite';
 * const broker = createBroker({ rootKey, storage: sqliteStorage('keyway.sqlite') });
 */
export function sqliteStorage(
  database: string | DB,
  options: SqliteStorageOptions = {},
): SqliteStorage {
  const owned = typeof database === 'string';
  const db: DB = owned ? new Database(database) : database;
  const busyTimeoutMs = Math.max(0, Math.trunc(options.busyTimeoutMs ?? 5000));
  try {
    db.pragma(`busy_timeout = ${busyTimeoutMs}`);
    // Opening is where processes that start together collide: switching a new file to WAL
    // and the first migration can answer SQLITE_BUSY without waiting on the busy handler.
    retryWhileBusy(() => {
      db.pragma('journal_mode = WAL');
      migrate(db);
    }, busyTimeoutMs);
  } catch (error) {
    if (owned) db.close();
    throw error;
  }
  // WAL makes NORMAL durable against application crashes; only an OS crash can lose the
  // last transactions, never corrupt the file.
  db.pragma('synchronous = NORMAL');

  const cache = new Map<string, Database.Statement>();
  const stmt = (sql: string): Database.Statement => {
    let statement = cache.get(sql);
    if (statement === undefined) {
      statement = db.prepare(sql);
      cache.set(sql, statement);
    }
    return statement;
  };
  const immediate = <T>(fn: () => T): T => db.transaction(fn).immediate();

  const putVault = (write: VaultWrite, now: number) => {
    const row = stmt(
      `INSERT INTO keyway_vault_entries (kind, key, ciphertext, key_id, version, created_at, updated_at)
       VALUES (?, ?, ?, ?, 1, ?, ?)
       ON CONFLICT (kind, key) DO UPDATE SET
         ciphertext = excluded.ciphertext, key_id = excluded.key_id,
         version = keyway_vault_entries.version + 1, updated_at = excluded.updated_at
       RETURNING *`,
    ).get(write.kind, write.key, write.ciphertext, write.keyId, now, now) as Row;
    const entry = vaultEntryFromRow(row);
    return { entry, created: entry.version === 1 };
  };
  const deleteVault = (keys: VaultKey[] | undefined) => {
    for (const { kind, key } of keys ?? []) {
      stmt('DELETE FROM keyway_vault_entries WHERE kind = ? AND key = ?').run(kind, key);
    }
  };
  const applyVault = (changes: VaultChanges | undefined, now: number) => {
    for (const write of changes?.put ?? []) putVault(write, now);
    deleteVault(changes?.delete);
  };

  /** Writes one row (insert or compare-and-set) and its vault changes, or nothing. */
  const writeWithVault = (
    sql: string,
    values: unknown[],
    changes: VaultChanges | undefined,
    now: number,
  ) =>
    immediate(() => {
      if (stmt(sql).run(...values).changes !== 1) return false;
      applyVault(changes, now);
      return true;
    });

  const treeParams = (name: string) => [name, `${name}.`, `${name}/`];
  const TREE = '(name = ? OR (name >= ? AND name < ?))';

  const listConnectionsSql = (query: ListConnectionsQuery) =>
    buildPathListSql('keyway_connections', 'id', query, [
      ...(query.providerId === undefined
        ? []
        : [{ column: 'provider_id', value: query.providerId }]),
      ...(query.status === undefined ? [] : [{ column: 'status', value: query.status }]),
    ]);

  return {
    database: db,
    listConnectionsSql,

    // ─── tokens ───
    async insertToken(record, now) {
      return immediate(() => {
        stmt('DELETE FROM keyway_tokens WHERE name = ? AND expires_at <= ?').run(record.name, now);
        return stmt(INSERT_TOKEN).run(...tokenRowValues(record)).changes === 1;
      });
    },

    async findTokenByIdHash(idHash) {
      const row = stmt('SELECT * FROM keyway_tokens WHERE id_hash = ?').get(idHash) as
        | Row
        | undefined;
      return row === undefined ? null : tokenFromRow(row);
    },

    async findLiveTokenByName(name, now) {
      const row = stmt('SELECT * FROM keyway_tokens WHERE name = ? AND expires_at > ?').get(
        name,
        now,
      ) as Row | undefined;
      return row === undefined ? null : tokenFromRow(row);
    },

    async listLiveTokens({ treeOf, after, limit, now }) {
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
      const sql = `SELECT * FROM keyway_tokens WHERE ${where.join(' AND ')} ORDER BY name LIMIT ?`;
      return (stmt(sql).all(...params, limit) as Row[]).map(tokenFromRow);
    },

    async updateTokenTree(name, now, plan) {
      return immediate(() => {
        const tree = (
          stmt(`SELECT * FROM keyway_tokens WHERE ${TREE} AND expires_at > ? ORDER BY name`).all(
            ...treeParams(name),
            now,
          ) as Row[]
        ).map(tokenFromRow);
        if (tree[0]?.name !== name) return false;
        const changes = plan(tree);
        for (const record of changes.update) {
          stmt(UPDATE_TOKEN).run(...tokenRowValues(record), record.idHash);
        }
        for (const idHash of changes.delete) {
          stmt('DELETE FROM keyway_tokens WHERE id_hash = ?').run(idHash);
        }
        return true;
      });
    },

    async deleteTokenTree(name, now) {
      return immediate(() => {
        const live = stmt('SELECT 1 FROM keyway_tokens WHERE name = ? AND expires_at > ?').get(
          name,
          now,
        );
        if (live === undefined) return false;
        stmt(`DELETE FROM keyway_tokens WHERE ${TREE}`).run(...treeParams(name));
        return true;
      });
    },

    // ─── providers ───
    async getProvider(id) {
      const row = stmt('SELECT * FROM keyway_providers WHERE id = ?').get(id) as Row | undefined;
      return row === undefined ? null : providerFromRow(row);
    },

    async listProviders(query) {
      const { sql, params } = buildPathListSql('keyway_providers', 'id', query);
      return (stmt(sql).all(...params) as Row[]).map(providerFromRow);
    },

    async insertProvider(record, changes) {
      return writeWithVault(INSERT_PROVIDER, providerRowValues(record), changes, record.updatedAt);
    },

    async compareAndSetProvider(record, expectedVersion, changes) {
      const values = [...providerRowValues(record), record.id, expectedVersion];
      return writeWithVault(UPDATE_PROVIDER, values, changes, record.updatedAt);
    },

    async deleteProvider(id, vaultDeletes) {
      return immediate(() => {
        if (stmt('SELECT 1 FROM keyway_providers WHERE id = ?').get(id) === undefined) {
          return 'not_found' as const;
        }
        if (
          stmt('SELECT 1 FROM keyway_connections WHERE provider_id = ? LIMIT 1').get(id) !==
          undefined
        ) {
          return 'in_use' as const;
        }
        stmt('DELETE FROM keyway_providers WHERE id = ?').run(id);
        deleteVault(vaultDeletes);
        return 'deleted' as const;
      });
    },

    // ─── connections ───
    async getConnection(id) {
      const row = stmt('SELECT * FROM keyway_connections WHERE id = ?').get(id) as Row | undefined;
      return row === undefined ? null : connectionFromRow(row);
    },

    async listConnections(query) {
      const { sql, params } = listConnectionsSql(query);
      return (stmt(sql).all(...params) as Row[]).map(connectionFromRow);
    },

    async insertConnection(record, changes) {
      return writeWithVault(
        INSERT_CONNECTION,
        connectionRowValues(record),
        changes,
        record.updatedAt,
      );
    },

    async compareAndSetConnection(record, expectedVersion, changes) {
      const values = [...connectionRowValues(record), record.id, expectedVersion];
      return writeWithVault(UPDATE_CONNECTION, values, changes, record.updatedAt);
    },

    async deleteConnection(id, vaultDeletes) {
      return immediate(() => {
        deleteVault(vaultDeletes);
        return stmt('DELETE FROM keyway_connections WHERE id = ?').run(id).changes === 1;
      });
    },

    // ─── pending authorizations ───
    async insertPendingAuthorization(record) {
      stmt(INSERT_PENDING).run(...pendingAuthorizationRowValues(record));
    },

    async takePendingAuthorization(stateHash, now) {
      // One statement: the row is deleted and returned by exactly one caller.
      const row = stmt(
        'DELETE FROM keyway_pending_authorizations WHERE state_hash = ? AND expires_at > ? RETURNING *',
      ).get(stateHash, now) as Row | undefined;
      return row === undefined ? null : pendingAuthorizationFromRow(row);
    },

    // ─── vault ───
    async getVaultEntry(kind, key) {
      const row = stmt('SELECT * FROM keyway_vault_entries WHERE kind = ? AND key = ?').get(
        kind,
        key,
      ) as Row | undefined;
      return row === undefined ? null : vaultEntryFromRow(row);
    },

    async putVaultEntry(write, now) {
      return putVault(write, now);
    },

    async deleteVaultEntry(kind, key) {
      return (
        stmt('DELETE FROM keyway_vault_entries WHERE kind = ? AND key = ?').run(kind, key)
          .changes === 1
      );
    },

    async listVaultEntries({ kind, ...query }) {
      const { sql, params } = buildPathListSql('keyway_vault_entries', 'key', query, [
        { column: 'kind', value: kind },
      ]);
      return (stmt(sql).all(...params) as Row[]).map(vaultEntryFromRow);
    },

    async listVaultEntriesNotUnderKey(keyId, after, limit) {
      const rows =
        after === null
          ? stmt(
              'SELECT * FROM keyway_vault_entries WHERE key_id <> ? ORDER BY kind, key LIMIT ?',
            ).all(keyId, limit)
          : stmt(
              `SELECT * FROM keyway_vault_entries WHERE key_id <> ? AND (kind > ? OR (kind = ? AND key > ?))
               ORDER BY kind, key LIMIT ?`,
            ).all(keyId, after.kind, after.kind, after.key, limit);
      return (rows as Row[]).map(vaultEntryFromRow);
    },

    async replaceVaultCiphertext(kind, key, expected, next) {
      const result = stmt(
        `UPDATE keyway_vault_entries SET ciphertext = ?, key_id = ?
         WHERE kind = ? AND key = ? AND ciphertext = ?`,
      ).run(next.ciphertext, next.keyId, kind, key, expected);
      return result.changes === 1;
    },

    // ─── leases ───
    async acquireLease(key, owner, expiresAt, now) {
      const result = stmt(
        `INSERT INTO keyway_leases (key, owner, expires_at) VALUES (?, ?, ?)
         ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
         WHERE keyway_leases.expires_at <= ? OR keyway_leases.owner = excluded.owner`,
      ).run(key, owner, expiresAt, now);
      return result.changes === 1;
    },

    async releaseLease(key, owner) {
      stmt('DELETE FROM keyway_leases WHERE key = ? AND owner = ?').run(key, owner);
    },

    // ─── counters ───
    async incrementCounter(key, expiresAt, now) {
      const row = stmt(
        `INSERT INTO keyway_counters (key, count, expires_at) VALUES (?, 1, ?)
         ON CONFLICT (key) DO UPDATE SET
           count = CASE WHEN keyway_counters.expires_at <= ? THEN 1 ELSE keyway_counters.count + 1 END,
           expires_at = CASE WHEN keyway_counters.expires_at <= ? THEN excluded.expires_at
                             ELSE keyway_counters.expires_at END
         RETURNING count, expires_at`,
      ).get(key, expiresAt, now, now) as Row;
      return { count: Number(row.count), expiresAt: Number(row.expires_at) };
    },

    async getCounter(key, now) {
      const row = stmt(
        'SELECT count, expires_at FROM keyway_counters WHERE key = ? AND expires_at > ?',
      ).get(key, now) as Row | undefined;
      return row === undefined
        ? null
        : { count: Number(row.count), expiresAt: Number(row.expires_at) };
    },

    // ─── maintenance ───
    async purgeExpired(now, limit) {
      let removed = 0;
      for (const [table, key] of [
        ['keyway_tokens', 'id_hash'],
        ['keyway_pending_authorizations', 'state_hash'],
        ['keyway_leases', 'key'],
        ['keyway_counters', 'key'],
      ] as const) {
        // One short statement per table: a batch, never a long lock.
        removed += stmt(
          `DELETE FROM ${table} WHERE ${key} IN (SELECT ${key} FROM ${table} WHERE expires_at <= ? LIMIT ?)`,
        ).run(now, limit).changes;
      }
      return removed;
    },

    async close() {
      if (owned && db.open) db.close();
    },
  };
}
