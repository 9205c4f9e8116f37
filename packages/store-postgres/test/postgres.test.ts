import { createTestSchema } from '@keyway/test-support/postgres';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { MIGRATIONS, type PostgresStorage, postgresStorage } from '../src/index.js';

const url = inject('databaseUrl');

describe('postgresStorage()', () => {
  it('applies each migration once when five instances start together', async () => {
    const { schema, drop } = await createTestSchema(url);
    const instances = await Promise.all(
      Array.from({ length: 5 }, () =>
        postgresStorage({ connectionString: url, schema, maxConnections: 2 }),
      ),
    );
    const { rows } = await (instances[0] as PostgresStorage).pool.query(
      `SELECT version FROM "${schema}".keyway_migrations ORDER BY version`,
    );
    expect(rows).toEqual(MIGRATIONS.map((_, i) => ({ version: i + 1 })));
    for (const instance of instances) await instance.close();
    await drop();
  });

  it('offers the fast paths that wait on I/O, and none of the synchronous ones', async () => {
    const { schema, drop } = await createTestSchema(url);
    const storage = await postgresStorage({ connectionString: url, schema, maxConnections: 1 });
    const fast = storage.fastPaths;
    expect(Object.keys(fast ?? {}).sort()).toEqual([
      'findTokenCheckByIdHash',
      'readForHandOut',
      'readWithTokens',
    ]);
    await storage.close();
    await drop();
  });

  /**
   * The server ends an idle connection of the pool (a restart, a failover, an administrator):
   * node-postgres then emits `error` on the pool, which throws in the process unless someone
   * listens. Each case ends the pool's one connection from another and waits until the pool
   * has dropped it.
   */
  describe('when the server ends an idle connection', () => {
    async function endIdleConnection(storage: PostgresStorage): Promise<void> {
      const { rows } = await storage.pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      try {
        const ended = await admin.query('SELECT pg_terminate_backend($1) AS ended', [rows[0]?.pid]);
        expect(ended.rows).toEqual([{ ended: true }]);
      } finally {
        await admin.end();
      }
      const deadline = Date.now() + 10_000;
      while (storage.pool.totalCount > 0) {
        if (Date.now() > deadline) throw new Error('the pool kept its ended connection');
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    }

    it('keeps the process up and answers the next read on a new connection', async () => {
      const { schema, drop } = await createTestSchema(url);
      const storage = await postgresStorage({ connectionString: url, schema, maxConnections: 1 });
      await endIdleConnection(storage);
      expect(await storage.getConnection('acme/users/alice/linear')).toBeNull();
      expect(storage.pool.totalCount).toBe(1);
      await storage.close();
      await drop();
    });

    it('keeps the process up when it ends a connection in a transaction, failing that write only', async () => {
      const { schema, drop } = await createTestSchema(url);
      // Its own application name: the storage's sessions, told from every other test's.
      const named = new URL(url);
      named.searchParams.set('application_name', schema);
      const storage = await postgresStorage({
        connectionString: named.toString(),
        schema,
        maxConnections: 2,
      });
      // Another session holds the tokens table, so the storage's transaction waits inside it.
      const holder = new pg.Client({ connectionString: url });
      await holder.connect();
      await holder.query('BEGIN');
      await holder.query(`LOCK TABLE "${schema}".keyway_tokens IN ACCESS EXCLUSIVE MODE`);
      const write = storage.deleteTokenTree('acme', Date.now()).then(
        () => 'written',
        (error: Error) => error.message,
      );
      const deadline = Date.now() + 10_000;
      let waiting: number | undefined;
      while (waiting === undefined) {
        if (Date.now() > deadline) throw new Error('the transaction never waited on the lock');
        const { rows } = await holder.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`,
          [schema],
        );
        waiting = rows[0]?.pid;
        if (waiting === undefined) await new Promise((resolve) => setTimeout(resolve, 10));
      }
      await holder.query('SELECT pg_terminate_backend($1)', [waiting]);
      expect(await write).toBe('terminating connection due to administrator command');
      await holder.query('ROLLBACK');
      await holder.end();
      // The ended connection went back to no one: the next write runs on a new one.
      expect(await storage.deleteTokenTree('acme', Date.now())).toBe(false);
      await storage.close();
      await drop();
    });

    it('tells onIdleError, with the server’s code', async () => {
      const { schema, drop } = await createTestSchema(url);
      const told: unknown[] = [];
      const storage = await postgresStorage({
        connectionString: url,
        schema,
        maxConnections: 1,
        onIdleError: (error) => told.push((error as { code?: unknown }).code),
      });
      await endIdleConnection(storage);
      // 57P01: admin_shutdown, what pg_terminate_backend and a server's fast shutdown send.
      expect(told).toEqual(['57P01']);
      expect(await storage.getConnection('acme/users/alice/linear')).toBeNull();
      await storage.close();
      await drop();
    });
  });

  it('listens on a pool you pass only when given onIdleError, and stops at close', async () => {
    const { schema, drop } = await createTestSchema(url);
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    const untouched = await postgresStorage({ pool, schema });
    expect(pool.listenerCount('error')).toBe(0);
    await untouched.close();
    const told = await postgresStorage({ pool, schema, onIdleError: () => {} });
    expect(pool.listenerCount('error')).toBe(1);
    await told.close();
    expect(pool.listenerCount('error')).toBe(0);
    await pool.end();
    await drop();
  });

  it('refuses a schema name that is not a plain identifier', async () => {
    await expect(postgresStorage({ connectionString: url, schema: 'a"; drop' })).rejects.toThrow(
      TypeError,
    );
  });

  describe('query plans on 100,000 connections', () => {
    let storage: PostgresStorage;
    let drop: () => Promise<void>;

    beforeAll(async () => {
      const created = await createTestSchema(url);
      drop = created.drop;
      storage = await postgresStorage({ connectionString: url, schema: created.schema });
      await storage.pool.query(
        `INSERT INTO "${created.schema}".keyway_connections
           (id, provider_id, status, state, version, created_at, updated_at)
         SELECT 'tenant-' || (i % 100) || '/users/u' || i || '/linear',
                CASE WHEN i % 3 = 0 THEN 'github' ELSE 'linear' END, 'active', '{}', 1, 0, 0
         FROM generate_series(0, 99999) AS i`,
      );
      await storage.pool.query(`ANALYZE "${created.schema}".keyway_connections`);
    });

    afterAll(async () => {
      await storage.close();
      await drop();
    });

    const plan = async (sql: string, params: unknown[]) => {
      const { rows } = await storage.pool.query(`EXPLAIN ${sql}`, params);
      return rows.map((row) => row['QUERY PLAN'] as string).join('\n');
    };

    it('serves a prefix listing with an index, never a sequential scan', async () => {
      const { sql, params } = storage.listConnectionsSql({ within: ['tenant-7'], limit: 100 });
      const detail = await plan(sql, params);
      expect(detail).toMatch(
        /Index (Only )?Scan using keyway_connections_pkey|Bitmap Index Scan on keyway_connections_pkey/,
      );
      expect(detail).not.toMatch(/Seq Scan/);
      const page = await storage.listConnections({ within: ['tenant-7'], limit: 100 });
      expect(page).toHaveLength(100);
      expect(page.every((c) => c.id.startsWith('tenant-7/'))).toBe(true);
    });

    it('serves a listing across several scopes and a provider with an index', async () => {
      const { sql, params } = storage.listConnectionsSql({
        within: ['tenant-1', 'tenant-2/users'],
        providerId: 'linear',
        limit: 50,
      });
      const detail = await plan(sql, params);
      expect(detail).toMatch(/Index|Bitmap/);
      expect(detail).not.toMatch(/Seq Scan/);
    });

    it('pages a subtree from an index read cut at the page', async () => {
      const { sql, params } = storage.listConnectionsSql({ within: ['tenant-7'], limit: 10 });
      const detail = await plan(sql, params);
      expect(detail).toMatch(/Limit[\s\S]*Index (Only )?Scan using keyway_connections_pkey/);
      expect(detail).not.toMatch(/Seq Scan/);
    });

    it('reads a connection by id and a token by id hash as index point reads', async () => {
      expect(
        await plan(`SELECT * FROM "${storage.schema}".keyway_connections WHERE id = $1`, ['x']),
      ).toMatch(/Index Scan using keyway_connections_pkey/);
      expect(
        await plan(`SELECT * FROM "${storage.schema}".keyway_tokens WHERE id_hash = $1`, ['x']),
      ).toMatch(/Index Scan using keyway_tokens_pkey/);
    });
  });
});
