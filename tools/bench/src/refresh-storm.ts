import { type Broker, createBroker, generateVaultKey, rootPrincipal } from '@keyway/core';
import { postgresStorage } from '@keyway/store-postgres';
import { createTestWorld } from '@keyway/testing';
import pg from 'pg';
import { activeConnection, ROOT_KEY } from './fixtures.js';

export interface StormResult {
  callers: number;
  instances: number;
  /** Upstream refreshes per storm, one entry per storm. */
  refreshes: number[];
  /** Wall time of each storm, ms. */
  millis: number[];
}

/**
 * A refresh storm: `callers` concurrent credential requests for one connection whose access
 * token is due, spread over two broker instances (each its own pool) on one PostgreSQL
 * database, against the in-memory test authorization server. Counts the refresh grants
 * the authorization server receives per storm.
 */
export async function benchRefreshStorm(options: {
  postgresUrl: string;
  callers: number;
  storms: number;
}): Promise<StormResult> {
  const name = `storm_${process.pid}`;
  const admin = new pg.Client({ connectionString: options.postgresUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  await admin.query(`CREATE DATABASE "${name}"`);
  const url = new URL(options.postgresUrl);
  url.pathname = `/${name}`;
  // Tokens live an hour. Before each storm the brokers' clock moves an hour and a second on,
  // so the token has expired and every caller needs the refresh (a token that is due but
  // still valid is served while another caller refreshes it); the refreshed one is valid,
  // so a caller that reads the connection after the refresh (the storm is not one instant)
  // uses it, and each storm makes one refresh however its callers interleave.
  const world = createTestWorld({ accessTokenLifetime: 3600 });
  let offset = 0;
  const vaultKeys = [generateVaultKey()];
  const brokers: Broker[] = [];
  for (let i = 0; i < 2; i++) {
    const storage = await postgresStorage({ connectionString: url.toString() });
    // The database is dropped with FORCE at the end: a pooled connection it ends is expected.
    storage.pool.on('error', () => {});
    brokers.push(
      createBroker({
        rootKey: ROOT_KEY,
        storage,
        vaultKeys,
        baseUrl: 'https://keyway.example.test',
        providerManagement: true,
        purgeIntervalMs: false,
        fetch: world.fetch,
        now: () => Date.now() + offset,
      }),
    );
  }
  try {
    await activeConnection(world, brokers[0] as Broker, 'acme/alice/demo');
    const refreshes: number[] = [];
    const millis: number[] = [];
    for (let storm = 0; storm < options.storms; storm++) {
      offset += 3_601_000;
      const before = world.stats.refreshes;
      const started = performance.now();
      const answers = await Promise.all(
        Array.from({ length: options.callers }, (_, i) =>
          (brokers[i % 2] as Broker).connections.credentials(rootPrincipal(), 'acme/alice/demo'),
        ),
      );
      millis.push(performance.now() - started);
      refreshes.push(world.stats.refreshes - before);
      const distinct = new Set(answers.map((answer) => answer.access_token));
      if (distinct.size !== 1) throw new Error(`the callers got ${distinct.size} different tokens`);
    }
    return { callers: options.callers, instances: 2, refreshes, millis };
  } finally {
    for (const broker of brokers) await broker.close();
    await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await admin.end();
  }
}
