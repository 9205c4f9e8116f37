import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type {} from 'vitest';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of the PostgreSQL server the tests of this project use (see postgres-global-setup). */
    databaseUrl: string;
  }
}

/** A PostgreSQL server for tests. */
export interface TestPostgres {
  /** A connection URL with rights to create schemas and databases. */
  url: string;
  /** Stops the server and removes its data, if this process started it. */
  stop(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

function binDir(): string {
  const found = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' });
  let dir = found.status === 0 ? found.stdout.trim() : '';
  if (dir === '' || !existsSync(join(dir, 'initdb'))) {
    // Debian's layout, when pg_config is not on the PATH: the newest installed version.
    const root = '/usr/lib/postgresql';
    const versions = existsSync(root)
      ? readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'initdb')))
      : [];
    versions.sort((a, b) => Number(b) - Number(a));
    if (versions[0] !== undefined) dir = join(root, versions[0], 'bin');
  }
  if (dir === '' || !existsSync(join(dir, 'initdb'))) {
    throw new Error(
      'PostgreSQL server binaries were not found (pg_config --bindir). Install them ' +
        '(Debian: apt-get install -y postgresql) or set TEST_DATABASE_URL.',
    );
  }
  return dir;
}

/**
 * Starts a throwaway PostgreSQL server on a free loopback port, in a temporary data
 * directory, unless `TEST_DATABASE_URL` names one already. As root it runs the server as
 * the `postgres` user (PostgreSQL refuses to run as root).
 */
export async function startTestPostgres(): Promise<TestPostgres> {
  const configured = process.env.TEST_DATABASE_URL;
  if (configured) return { url: configured, stop: async () => {} };
  return startPostgres();
}

/**
 * Starts a PostgreSQL server on a free loopback port. Without `dataDir`, in a new temporary
 * directory removed at stop; with it, on that cluster (created there when missing, kept at
 * stop), so data loaded once serves later runs (the benchmarks' large tables).
 */
export async function startPostgres(options: { dataDir?: string } = {}): Promise<TestPostgres> {
  const bin = binDir();
  const kept = options.dataDir !== undefined;
  const dir = kept ? (options.dataDir as string) : mkdtempSync(join(tmpdir(), 'keyway-pg-'));
  mkdirSync(dir, { recursive: true });
  const data = join(dir, 'data');
  const asRoot = process.getuid?.() === 0;
  const run = (command: string, args: string[]) => {
    const file = join(bin, command);
    if (asRoot) execFileSync('runuser', ['-u', 'postgres', '--', file, ...args], { stdio: 'pipe' });
    else execFileSync(file, args, { stdio: 'pipe' });
  };
  if (asRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    chownSync(dir, uid, gid);
  }
  const port = await freePort();
  if (!existsSync(join(data, 'PG_VERSION'))) {
    run('initdb', [
      '-D',
      data,
      '-U',
      'keyway',
      '--auth=trust',
      '-E',
      'UTF8',
      '--no-locale',
      '--no-sync',
    ]);
  }
  run('pg_ctl', [
    '-D',
    data,
    '-l',
    join(dir, 'server.log'),
    '-w',
    '-t',
    '60',
    '-o',
    `-p ${port} -h 127.0.0.1 -k ${dir} -F -N 300 -c shared_buffers=${kept ? '1GB' : '64MB'}`,
    'start',
  ]);
  let stopped = false;
  return {
    url: `postgres://keyway@127.0.0.1:${port}/postgres`,
    async stop() {
      if (stopped) return;
      stopped = true;
      try {
        // A kept cluster stops cleanly (no recovery at the next start).
        run('pg_ctl', ['-D', data, '-m', kept ? 'fast' : 'immediate', '-w', 'stop']);
      } finally {
        if (!kept) rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

let schemaCounter = 0;

/** A fresh, empty schema on the test server, and a way to drop it. */
export async function createTestSchema(
  url: string,
): Promise<{ schema: string; drop(): Promise<void> }> {
  const schema = `kw_test_${process.pid}_${++schemaCounter}_${Math.random().toString(36).slice(2, 8)}`;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`CREATE SCHEMA "${schema}"`);
  } finally {
    await client.end();
  }
  return {
    schema,
    async drop() {
      const dropper = new pg.Client({ connectionString: url });
      await dropper.connect();
      try {
        await dropper.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      } finally {
        await dropper.end();
      }
    },
  };
}

let databaseCounter = 0;

/** A fresh, empty database on the test server (for tests that span processes). */
export async function createTestDatabase(
  url: string,
): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `kw_test_${process.pid}_${++databaseCounter}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${name}"`);
  } finally {
    await admin.end();
  }
  const databaseUrl = new URL(url);
  databaseUrl.pathname = `/${name}`;
  return {
    url: databaseUrl.toString(),
    async drop() {
      const dropper = new pg.Client({ connectionString: url });
      await dropper.connect();
      try {
        // A closed pool's clients are still saying goodbye for a moment (pg's pool.end()
        // resolves before their sockets close): a forced drop would terminate them and
        // make them emit an error nobody listens to any more. Wait for them first; force
        // only what is left (a process that was killed).
        for (let waited = 0; waited < 5_000; waited += 50) {
          const { rows } = await dropper.query(
            'SELECT count(*)::int AS sessions FROM pg_stat_activity WHERE datname = $1',
            [name],
          );
          if (rows[0]?.sessions === 0) break;
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        await dropper.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      } finally {
        await dropper.end();
      }
    },
  };
}
