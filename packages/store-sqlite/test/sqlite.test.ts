import { chmodSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CONNECTION_BY_ID,
  compile,
  handOutStatement,
  SQLITE,
  TOKEN_BY_ID_HASH,
  TOKEN_CHECK_BY_ID_HASH,
} from '@keyway/sql';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import {
  driverOf,
  MIGRATIONS,
  type SqliteStorage,
  sqliteStorage,
  wrapSqlite,
} from '../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'keyway-sqlite-plan-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('sqliteStorage()', () => {
  it('offers the synchronous token lookup of the token check', async () => {
    const storage = sqliteStorage(':memory:');
    expect(typeof storage.fastPaths?.findTokenByIdHashSync).toBe('function');
    expect(storage.fastPaths?.findTokenByIdHashSync?.('a'.repeat(64))).toBeNull();
    await storage.close();
  });

  it("offers a hand-out's joined read synchronously too", async () => {
    const storage = sqliteStorage(':memory:');
    expect(typeof storage.fastPaths?.readForHandOutSync).toBe('function');
    expect(storage.fastPaths?.readForHandOutSync?.('acme/none', 'connection_tokens')).toBeNull();
    await storage.close();
  });

  it("offers a connection's tokens read synchronously too", async () => {
    const storage = sqliteStorage(':memory:');
    expect(typeof storage.fastPaths?.readWithTokensSync).toBe('function');
    expect(storage.fastPaths?.readWithTokensSync?.('acme/none', 'connection_tokens')).toBeNull();
    await storage.close();
  });

  it('applies the migrations once, however many connections open the file', async () => {
    const file = join(dir, 'migrations.sqlite');
    const first = sqliteStorage(file);
    const second = sqliteStorage(file);
    const rows = first.database.prepare('SELECT version FROM keyway_migrations').all();
    expect(rows).toEqual(MIGRATIONS.map((_, i) => ({ version: i + 1 })));
    expect(first.database.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(second.database.pragma('busy_timeout', { simple: true })).toBe(5000);
    await first.close();
    await second.close();
  });

  it('upgrades a database of the third migration: its tokens read back bound to no endpoint, open to every tool', async () => {
    const file = join(dir, 'third-migration.sqlite');
    const old = new Database(file);
    old.exec(
      'CREATE TABLE keyway_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)',
    );
    for (const [index, migration] of MIGRATIONS.slice(0, 3).entries()) {
      old.exec(migration);
      old.prepare('INSERT INTO keyway_migrations VALUES (?, ?)').run(index + 1, 0);
    }
    old
      .prepare(
        'INSERT INTO keyway_tokens (id_hash, name, scopes, expires_at, created_at, created_by) ' +
          'VALUES (?, ?, ?, ?, ?, ?)',
      )
      .run('a'.repeat(64), 'before', '["acme/**"]', 4_102_444_800_000, 1, 'root');
    old.close();
    const storage = sqliteStorage(file);
    expect(await storage.findTokenByIdHash('a'.repeat(64))).toEqual({
      idHash: 'a'.repeat(64),
      name: 'before',
      scopes: ['acme/**'],
      expiresAt: 4_102_444_800_000,
      createdAt: 1,
      createdBy: 'root',
    });
    expect(storage.fastPaths?.findTokenByIdHashSync?.('a'.repeat(64))).toEqual({
      name: 'before',
      scopes: ['acme/**'],
      expiresAt: 4_102_444_800_000,
    });
    expect((await storage.health()).schema).toEqual({ version: 5, expected: 5 });
    await storage.close();
  });

  it('creates a new database file, its WAL and shared memory readable by the owner only', async () => {
    const file = join(dir, 'private.sqlite');
    const umask = process.umask(0);
    let storage: SqliteStorage<Database.Database>;
    try {
      storage = sqliteStorage(file);
      storage.database.prepare('CREATE TABLE IF NOT EXISTS t (x)').run();
    } finally {
      process.umask(umask);
    }
    for (const path of [file, `${file}-wal`, `${file}-shm`]) {
      expect([path, statSync(path).mode & 0o777]).toEqual([path, 0o600]);
    }
    await storage.close();
    // An existing file is the owner's business: left as it is.
    const shared = join(dir, 'shared.sqlite');
    writeFileSync(shared, '', { mode: 0o640 });
    chmodSync(shared, 0o640);
    const opened = sqliteStorage(shared);
    expect(statSync(shared).mode & 0o777).toBe(0o640);
    await opened.close();
  });

  it('leaves an open Database it was given to its owner', async () => {
    const db = new Database(join(dir, 'borrowed.sqlite'));
    const storage = sqliteStorage(db);
    await storage.close();
    expect(db.open).toBe(true);
    db.close();
  });

  it('opens a file with the driver it is given, and closes it as its own', async () => {
    const opened: string[] = [];
    class Counted extends Database {
      constructor(file: string) {
        super(file);
        opened.push(file);
      }
    }
    const file = join(dir, 'driver.sqlite');
    const storage = sqliteStorage(file, { driver: Counted });
    expect(opened).toEqual([file]);
    expect(storage.database).toBeInstanceOf(Counted);
    expect(await storage.health()).toMatchObject({ engine: 'sqlite' });
    await storage.close();
    expect((storage.database as Database.Database).open).toBe(false);
  });

  describe('query plans on 100,000 connections', () => {
    const file = join(dir, 'plan.sqlite');
    const storage = sqliteStorage(file);
    const insert = storage.database.prepare(
      `INSERT INTO keyway_connections (id, provider_id, status, state, version, created_at, updated_at)
       VALUES (?, ?, ?, '{}', 1, 0, 0)`,
    );
    storage.database.transaction(() => {
      for (let i = 0; i < 100_000; i++) {
        insert.run(`tenant-${i % 100}/users/u${i}/linear`, i % 3 ? 'linear' : 'github', 'active');
      }
    })();
    storage.database.exec('ANALYZE');

    const plan = (sql: string, params: unknown[]) =>
      (storage.database.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as { detail: string }[])
        .map((row) => row.detail)
        .join('\n');

    afterAll(() => storage.close());

    it('serves a prefix listing with index range searches, never a table scan', async () => {
      const { sql, params } = storage.listConnectionsSql({ within: ['tenant-7'], limit: 100 });
      const detail = plan(sql, params);
      expect(detail).toMatch(/SEARCH keyway_connections USING (PRIMARY KEY|INDEX)/);
      expect(detail).not.toMatch(/SCAN keyway_connections/);
      const page = await storage.listConnections({ within: ['tenant-7'], limit: 100 });
      expect(page).toHaveLength(100);
      expect(page.every((c) => c.id.startsWith('tenant-7/'))).toBe(true);
    });

    it('serves a listing across several scopes, by provider, with index searches', () => {
      const { sql, params } = storage.listConnectionsSql({
        within: ['tenant-1', 'tenant-2/users'],
        providerId: 'linear',
        after: 'tenant-1/users/u50001/linear',
        limit: 50,
      });
      const detail = plan(sql, params);
      expect(detail).toMatch(/SEARCH keyway_connections/);
      expect(detail).not.toMatch(/SCAN keyway_connections/);
    });

    it('pages a subtree in key order, reading a page and not the whole subtree', () => {
      const { sql, params } = storage.listConnectionsSql({ within: ['tenant-7'], limit: 10 });
      const lines = plan(sql, params).split('\n');
      // The root: one point read. Its descendants: one primary-key range read in key order,
      // cut at the page (no sort inside). The only sort is of the merged page, after.
      expect(lines).toEqual([
        'MERGE (UNION)',
        'LEFT',
        'SEARCH keyway_connections USING PRIMARY KEY (id=?)',
        'RIGHT',
        'CO-ROUTINE below0',
        'SEARCH keyway_connections USING PRIMARY KEY (id>? AND id<?)',
        'SCAN below0',
        'USE TEMP B-TREE FOR ORDER BY',
      ]);
    });

    it("reads a hand-out's connection, tokens and provider as three primary-key searches in one statement", () => {
      const lines = plan(compile(SQLITE, handOutStatement('sqlite')), ['connection_tokens', 'x']);
      expect(lines.split('\n')).toEqual([
        'SEARCH c USING PRIMARY KEY (id=?)',
        'SEARCH v USING PRIMARY KEY (kind=? AND key=?) LEFT-JOIN',
        'SEARCH p USING PRIMARY KEY (id=?) LEFT-JOIN',
      ]);
    });

    it('reads a token by id hash and a connection by id as primary-key point reads', () => {
      // The statements the adapter runs, as it compiles them.
      expect(compile(SQLITE, TOKEN_BY_ID_HASH)).toBe(
        'SELECT id_hash, name, scopes, expires_at, created_at, created_by, audience, tools FROM keyway_tokens WHERE id_hash = ?',
      );
      expect(plan(compile(SQLITE, TOKEN_BY_ID_HASH), ['x'])).toMatch(
        /SEARCH keyway_tokens USING PRIMARY KEY \(id_hash=\?\)/,
      );
      // The token check's own read: its three columns, by the same key.
      expect(compile(SQLITE, TOKEN_CHECK_BY_ID_HASH)).toBe(
        'SELECT name, scopes, expires_at, audience, tools FROM keyway_tokens WHERE id_hash = ?',
      );
      expect(plan(compile(SQLITE, TOKEN_CHECK_BY_ID_HASH), ['x'])).toMatch(
        /SEARCH keyway_tokens USING PRIMARY KEY \(id_hash=\?\)/,
      );
      expect(plan(compile(SQLITE, CONNECTION_BY_ID), ['x'])).toMatch(
        /SEARCH keyway_connections USING PRIMARY KEY \(id=\?\)/,
      );
    });
  });
});

describe('SQLite drivers', () => {
  it('answers a values statement as an array in the order selected, on every driver', () => {
    const db = new Database(':memory:');
    db.exec("CREATE TABLE t (a TEXT, b INTEGER); INSERT INTO t VALUES ('x', 2)");
    const sql = 'SELECT b, a FROM t WHERE a = ?';
    const better = wrapSqlite(db);
    expect(better.prepareValues(sql).get('x')).toEqual([2, 'x']);
    expect(better.prepareValues(sql).get('y')).toBeUndefined();
    // node:sqlite as Node 22.16+ has it (arrays from the engine), and as earlier versions
    // and Deno may have it (objects only), over the same database.
    const nodeLike = (arrays: boolean) => ({
      prepare(text: string) {
        const statement = db.prepare(text);
        return {
          run: (...params: unknown[]) => statement.run(...params),
          get: (...params: unknown[]) => statement.get(...params),
          all: (...params: unknown[]) => statement.all(...params),
          ...(arrays ? { setReturnArrays: (on: boolean) => statement.raw(on) } : {}),
        };
      },
      exec() {},
      close() {},
    });
    for (const arrays of [true, false]) {
      const connection = wrapSqlite(nodeLike(arrays));
      expect(connection.driver).toBe('node:sqlite');
      expect(connection.prepareValues(sql).get('x')).toEqual([2, 'x']);
      expect(connection.prepareValues(sql).get('y')).toBeUndefined();
    }
    // bun:sqlite's `values()` answers every row as an array; a point read takes the first.
    const bunLike = {
      filename: ':memory:',
      prepare(text: string) {
        const statement = db.prepare(text);
        return { values: (...params: unknown[]) => statement.raw(true).all(...params) };
      },
      exec() {},
      query() {},
      transaction() {},
      close() {},
    };
    const bun = wrapSqlite(bunLike);
    expect(bun.driver).toBe('bun:sqlite');
    expect(bun.prepareValues(sql).get('x')).toEqual([2, 'x']);
    expect(bun.prepareValues(sql).get('y')).toBeUndefined();
    db.close();
  });

  it('tells which driver an open database belongs to, and refuses anything else by name', () => {
    const db = new Database(':memory:');
    expect(driverOf(db)).toBe('better-sqlite3');
    expect(driverOf({ prepare() {}, exec() {}, query() {}, transaction() {} })).toBe('bun:sqlite');
    expect(driverOf({ prepare() {}, exec() {}, close() {} })).toBe('node:sqlite');
    expect(driverOf({})).toBeNull();
    expect(() => sqliteStorage({ name: 'not a database' })).toThrow(
      new TypeError(
        'sqliteStorage() takes a file path or an open better-sqlite3, bun:sqlite or node:sqlite database',
      ),
    );
    db.close();
  });

  it('reports a file that cannot be opened as the driver words it', () => {
    expect(() => sqliteStorage(join(dir, 'missing-folder', 'x.sqlite'))).toThrow(
      'Cannot open database because the directory does not exist',
    );
  });
});
