import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Broker, createBroker, generateVaultKey, rootPrincipal } from '@keyway/core';
import { postgresStorage } from '@keyway/store-postgres';
import { sqliteStorage } from '@keyway/store-sqlite';
import { connectInWorld, createTestBroker, createTestWorld, type TestWorld } from '@keyway/testing';
import pg from 'pg';

/** The root key of every benchmark broker (the cached tables' tokens are tagged with it). */
export const ROOT_KEY = 'bench-root-key-0123456789abcdefghijklmnopqrstuvwxyz';
/** Tokens minted for real and checked in turn; the rest of a table is filler rows. */
export const SAMPLE_TOKENS = 1_000;
/** Expiry of every fixture row: far away, so cached tables stay live. */
const FAR_FUTURE = Date.UTC(2099, 0, 1);

/** A broker on a storage, with the options every benchmark uses (and `overrides`). */
export function benchBroker(
  storage: Parameters<typeof createBroker>[0]['storage'],
  overrides: Partial<Parameters<typeof createBroker>[0]> = {},
): Broker {
  return createBroker({
    rootKey: ROOT_KEY,
    storage,
    vaultKeys: [generateVaultKey()],
    purgeIntervalMs: false,
    ...overrides,
  });
}

/**
 * Mints the sample tokens through a broker whose clock stands just before {@link FAR_FUTURE},
 * so they stay live for as long as the cached tables are kept.
 */
async function mintSample(storage: Parameters<typeof createBroker>[0]['storage'], count: number) {
  const minting = benchBroker(storage, { now: () => FAR_FUTURE - 86_400_000 });
  const tokens: string[] = [];
  for (let i = 0; i < count; i++) {
    const issued = await minting.tokens.mint(rootPrincipal(), {
      name: `sample${i}`,
      scopes: [`acme/t${i}`],
      expires_in: 2_592_000,
    });
    tokens.push(issued.access_token);
  }
  // Not closed: that would close the storage, which the caller goes on filling.
  return tokens;
}

/** Random filler `id_hash` values (hex, as SHA-256 hashes are stored). */
const fillerHash = () => randomBytes(32).toString('hex');

/** A SQLite file of `size` live tokens, built once in `dir` and reused. */
export async function sqliteTokens(
  dir: string,
  size: number,
): Promise<{ file: string; tokens: string[] }> {
  const file = join(dir, `tokens-${size}.sqlite`);
  const list = `${file}.json`;
  if (existsSync(file) && existsSync(list)) {
    return { file, tokens: JSON.parse(readFileSync(list, 'utf8')) as string[] };
  }
  mkdirSync(dir, { recursive: true });
  for (const stale of [file, `${file}-wal`, `${file}-shm`, list]) rmSync(stale, { force: true });
  const storage = sqliteStorage(file);
  const sample = Math.min(SAMPLE_TOKENS, size);
  const tokens = await mintSample(storage, sample);
  const db = storage.database;
  const insert = db.prepare(
    'INSERT INTO keyway_tokens (id_hash, name, scopes, expires_at, created_at, created_by) VALUES (?, ?, ?, ?, ?, ?)',
  );
  db.transaction(() => {
    for (let i = sample; i < size; i++) {
      insert.run(fillerHash(), `filler${i}`, '["filler/**"]', FAR_FUTURE, 0, 'root');
    }
  })();
  db.exec('ANALYZE');
  await storage.close();
  writeFileSync(list, JSON.stringify(tokens));
  return { file, tokens };
}

/** Opens a database of the cached cluster, creating it when missing; true when it existed. */
async function database(
  serverUrl: string,
  name: string,
): Promise<{ url: string; existed: boolean }> {
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    const found = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (found.rowCount === 0) await admin.query(`CREATE DATABASE "${name}"`);
    const url = new URL(serverUrl);
    url.pathname = `/${name}`;
    return { url: url.toString(), existed: found.rowCount !== 0 };
  } finally {
    await admin.end();
  }
}

async function dropDatabase(serverUrl: string, name: string): Promise<void> {
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}

/** A PostgreSQL database of `size` live tokens, built once on the cluster and reused. */
export async function postgresTokens(
  serverUrl: string,
  dir: string,
  size: number,
): Promise<{ url: string; tokens: string[] }> {
  const name = `tokens_${size}`;
  const list = join(dir, `pg-${name}.json`);
  let db = await database(serverUrl, name);
  if (db.existed && existsSync(list)) {
    return { url: db.url, tokens: JSON.parse(readFileSync(list, 'utf8')) as string[] };
  }
  if (db.existed) {
    await dropDatabase(serverUrl, name);
    db = await database(serverUrl, name);
  }
  const storage = await postgresStorage({ connectionString: db.url });
  const sample = Math.min(SAMPLE_TOKENS, size);
  const tokens = await mintSample(storage, sample);
  await storage.pool.query(
    `INSERT INTO keyway_tokens (id_hash, name, scopes, expires_at, created_at, created_by)
     SELECT md5('a' || g) || md5('b' || g), 'filler' || g, '["filler/**"]', $1, 0, 'root'
     FROM generate_series($2::int, $3::int) AS g`,
    [FAR_FUTURE, sample, size - 1],
  );
  await storage.pool.query('ANALYZE keyway_tokens');
  await storage.close();
  mkdirSync(dir, { recursive: true });
  writeFileSync(list, JSON.stringify(tokens));
  return { url: db.url, tokens };
}

/** Tenants of a connections table: 1,000 connections each (1,000 tenants at 1M). */
export const tenantsOf = (size: number) => Math.max(1, Math.floor(size / 1000));

/** The id of the `g`th fixture connection: `t<k>/u<g>/demo`, spread over the tenants. */
const connectionId = (size: number) => `'t' || (g % ${tenantsOf(size)}) || '/u' || g || '/demo'`;

/**
 * Seeds one real, active connection (authorized in the in-memory test world) through a
 * broker on `storage`, then copies its row `size - 1` times under new ids.
 */
async function seedConnections(
  storage: Parameters<typeof createBroker>[0]['storage'],
  copy: (state: string, size: number) => Promise<void>,
  stateOf: () => Promise<string>,
  size: number,
): Promise<void> {
  const world = createTestWorld();
  await activeConnection(
    world,
    createTestBroker(world, { rootKey: ROOT_KEY, storage }),
    'seed/u0/demo',
  );
  await copy(await stateOf(), size);
}

/** Creates provider `demo` on the world's MCP server and authorizes one connection on it. */
export async function activeConnection(
  world: TestWorld,
  broker: Broker,
  connectionId: string,
): Promise<void> {
  await broker.providers.put(rootPrincipal(), 'demo', {
    template: 'mcp',
    configuration: { resource_url: world.resourceUrl },
  });
  const outcome = await connectInWorld(world, broker, { providerId: 'demo', connectionId });
  if (outcome.status !== 'active') throw new Error(`${connectionId} did not activate`);
}

/**
 * A broker on `storage` with connection `connectionId` authorized against an in-memory world
 * whose MCP endpoint is the upstream at `upstreamBase`: the gateway then sends the world's
 * token there. The caller closes the broker.
 */
export async function upstreamConnection(
  storage: Parameters<typeof createBroker>[0]['storage'],
  upstreamBase: string,
  vaultKey: string,
  connectionId: string,
): Promise<Broker> {
  const world = createTestWorld({
    resourceUrl: `${upstreamBase}/mcp`,
    issuer: `${upstreamBase}/as`,
  });
  const broker = createTestBroker(world, {
    rootKey: ROOT_KEY,
    storage,
    vaultKeys: [vaultKey],
    allowedHosts: ['127.0.0.1'],
  });
  await activeConnection(world, broker, connectionId);
  return broker;
}

/** A SQLite file of `size` connections in tenants of 1,000, built once and reused. */
export async function sqliteConnections(dir: string, size: number): Promise<string> {
  const file = join(dir, `connections-${size}.sqlite`);
  const done = `${file}.done`;
  if (existsSync(file) && existsSync(done)) return file;
  mkdirSync(dir, { recursive: true });
  for (const stale of [file, `${file}-wal`, `${file}-shm`]) rmSync(stale, { force: true });
  const storage = sqliteStorage(file);
  const db = storage.database;
  await seedConnections(
    storage,
    async (state) => {
      db.prepare(
        `WITH RECURSIVE n(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM n WHERE g < ?)
         INSERT INTO keyway_connections (id, provider_id, status, state, version, created_at, updated_at)
         SELECT ${connectionId(size)}, 'demo', 'active', ?, 1, 0, 0 FROM n`,
      ).run(size - 1, state);
      db.exec('ANALYZE');
    },
    async () =>
      (
        db.prepare("SELECT state FROM keyway_connections WHERE id = 'seed/u0/demo'").get() as {
          state: string;
        }
      ).state,
    size,
  );
  await storage.close();
  writeFileSync(done, '');
  return file;
}

/** A PostgreSQL database of `size` connections in tenants of 1,000, built once and reused. */
export async function postgresConnections(
  serverUrl: string,
  dir: string,
  size: number,
): Promise<string> {
  const name = `connections_${size}`;
  const done = join(dir, `pg-${name}.done`);
  let db = await database(serverUrl, name);
  if (db.existed && existsSync(done)) return db.url;
  if (db.existed) {
    await dropDatabase(serverUrl, name);
    db = await database(serverUrl, name);
  }
  const storage = await postgresStorage({ connectionString: db.url });
  await seedConnections(
    storage,
    async (state) => {
      await storage.pool.query(
        `INSERT INTO keyway_connections (id, provider_id, status, state, version, created_at, updated_at)
         SELECT ${connectionId(size)}, 'demo', 'active', $1, 1, 0, 0
         FROM generate_series(1, $2::int) AS g`,
        [state, size - 1],
      );
      await storage.pool.query('ANALYZE keyway_connections');
    },
    async () =>
      (
        (await storage.pool.query("SELECT state FROM keyway_connections WHERE id = 'seed/u0/demo'"))
          .rows[0] as { state: string }
      ).state,
    size,
  );
  await storage.close();
  mkdirSync(dir, { recursive: true });
  writeFileSync(done, '');
  return db.url;
}
