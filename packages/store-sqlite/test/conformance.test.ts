import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Storage } from '@keyway/core/storage';
import { runStorageConformance } from '@keyway/storage-conformance';
import { afterAll } from 'vitest';
import { type SqliteStorage, sqliteStorage } from '../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'keyway-sqlite-'));
let n = 0;
const files = new WeakMap<Storage, string>();

afterAll(() => rmSync(dir, { recursive: true, force: true }));

// The same file runs under Bun (`bun test`, on bun:sqlite): see bun.test.ts. Under Node the
// runtime's driver is better-sqlite3.
const runtime = 'Bun' in globalThis ? 'bun:sqlite' : 'better-sqlite3';

runStorageConformance(`sqliteStorage() on a real file, two connections (${runtime})`, {
  create() {
    const file = join(dir, `conformance-${++n}.sqlite`);
    const storage = sqliteStorage(file);
    files.set(storage, file);
    return storage;
  },
  connectAgain(storage) {
    return sqliteStorage(files.get(storage) as string);
  },
  readBehind(storage) {
    const db = (storage as SqliteStorage).connection;
    return {
      async rows(table) {
        return db.prepare(`SELECT * FROM keyway_${table}`).all() as Record<string, unknown>[];
      },
    };
  },
});
