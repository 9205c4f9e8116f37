import type { Storage } from '@keyway/core/storage';
import { runStorageConformance } from '@keyway/storage-conformance';
import { createTestSchema } from '@keyway/test-support/postgres';
import { inject } from 'vitest';
import { type PostgresStorage, postgresStorage } from '../src/index.js';

const url = inject('databaseUrl');
const drops = new WeakMap<Storage, () => Promise<void>>();

runStorageConformance('postgresStorage() on a real server, two pools', {
  async create() {
    const { schema, drop } = await createTestSchema(url);
    const storage = await postgresStorage({ connectionString: url, schema, maxConnections: 12 });
    drops.set(storage, drop);
    return storage;
  },
  connectAgain(storage) {
    const { schema } = storage as PostgresStorage;
    return postgresStorage({ connectionString: url, schema, maxConnections: 12 });
  },
  async destroy(storage) {
    await drops.get(storage)?.();
  },
  readBehind(storage) {
    const { pool, schema } = storage as PostgresStorage;
    return {
      async rows(table) {
        const result = await pool.query(`SELECT * FROM "${schema}".keyway_${table} ORDER BY 1`);
        return result.rows;
      },
    };
  },
});
