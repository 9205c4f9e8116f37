import type { ListConnectionsQuery, Storage } from '@keyway/core/storage';
import {
  compile,
  migrate as migrateProgram,
  migrations,
  type Program,
  runSync,
  SQLITE,
  type SqlDriver,
  type Statement,
  sqlStorage,
} from '@keyway/sql';
import type BetterSqlite3 from 'better-sqlite3';
import { openSqlite, type SqliteConnection, wrapSqlite } from './driver.js';

/** The SQL of each migration of the SQLite schema, in order (written once, in the SQL layer both SQL adapters share). */
export const MIGRATIONS: readonly string[] = migrations(SQLITE);

/** Options of {@link sqliteStorage}. */
export interface SqliteStorageOptions {
  /** How long a write waits for another connection's lock, in ms. Default 5000. */
  busyTimeoutMs?: number;
  /**
   * The driver that opens a file path, for a package that depends on one itself where this
   * one cannot load it (a global npm install leaves the optional peer out of its reach):
   * better-sqlite3's `Database`, `bun:sqlite`'s or `node:sqlite`'s `DatabaseSync`. The
   * storage still owns the database and closes it. Default: the runtime's, loaded here.
   */
  driver?: new (
    file: string,
  ) => object;
}

/** SQLite storage, plus what its own tests and tools need. */
export interface SqliteStorage<D extends object = BetterSqlite3.Database> extends Storage {
  /**
   * The database object, as given or as opened (for inspection and tests; do not write
   * through it): better-sqlite3's `Database` on Node, `bun:sqlite`'s on Bun, `node:sqlite`'s
   * `DatabaseSync` on Deno.
   */
  readonly database: D;
  /** The same database behind the interface the adapter uses, whatever the driver. */
  readonly connection: SqliteConnection;
  /** The SQL and parameters the adapter runs for a connection listing (for EXPLAIN). */
  listConnectionsSql(query: ListConnectionsQuery): { sql: string; params: unknown[] };
}

/** Statements prepared once per text, each compiled to SQLite's notation on first use. */
function statementCache<S>(prepare: (sql: string) => S): (text: string) => S {
  const cache = new Map<string, S>();
  return (text) => {
    let statement = cache.get(text);
    if (statement === undefined) {
      statement = prepare(compile(SQLITE, text));
      cache.set(text, statement);
    }
    return statement;
  };
}

/** Runs programs on one SQLite connection, synchronously, statements cached. */
function sqliteDriver(db: SqliteConnection) {
  const prepared = statementCache((sql) => db.prepare(sql));
  // The point reads: rows answered as arrays of values (`values: true`).
  const preparedValues = statementCache((sql) => db.prepareValues(sql));
  const execute = (statement: Statement): unknown => {
    switch (statement.kind) {
      case 'run':
        return Number(prepared(statement.sql).run(...statement.params).changes);
      case 'get':
        return statement.values === true
          ? preparedValues(statement.sql).get(...statement.params)
          : prepared(statement.sql).get(...statement.params);
      case 'all':
        return prepared(statement.sql).all(...statement.params);
      case 'script':
        db.exec(compile(SQLITE, statement.sql));
        return undefined;
    }
  };
  /** Runs a program now; as one `BEGIN IMMEDIATE` transaction when asked. */
  const executeSync = <T>(program: Program<T>, transaction: boolean): T =>
    transaction ? db.immediate(() => runSync(program, execute)) : runSync(program, execute);
  const driver: SqlDriver = {
    // Each program runs to completion without yielding the event loop: no other request's
    // statement can interleave with it on this connection.
    execute: async (program, transaction) => executeSync(program, transaction),
    query: execute,
    synchronous: true,
  };
  return { driver, executeSync };
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
export function migrate(db: SqliteConnection): void {
  sqliteDriver(db).executeSync(migrateProgram(SQLITE, Date.now()), true);
}

/**
 * Keyway storage on SQLite through better-sqlite3: one file, WAL journal, a busy timeout so
 * several processes can share it, versioned migrations applied on open, and prepared
 * statements for every query. Every promise that spans statements runs in a
 * `BEGIN IMMEDIATE` transaction, which SQLite serializes across connections and processes.
 *
 * Pass a file path (the storage opens it with this runtime's driver and closes it on
 * `close()`: better-sqlite3 on Node, `bun:sqlite` on Bun, `node:sqlite` on Deno) or an open
 * database of any of the three (which you keep and close yourself).
 *
 * @example
 * import { createBroker } from '@keyway/core';
 * import { sqliteStorage } from '@keyway/store-sqlite';
 * const broker = createBroker({ rootKey, storage: sqliteStorage('keyway.sqlite') });
 */
export function sqliteStorage(
  file: string,
  options?: SqliteStorageOptions,
): SqliteStorage<BetterSqlite3.Database>;
export function sqliteStorage<D extends object>(
  database: D,
  options?: SqliteStorageOptions,
): SqliteStorage<D>;
export function sqliteStorage<D extends object>(
  database: string | D,
  options: SqliteStorageOptions = {},
): SqliteStorage<D> {
  const owned = typeof database === 'string';
  const db =
    typeof database === 'string' ? openSqlite(database, options.driver) : wrapSqlite(database);
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

  return {
    ...sqlStorage(SQLITE, sqliteDriver(db).driver),
    database: (typeof database === 'string' ? db.raw : database) as D,
    connection: db,
    async close() {
      if (owned && db.open) db.close();
    },
  };
}
