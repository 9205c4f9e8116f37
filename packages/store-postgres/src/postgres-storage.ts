import type { ListConnectionsQuery, Storage } from '@keyway/core/storage';
import {
  compile,
  type Dialect,
  migrate as migrateProgram,
  migrations,
  type Program,
  postgresDialect,
  runAsync,
  type SqlDriver,
  type Statement,
  sqlStorage,
} from '@keyway/sql';
import pg from 'pg';

/**
 * The SQL of each migration of the PostgreSQL schema, in order, with `{s}` for the quoted
 * schema name (written once, in the SQL layer both SQL adapters share).
 */
export const MIGRATIONS: readonly string[] = migrations(postgresDialect('s')).map((sql) =>
  sql.replaceAll('"s".', '{s}.'),
);

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
  /**
   * Called when the server ends a connection the pool holds idle (a restart, a failover, an
   * administrator's `pg_terminate_backend`), with the server's error (`code` `57P01` for
   * those). The pool drops that connection and opens another at the next query; a query
   * under way fails as usual. Without this option the storage's own pool ignores such an
   * error, since node-postgres otherwise throws it in the process; a pool you pass is yours
   * to listen on, unless you give this option.
   */
  onIdleError?: (error: Error) => void;
};

/** PostgreSQL storage, plus what its own tests and tools need. */
export interface PostgresStorage extends Storage {
  readonly pool: pg.Pool;
  readonly schema: string;
  /** The SQL and parameters the adapter runs for a connection listing (for EXPLAIN). */
  listConnectionsSql(query: ListConnectionsQuery): { sql: string; params: unknown[] };
}

/**
 * Runs programs on a pool: a transaction on one pooled connection between `BEGIN` and
 * `COMMIT` (`ROLLBACK` on any error), or each statement on whichever connection is free.
 * Every parameterized statement is a named prepared statement, parsed and planned once per
 * pooled connection.
 */
/**
 * Statement names by text, for the whole process: pools may be shared between storages,
 * and a name must always stand for the same text on a connection.
 */
const names = new Map<string, string>();

function postgresDriver(pool: pg.Pool, dialect: Dialect): SqlDriver {
  const execute = async (db: Queryable, statement: Statement): Promise<unknown> => {
    const text = compile(dialect, statement.sql);
    if (statement.kind === 'script') {
      await db.query(text);
      return undefined;
    }
    let name = names.get(text);
    if (name === undefined) {
      name = `keyway_${names.size + 1}`;
      names.set(text, name);
    }
    const values = [...statement.params];
    const result =
      statement.kind === 'get' && statement.values === true
        ? await db.query({ name, text, values, rowMode: 'array' })
        : await db.query({ name, text, values });
    if (statement.kind === 'run') return result.rowCount ?? 0;
    return statement.kind === 'get' ? result.rows[0] : result.rows;
  };
  return {
    query: (statement) => execute(pool, statement),
    async execute<T>(program: Program<T>, transaction: boolean): Promise<T> {
      if (!transaction) return runAsync(program, (statement) => execute(pool, statement));
      const client = await pool.connect();
      // A connection the server ends while the transaction holds it: node-postgres fails the
      // statement under way and then emits `error` on the client, which the pool no longer
      // listens on while it is lent out (unheard, it would end the process). The client is
      // then given back broken, so the pool drops it.
      let broken: Error | undefined;
      const onError = (error: Error) => {
        broken = error;
      };
      client.on('error', onError);
      try {
        await client.query('BEGIN');
        const result = await runAsync(program, (statement) => execute(client, statement));
        await client.query('COMMIT');
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch(() => {});
        throw error;
      } finally {
        client.off('error', onError);
        client.release(broken);
      }
    },
  };
}

/** Applies the migrations the schema lacks, under a transaction-scoped advisory lock. */
export async function migrate(pool: pg.Pool, schema: string): Promise<void> {
  const dialect = postgresDialect(schema);
  await postgresDriver(pool, dialect).execute(migrateProgram(dialect, Date.now()), true);
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
  const dialect = postgresDialect(schema);
  const owned = options.pool === undefined;
  const pool =
    options.pool ??
    new pg.Pool({
      connectionString: options.connectionString,
      max: 'maxConnections' in options && options.maxConnections ? options.maxConnections : 10,
    });
  const onIdleError =
    owned || options.onIdleError !== undefined ? (options.onIdleError ?? (() => {})) : null;
  if (onIdleError !== null) pool.on('error', onIdleError);
  const driver = postgresDriver(pool, dialect);
  try {
    await driver.execute(migrateProgram(dialect, Date.now()), true);
  } catch (error) {
    if (owned) await pool.end().catch(() => {});
    throw error;
  }
  return {
    ...sqlStorage(dialect, driver),
    pool,
    schema,
    async close() {
      if (owned) await pool.end();
      // A pool you passed is left as it came.
      else if (onIdleError !== null) pool.off('error', onIdleError);
    },
  };
}
