// The world of the hand-out benchmarks: a SQLite file holding one active connection, and
// brokers over it. Written only against what every tree since the hand-out goal was set has (createBroker,
// the test kit, the bench fixtures): `since.mjs` copies it into an earlier tree with
// hand-out-loop.ts.
import { join } from 'node:path';
import { type Broker, createBroker, generateVaultKey, type Storage } from '@keyway/core';
import { sqliteStorage } from '@keyway/store-sqlite';
import { createTestBroker, createTestWorld } from '@keyway/testing';
import { activeConnection, ROOT_KEY } from './fixtures.js';

/** The connection every hand-out reads. */
export const HAND_OUT_CONNECTION = 'acme/alice/demo';

/**
 * Authorizes {@link HAND_OUT_CONNECTION} in a SQLite file in `dir`; `broker(wrap)` opens a
 * broker over the file, its storage wrapped by `wrap` when given.
 */
export async function handOutWorld(dir: string): Promise<{
  broker: (wrap?: (storage: Storage) => Storage) => Broker;
}> {
  const file = join(dir, 'keyway.sqlite');
  const vaultKey = generateVaultKey();
  const world = createTestWorld();
  const seeding = createTestBroker(world, {
    rootKey: ROOT_KEY,
    storage: sqliteStorage(file),
    vaultKeys: [vaultKey],
  });
  await activeConnection(world, seeding, HAND_OUT_CONNECTION);
  await seeding.close();
  return {
    broker: (wrap = (storage) => storage) =>
      createBroker({
        rootKey: ROOT_KEY,
        storage: wrap(sqliteStorage(file)),
        vaultKeys: [vaultKey],
        baseUrl: 'https://keyway.example.test',
        providerManagement: true,
        purgeIntervalMs: false,
        fetch: world.fetch,
      }),
  };
}
