import { createRequire } from 'node:module';

/**
 * The SQLite engines the adapter runs on, behind one small interface: better-sqlite3
 * (Node), `bun:sqlite` (Bun) and `node:sqlite` (`DatabaseSync`, where the runtime has it:
 * Node 22.5+, Deno). All three are synchronous, so every program still runs to completion
 * without yielding the event loop.
 */
export interface SqliteConnection {
  /** Which library this is. */
  readonly driver: 'better-sqlite3' | 'bun:sqlite' | 'node:sqlite';
  /** The file, or `:memory:`. */
  readonly name: string;
  /** The driver's own database object. */
  readonly raw: object;
  readonly open: boolean;
  prepare(sql: string): SqliteStatement;
  /**
   * A statement whose `get` answers the row's values in the order it selects them (an
   * array), or `undefined`: no object with a property per column is built.
   */
  prepareValues(sql: string): SqliteValuesStatement;
  exec(sql: string): void;
  /** Runs `fn` in a `BEGIN IMMEDIATE` transaction: all of it, or nothing on a throw. */
  immediate<T>(fn: () => T): T;
  /** The value of a pragma (`PRAGMA name`), or sets one (`PRAGMA name = value`). */
  pragma(text: string): unknown;
  close(): void;
}

/** A prepared statement of any of the drivers. */
export interface SqliteStatement {
  run(...params: unknown[]): { changes: number | bigint };
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
}

/** A prepared statement that answers a row as an array of its values. */
export interface SqliteValuesStatement {
  get(...params: unknown[]): unknown;
}

/** An open better-sqlite3 `Database`, as far as the adapter uses it. */
interface BetterSqlite3Like {
  name: string;
  open: boolean;
  prepare(sql: string): SqliteStatement & { raw(on: boolean): SqliteValuesStatement };
  exec(sql: string): unknown;
  pragma(text: string, options?: { simple: boolean }): unknown;
  transaction<T>(fn: () => T): { immediate(): T };
  close(): unknown;
}

/** An open `bun:sqlite` `Database`. */
interface BunSqliteLike {
  filename: string;
  prepare(sql: string): SqliteStatement & { values(...params: unknown[]): unknown[][] };
  exec(sql: string): unknown;
  query(sql: string): { get(): unknown };
  transaction<T>(fn: () => T): { immediate(): T };
  close(): unknown;
}

/** An open `node:sqlite` `DatabaseSync`. */
interface NodeSqliteLike {
  isOpen?: boolean;
  prepare(sql: string): SqliteStatement & { setReturnArrays?(on: boolean): void };
  exec(sql: string): unknown;
  close(): unknown;
  location?(): string | null;
}

const isFunction = (value: unknown): value is (...args: never[]) => unknown =>
  typeof value === 'function';

/** Which driver an open database object belongs to, by what it offers. */
export function driverOf(database: object): SqliteConnection['driver'] | null {
  const d = database as Record<string, unknown>;
  if (!isFunction(d.prepare) || !isFunction(d.exec)) return null;
  if (isFunction(d.pragma) && isFunction(d.transaction)) return 'better-sqlite3';
  if (isFunction(d.query) && isFunction(d.transaction)) return 'bun:sqlite';
  return 'node:sqlite';
}

/** A pragma's value from the row SQLite answers (`{ journal_mode: 'wal' }`). */
function firstValue(row: unknown): unknown {
  return typeof row === 'object' && row !== null ? Object.values(row)[0] : undefined;
}

/** Wraps an open database of any of the drivers. */
export function wrapSqlite(database: object): SqliteConnection {
  const driver = driverOf(database);
  if (driver === 'better-sqlite3') {
    const db = database as BetterSqlite3Like;
    return {
      driver,
      raw: db,
      get name() {
        return db.name;
      },
      get open() {
        return db.open;
      },
      prepare: (sql) => db.prepare(sql),
      prepareValues: (sql) => db.prepare(sql).raw(true),
      exec: (sql) => {
        db.exec(sql);
      },
      immediate: (fn) => db.transaction(fn).immediate(),
      pragma: (text) => db.pragma(text, { simple: true }),
      close: () => {
        db.close();
      },
    };
  }
  if (driver === 'bun:sqlite') {
    const db = database as BunSqliteLike;
    let open = true;
    return {
      driver,
      raw: db,
      name: db.filename,
      get open() {
        return open;
      },
      prepare: (sql) => db.prepare(sql),
      prepareValues: (sql) => {
        const statement = db.prepare(sql);
        return { get: (...params) => statement.values(...params)[0] };
      },
      exec: (sql) => {
        db.exec(sql);
      },
      immediate: (fn) => db.transaction(fn).immediate(),
      pragma: (text) => firstValue(db.query(`PRAGMA ${text}`).get()),
      close: () => {
        db.close();
        open = false;
      },
    };
  }
  if (driver === 'node:sqlite') {
    const db = database as NodeSqliteLike;
    let open = true;
    return {
      driver,
      raw: db,
      name: db.location?.() ?? ':memory:',
      get open() {
        return db.isOpen ?? open;
      },
      prepare: (sql) => db.prepare(sql),
      prepareValues: (sql) => {
        const statement = db.prepare(sql);
        // Arrays from the engine where it offers them (Node 22.16+); otherwise the row's
        // values, which an object keeps in the order of its columns.
        if (typeof statement.setReturnArrays === 'function') {
          statement.setReturnArrays(true);
          return statement;
        }
        return {
          get: (...params) => {
            const row = statement.get(...params);
            return typeof row === 'object' && row !== null ? Object.values(row) : undefined;
          },
        };
      },
      exec: (sql) => {
        db.exec(sql);
      },
      // DatabaseSync has no transaction helper: the same BEGIN IMMEDIATE by hand.
      immediate: (fn) => {
        db.exec('BEGIN IMMEDIATE');
        try {
          const result = fn();
          db.exec('COMMIT');
          return result;
        } catch (error) {
          db.exec('ROLLBACK');
          throw error;
        }
      },
      pragma: (text) => firstValue(db.prepare(`PRAGMA ${text}`).get()),
      close: () => {
        db.close();
        open = false;
      },
    };
  }
  throw new TypeError(
    'sqliteStorage() takes a file path or an open better-sqlite3, bun:sqlite or node:sqlite database',
  );
}

/** What {@link createPrivately} needs of `node:fs` (Node, Bun and Deno all have it). */
interface PrivateFs {
  openSync(path: string, flags: number, mode: number): number;
  closeSync(fd: number): void;
  constants: { O_CREAT: number; O_EXCL: number; O_WRONLY: number; O_NOFOLLOW?: number };
}

/**
 * Creates a database file that does not exist yet readable by its owner only, before SQLite
 * opens it: SQLite would create it (and its `-wal` and `-shm`, which take the database's
 * permissions) readable by everyone the umask lets, and it holds encrypted tokens and the
 * hashes of broker tokens. A file that exists is left as it is; `:memory:` and URIs too.
 */
function createPrivately(file: string): void {
  if (file === '' || file === ':memory:' || file.startsWith('file:')) return;
  const fs = createRequire(import.meta.url)('node:fs') as PrivateFs;
  const { O_CREAT, O_EXCL, O_WRONLY, O_NOFOLLOW = 0 } = fs.constants;
  let fd: number;
  try {
    fd = fs.openSync(file, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW, 0o600);
  } catch {
    // It exists (or cannot be made here): SQLite opens it, or says why it cannot.
    return;
  }
  fs.closeSync(fd);
}

/** The runtime's global, where it says which runtime this is. */
const runtime = globalThis as { Bun?: unknown; Deno?: unknown };

/**
 * Opens a file with the driver of this runtime: `bun:sqlite` on Bun, `node:sqlite` on Deno,
 * better-sqlite3 on Node (install it beside the adapter).
 *
 * @throws {Error} naming the storages that work here when no driver loads.
 */
export function openSqlite(file: string, driver?: new (file: string) => object): SqliteConnection {
  createPrivately(file);
  if (driver !== undefined) return wrapSqlite(new driver(file));
  const require = createRequire(import.meta.url);
  let open: (file: string) => object;
  try {
    if (runtime.Bun !== undefined) {
      const { Database } = require('bun:sqlite') as { Database: new (file: string) => object };
      open = (path) => new Database(path);
    } else if (runtime.Deno !== undefined) {
      const { DatabaseSync } = require('node:sqlite') as {
        DatabaseSync: new (file: string) => object;
      };
      open = (path) => new DatabaseSync(path);
    } else {
      const Database = require('better-sqlite3') as new (file: string) => object;
      open = (path) => new Database(path);
    }
  } catch (cause) {
    throw new Error(
      'no SQLite driver loads in this runtime (better-sqlite3 on Node, bun:sqlite on Bun, node:sqlite on Deno); ' +
        'pass an open database, or use memoryStorage() or postgresStorage() from @keyway/store-memory and ' +
        '@keyway/store-postgres',
      { cause },
    );
  }
  // A file that cannot be opened is the file's problem, reported as the driver says it.
  return wrapSqlite(open(file));
}
