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
import pg from 'pg';
import { MIGRATIONS } from './schema.js';

type Row = Record<string, unknown>;

/** `$1, $2, …` for a column list. */
const marks = (columns: string) =>
  columns
    .split(',')
    .map((_, i) => `$${i + 1}`)
    .join(', ');
type Queryable = pg.Pool | pg.PoolClient;

/** Options of {@link postgresStorage}: a pool you own, or a connection string. */
export type PostgresStorageOptions = (
  | {
      /** A pg pool; you end it yourself after `close()`. */
      pool: pg.Pool;
      connectionString?: never;
    }
  | {
      /** `postgres://…`; the storage creates a pool and ends it on `close()`. */
      connectionString: string;
      pool?: never;
      /** Size of that pool. Default 10. */
      maxConnections?: number;
    }
) & {
  /** The schema that holds Keyway's tables; created when missing. Default `public`. */
  schema?: string;
};

/** PostgreSQL storage, plus what its own tests and tools need. */
export interface PostgresStorage extends Storage {
  readonly pool: pg.Pool;
  readonly schema: string;
  /** The SQL and parameters the adapter runs for a connection listing (for EXPLAIN). */
  listConnectionsSql(query: ListConnectionsQuery): { sql: string; params: unknown[] };
}

/** Key of the advisory lock that serializes migrations across every process. */
const MIGRATION_LOCK = 7_301_999_001;

/**
 * The subtree-ranged list query of a path-keyed table: for each root `p`, `p` itself or
 * the keys in [`p/`, `p0`) (`'0'` follows `'/'`), two index range scans per root.
 */
export function buildPathListSql(
  table: string,
  keyColumn: string,
  query: ListPathsQuery,
  extra: { column: string; value: unknown }[] = [],
): { sql: string; params: unknown[] } {
  const where: string[] = [];
  const params: unknown[] = [];
  const p = (value: unknown) => {
    params.push(value);
    return `$${params.length}`;
  };
  if (query.within !== undefined) {
    if (query.within.length === 0) where.push('false');
    else {
      where.push(
        `(${query.within
          .map(
            (root) =>
              `${keyColumn} = ${p(root)} OR (${keyColumn} >= ${p(`${root}/`)} AND ${keyColumn} < ${p(`${root}0`)})`,
          )
          .join(' OR ')})`,
      );
    }
  }
  if (query.after !== undefined) where.push(`${keyColumn} > ${p(query.after)}`);
  for (const { column, value } of extra) where.push(`${column} = ${p(value)}`);
  const filter = where.length ? ` WHERE ${where.join(' AND ')}` : '';
  return {
    sql: `SELECT * FROM ${table}${filter} ORDER BY ${keyColumn} LIMIT ${p(query.limit)}`,
    params,
  };
}

/** Applies the migrations the schema lacks, under a transaction-scoped advisory lock. */
export async function migrate(pool: pg.Pool, schema: string): Promise<void> {
  const s = `"${schema}"`;
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${s}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${s}.keyway_migrations (version integer PRIMARY KEY, applied_at bigint NOT NULL)`,
    );
    const { rows } = await client.query(
      `SELECT MAX(version) AS version FROM ${s}.keyway_migrations`,
    );
    const current = rows[0]?.version === null ? 0 : Number(rows[0]?.version);
    for (let version = current + 1; version <= MIGRATIONS.length; version++) {
      await client.query((MIGRATIONS[version - 1] as string).replaceAll('{s}', s));
      await client.query(
        `INSERT INTO ${s}.keyway_migrations (version, applied_at) VALUES ($1, $2)`,
        [version, Date.now()],
      );
    }
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}

/**
 * Keyway storage on PostgreSQL 15+ through node-postgres. Many broker instances can share
 * one database: every promise holds across processes, through single-statement atomic
 * writes (`DELETE … RETURNING`, `INSERT … ON CONFLICT`), row locks (`FOR UPDATE`) where a
 * promise spans statements, and `SKIP LOCKED` for housekeeping so it never waits on a
 * request. Every query is a named prepared statement. Migrations are versioned and
 * serialized with an advisory lock, so instances starting together apply each one once.
 *
 * @example
 * import { createBroker } from '@keyway/core';
 * import { postgresStorage } from '@keyway/store-postgres';
 * const storage = await postgresStorage({ connectionString: process.env.DATABASE_URL });
 * const broker = createBroker({ rootKey, storage });
 */
export async function postgresStorage(options: PostgresStorageOptions): Promise<PostgresStorage> {
  const schema = options.schema ?? 'public';
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(schema)) {
    throw new TypeError('"schema" must be a plain SQL identifier (letters, digits, _)');
  }
  const owned = options.pool === undefined;
  const pool =
    options.pool ??
    new pg.Pool({
      connectionString: options.connectionString,
      max: 'maxConnections' in options && options.maxConnections ? options.maxConnections : 10,
    });
  try {
    await migrate(pool, schema);
  } catch (error) {
    if (owned) await pool.end().catch(() => {});
    throw error;
  }

  const t = (name: string) => `"${schema}".keyway_${name}`;
  const TOKENS = t('tokens');
  const PROVIDERS = t('providers');
  const CONNECTIONS = t('connections');
  const PENDING = t('pending_authorizations');
  const VAULT = t('vault_entries');
  const LEASES = t('leases');
  const COUNTERS = t('counters');

  // Named statements: each text is parsed and planned once per pooled connection.
  const names = new Map<string, string>();
  const query = async (db: Queryable, text: string, values: unknown[] = []) => {
    let name = names.get(text);
    if (name === undefined) {
      name = `keyway_${names.size + 1}`;
      names.set(text, name);
    }
    return db.query({ name, text, values });
  };
  const one = async (db: Queryable, text: string, values: unknown[] = []) =>
    ((await query(db, text, values)).rows[0] as Row | undefined) ?? null;

  const transaction = async <T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const result = await fn(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      throw error;
    } finally {
      client.release();
    }
  };

  const putVault = async (db: Queryable, write: VaultWrite, now: number) => {
    const row = (await one(
      db,
      `INSERT INTO ${VAULT} (kind, key, ciphertext, key_id, version, created_at, updated_at)
       VALUES ($1, $2, $3, $4, 1, $5, $5)
       ON CONFLICT (kind, key) DO UPDATE SET
         ciphertext = excluded.ciphertext, key_id = excluded.key_id,
         version = ${VAULT}.version + 1, updated_at = excluded.updated_at
       RETURNING *`,
      [write.kind, write.key, write.ciphertext, write.keyId, now],
    )) as Row;
    const entry = vaultEntryFromRow(row);
    return { entry, created: entry.version === 1 };
  };
  const deleteVault = async (db: Queryable, keys: VaultKey[] | undefined) => {
    for (const { kind, key } of keys ?? []) {
      await query(db, `DELETE FROM ${VAULT} WHERE kind = $1 AND key = $2`, [kind, key]);
    }
  };
  const applyVault = async (db: Queryable, changes: VaultChanges | undefined, now: number) => {
    for (const write of changes?.put ?? []) await putVault(db, write, now);
    await deleteVault(db, changes?.delete);
  };

  /**
   * Writes one row (insert or compare-and-set) and its vault changes in a transaction, or
   * nothing; `before` runs first in the same transaction (a lock).
   */
  const writeWithVault = (
    sql: string,
    values: unknown[],
    changes: VaultChanges | undefined,
    now: number,
    before?: [string, unknown[]],
  ) =>
    transaction(async (client) => {
      if (before !== undefined) await query(client, before[0], before[1]);
      if ((await query(client, sql, values)).rowCount !== 1) return false;
      await applyVault(client, changes, now);
      return true;
    });

  const TREE = '(name = $1 OR (name >= $2 AND name < $3))';
  const treeParams = (name: string) => [name, `${name}.`, `${name}/`];

  const listConnectionsSql = (q: ListConnectionsQuery) =>
    buildPathListSql(CONNECTIONS, 'id', q, [
      ...(q.providerId === undefined ? [] : [{ column: 'provider_id', value: q.providerId }]),
      ...(q.status === undefined ? [] : [{ column: 'status', value: q.status }]),
    ]);

  return {
    pool,
    schema,
    listConnectionsSql,

    // ─── tokens ───
    async insertToken(record, now) {
      return transaction(async (client) => {
        await query(client, `DELETE FROM ${TOKENS} WHERE name = $1 AND expires_at <= $2`, [
          record.name,
          now,
        ]);
        // A concurrent insert of the name waits on the unique index, then does nothing.
        const sql = `INSERT INTO ${TOKENS} (${TOKEN_COLUMNS}) VALUES (${marks(TOKEN_COLUMNS)}) ON CONFLICT (name) DO NOTHING`;
        return (await query(client, sql, tokenRowValues(record))).rowCount === 1;
      });
    },

    async findTokenByIdHash(idHash) {
      const row = await one(pool, `SELECT * FROM ${TOKENS} WHERE id_hash = $1`, [idHash]);
      return row === null ? null : tokenFromRow(row);
    },

    async findLiveTokenByName(name, now) {
      const row = await one(pool, `SELECT * FROM ${TOKENS} WHERE name = $1 AND expires_at > $2`, [
        name,
        now,
      ]);
      return row === null ? null : tokenFromRow(row);
    },

    async listLiveTokens({ treeOf, after, limit, now }) {
      const params: unknown[] = [];
      const where: string[] = [];
      if (treeOf !== undefined) {
        params.push(...treeParams(treeOf));
        where.push(TREE);
      }
      params.push(now);
      where.push(`expires_at > $${params.length}`);
      if (after !== undefined) {
        params.push(after);
        where.push(`name > $${params.length}`);
      }
      params.push(limit);
      const text = `SELECT * FROM ${TOKENS} WHERE ${where.join(' AND ')} ORDER BY name LIMIT $${params.length}`;
      return (await query(pool, text, params)).rows.map(tokenFromRow);
    },

    async updateTokenTree(name, now, plan) {
      return transaction(async (client) => {
        // Row locks: a concurrent narrowing of the same tree waits, then reads our result.
        const { rows } = await query(
          client,
          `SELECT * FROM ${TOKENS} WHERE ${TREE} AND expires_at > $4 ORDER BY name FOR UPDATE`,
          [...treeParams(name), now],
        );
        const tree = rows.map(tokenFromRow);
        if (tree[0]?.name !== name) return false;
        const changes = plan(tree);
        for (const record of changes.update) {
          await query(
            client,
            `UPDATE ${TOKENS} SET (${TOKEN_COLUMNS}) = (${marks(TOKEN_COLUMNS)}) WHERE id_hash = $7`,
            [...tokenRowValues(record), record.idHash],
          );
        }
        for (const idHash of changes.delete) {
          await query(client, `DELETE FROM ${TOKENS} WHERE id_hash = $1`, [idHash]);
        }
        return true;
      });
    },

    async deleteTokenTree(name, now) {
      return transaction(async (client) => {
        const live = await one(
          client,
          `SELECT 1 FROM ${TOKENS} WHERE name = $1 AND expires_at > $2 FOR UPDATE`,
          [name, now],
        );
        if (live === null) return false;
        await query(client, `DELETE FROM ${TOKENS} WHERE ${TREE}`, treeParams(name));
        return true;
      });
    },

    // ─── providers ───
    async getProvider(id) {
      const row = await one(pool, `SELECT * FROM ${PROVIDERS} WHERE id = $1`, [id]);
      return row === null ? null : providerFromRow(row);
    },

    async listProviders(q) {
      const { sql, params } = buildPathListSql(PROVIDERS, 'id', q);
      return (await query(pool, sql, params)).rows.map(providerFromRow);
    },

    async insertProvider(record, changes) {
      const sql = `INSERT INTO ${PROVIDERS} (${PROVIDER_COLUMNS}) VALUES (${marks(PROVIDER_COLUMNS)}) ON CONFLICT (id) DO NOTHING`;
      return writeWithVault(sql, providerRowValues(record), changes, record.updatedAt);
    },

    async compareAndSetProvider(record, expectedVersion, changes) {
      const sql = `UPDATE ${PROVIDERS} SET (${PROVIDER_COLUMNS}) = (${marks(PROVIDER_COLUMNS)}) WHERE id = $7 AND version = $8`;
      const values = [...providerRowValues(record), record.id, expectedVersion];
      return writeWithVault(sql, values, changes, record.updatedAt);
    },

    async deleteProvider(id, vaultDeletes) {
      return transaction(async (client) => {
        // The row lock makes a concurrent insertConnection (which key-share locks the
        // provider) either finish first, and be seen below, or wait and find it gone.
        const found = await one(client, `SELECT 1 FROM ${PROVIDERS} WHERE id = $1 FOR UPDATE`, [
          id,
        ]);
        if (found === null) return 'not_found' as const;
        const used = await one(
          client,
          `SELECT 1 FROM ${CONNECTIONS} WHERE provider_id = $1 LIMIT 1`,
          [id],
        );
        if (used !== null) return 'in_use' as const;
        await query(client, `DELETE FROM ${PROVIDERS} WHERE id = $1`, [id]);
        await deleteVault(client, vaultDeletes);
        return 'deleted' as const;
      });
    },

    // ─── connections ───
    async getConnection(id) {
      const row = await one(pool, `SELECT * FROM ${CONNECTIONS} WHERE id = $1`, [id]);
      return row === null ? null : connectionFromRow(row);
    },

    async listConnections(q) {
      const { sql, params } = listConnectionsSql(q);
      return (await query(pool, sql, params)).rows.map(connectionFromRow);
    },

    async insertConnection(record, changes) {
      const sql = `INSERT INTO ${CONNECTIONS} (${CONNECTION_COLUMNS}) VALUES (${marks(CONNECTION_COLUMNS)}) ON CONFLICT (id) DO NOTHING`;
      // Key-share lock on the provider: a concurrent deleteProvider either sees this
      // connection or waits for it.
      return writeWithVault(sql, connectionRowValues(record), changes, record.updatedAt, [
        `SELECT 1 FROM ${PROVIDERS} WHERE id = $1 FOR KEY SHARE`,
        [record.providerId],
      ]);
    },

    async compareAndSetConnection(record, expectedVersion, changes) {
      // Concurrent writers from one version queue on the row lock; when the first commits,
      // the others re-check the version and update nothing.
      const sql = `UPDATE ${CONNECTIONS} SET (${CONNECTION_COLUMNS}) = (${marks(CONNECTION_COLUMNS)}) WHERE id = $8 AND version = $9`;
      const values = [...connectionRowValues(record), record.id, expectedVersion];
      return writeWithVault(sql, values, changes, record.updatedAt);
    },

    async deleteConnection(id, vaultDeletes) {
      return transaction(async (client) => {
        await deleteVault(client, vaultDeletes);
        return (
          (await query(client, `DELETE FROM ${CONNECTIONS} WHERE id = $1`, [id])).rowCount === 1
        );
      });
    },

    // ─── pending authorizations ───
    async insertPendingAuthorization(record) {
      const sql = `INSERT INTO ${PENDING} (${PENDING_AUTHORIZATION_COLUMNS}) VALUES (${marks(PENDING_AUTHORIZATION_COLUMNS)})`;
      await query(pool, sql, pendingAuthorizationRowValues(record));
    },

    async takePendingAuthorization(stateHash, now) {
      // One statement: exactly one concurrent caller deletes the row and gets it back.
      const row = await one(
        pool,
        `DELETE FROM ${PENDING} WHERE state_hash = $1 AND expires_at > $2 RETURNING *`,
        [stateHash, now],
      );
      return row === null ? null : pendingAuthorizationFromRow(row);
    },

    // ─── vault ───
    async getVaultEntry(kind, key) {
      const row = await one(pool, `SELECT * FROM ${VAULT} WHERE kind = $1 AND key = $2`, [
        kind,
        key,
      ]);
      return row === null ? null : vaultEntryFromRow(row);
    },

    async putVaultEntry(write, now) {
      return putVault(pool, write, now);
    },

    async deleteVaultEntry(kind, key) {
      const result = await query(pool, `DELETE FROM ${VAULT} WHERE kind = $1 AND key = $2`, [
        kind,
        key,
      ]);
      return result.rowCount === 1;
    },

    async listVaultEntries({ kind, ...q }) {
      const { sql, params } = buildPathListSql(VAULT, 'key', q, [{ column: 'kind', value: kind }]);
      return (await query(pool, sql, params)).rows.map(vaultEntryFromRow);
    },

    async listVaultEntriesNotUnderKey(keyId, after, limit) {
      const result =
        after === null
          ? await query(
              pool,
              `SELECT * FROM ${VAULT} WHERE key_id <> $1 ORDER BY kind, key LIMIT $2`,
              [keyId, limit],
            )
          : await query(
              pool,
              `SELECT * FROM ${VAULT} WHERE key_id <> $1 AND (kind, key) > ($2, $3)
               ORDER BY kind, key LIMIT $4`,
              [keyId, after.kind, after.key, limit],
            );
      return result.rows.map(vaultEntryFromRow);
    },

    async replaceVaultCiphertext(kind, key, expected, next) {
      const result = await query(
        pool,
        `UPDATE ${VAULT} SET ciphertext = $1, key_id = $2 WHERE kind = $3 AND key = $4 AND ciphertext = $5`,
        [next.ciphertext, next.keyId, kind, key, expected],
      );
      return result.rowCount === 1;
    },

    // ─── leases ───
    async acquireLease(key, owner, expiresAt, now) {
      const result = await query(
        pool,
        `INSERT INTO ${LEASES} (key, owner, expires_at) VALUES ($1, $2, $3)
         ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
         WHERE ${LEASES}.expires_at <= $4 OR ${LEASES}.owner = excluded.owner`,
        [key, owner, expiresAt, now],
      );
      return result.rowCount === 1;
    },

    async releaseLease(key, owner) {
      await query(pool, `DELETE FROM ${LEASES} WHERE key = $1 AND owner = $2`, [key, owner]);
    },

    // ─── counters ───
    async incrementCounter(key, expiresAt, now) {
      const result = await query(
        pool,
        `INSERT INTO ${COUNTERS} (key, count, expires_at) VALUES ($1, 1, $2)
         ON CONFLICT (key) DO UPDATE SET
           count = CASE WHEN ${COUNTERS}.expires_at <= $3 THEN 1 ELSE ${COUNTERS}.count + 1 END,
           expires_at = CASE WHEN ${COUNTERS}.expires_at <= $3 THEN excluded.expires_at
                             ELSE ${COUNTERS}.expires_at END
         RETURNING count, expires_at`,
        [key, expiresAt, now],
      );
      const row = result.rows[0] as Row;
      return { count: Number(row.count), expiresAt: Number(row.expires_at) };
    },

    async getCounter(key, now) {
      const result = await query(
        pool,
        `SELECT count, expires_at FROM ${COUNTERS} WHERE key = $1 AND expires_at > $2`,
        [key, now],
      );
      const row = result.rows[0] as Row | undefined;
      return row === undefined
        ? null
        : { count: Number(row.count), expiresAt: Number(row.expires_at) };
    },

    // ─── maintenance ───
    async purgeExpired(now, limit) {
      let removed = 0;
      for (const [table, key] of [
        [TOKENS, 'id_hash'],
        [PENDING, 'state_hash'],
        [LEASES, 'key'],
        [COUNTERS, 'key'],
      ] as const) {
        // SKIP LOCKED: rows a request is working on are left for the next round.
        const result = await query(
          pool,
          `DELETE FROM ${table} WHERE ${key} IN (
             SELECT ${key} FROM ${table} WHERE expires_at <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`,
          [now, limit],
        );
        removed += result.rowCount ?? 0;
      }
      return removed;
    },

    async close() {
      if (owned) await pool.end();
    },
  };
}
