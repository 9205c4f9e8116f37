import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Storage } from '@keyway/core';
import { memoryStorage } from '@keyway/store-memory';
import { type PostgresStorage, postgresStorage } from '@keyway/store-postgres';
import { type SqliteStorage, sqliteStorage } from '@keyway/store-sqlite';
import { createTestSchema } from '@keyway/test-support/postgres';
import { inject } from 'vitest';

/** A storage the tests run against. */
export interface StorageFactory {
  name: string;
  create(): Promise<Storage>;
  /**
   * Everything the engine keeps on disk or in rows for this storage, as text, read behind
   * the adapter's back: to prove what is (not) stored in clear. `null` for memory.
   */
  rawText(storage: Storage): Promise<string | null>;
  /** Another, independent handle on the same database (absent for memory: share the object). */
  reopen?(storage: Storage): Promise<Storage>;
}

const sqliteDir = mkdtempSync(join(tmpdir(), 'keyway-storages-'));
let sqliteFiles = 0;

/** Every adapter, each on its real engine: the broker must behave the same on all. */
export const storageFactories: StorageFactory[] = [
  { name: 'memory', create: async () => memoryStorage(), rawText: async () => null },
  {
    name: 'sqlite',
    create: async () => sqliteStorage(join(sqliteDir, `storage-${++sqliteFiles}.sqlite`)),
    reopen: async (storage) => sqliteStorage((storage as SqliteStorage).database.name),
    async rawText(storage) {
      const { database } = storage as SqliteStorage;
      database.pragma('wal_checkpoint(TRUNCATE)');
      const files = [database.name, `${database.name}-wal`].filter((file) => existsSync(file));
      return files.map((file) => readFileSync(file).toString('latin1')).join('\n');
    },
  },
  {
    name: 'postgres',
    async create() {
      const url = inject('databaseUrl');
      const { schema } = await createTestSchema(url);
      return postgresStorage({ connectionString: url, schema, maxConnections: 4 });
    },
    reopen: async (storage) =>
      postgresStorage({
        connectionString: inject('databaseUrl'),
        schema: (storage as PostgresStorage).schema,
        maxConnections: 4,
      }),
    async rawText(storage) {
      const { pool, schema } = storage as PostgresStorage;
      const tables = [
        'tokens',
        'providers',
        'connections',
        'pending_authorizations',
        'vault_entries',
        'audit_events',
        'webhook_deliveries',
      ];
      const parts: string[] = [];
      for (const table of tables) {
        const { rows } = await pool.query(`SELECT * FROM "${schema}".keyway_${table}`);
        parts.push(JSON.stringify(rows));
      }
      return parts.join('\n');
    },
  },
];
