import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TokenRecord } from '@keyway/core/storage';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { sqliteStorage } from '../src/index.js';

/*
 * The reads of one turn of the event loop share one read transaction (src/snapshot.ts):
 * what a reader sees, and that no write of this process is ever hidden from a later read.
 * Every step below that does not say "next turn" runs in the same turn (promises only).
 */

const dir = mkdtempSync(join(tmpdir(), 'keyway-sqlite-snapshot-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const NOW = 1_800_000_000_000;
let n = 0;
const fileOf = () => join(dir, `snapshot-${++n}.sqlite`);
const token = (name: string): TokenRecord => ({
  idHash: (++n).toString(16).padStart(64, '0'),
  name,
  scopes: ['acme/**'],
  expiresAt: NOW + 3_600_000,
  createdAt: NOW,
  createdBy: 'root',
});
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe('the read snapshot of a turn (sqliteStorage on a file it opened)', () => {
  it("sees another process's commit from the next turn, and never later", async () => {
    const file = fileOf();
    const storage = sqliteStorage(file);
    const record = token('shared');
    expect(await storage.insertToken(record, NOW)).toBe(true);
    await nextTurn();
    // Another process (here a connection outside every storage) deletes the row.
    const other = new Database(file);
    expect((await storage.findTokenByIdHash(record.idHash))?.name).toBe('shared');
    const deleted = other.prepare('DELETE FROM keyway_tokens WHERE id_hash = ?').run(record.idHash);
    expect(deleted.changes).toBe(1);
    // The same turn reads its snapshot; the next one what was committed.
    expect((await storage.findTokenByIdHash(record.idHash))?.name).toBe('shared');
    await nextTurn();
    expect(await storage.findTokenByIdHash(record.idHash)).toBeNull();
    other.close();
    await storage.close();
  });

  it('lets a write of another connection through while the snapshot is open (WAL)', async () => {
    const file = fileOf();
    const storage = sqliteStorage(file);
    expect(await storage.findLiveTokenByName('none', NOW)).toBeNull(); // the snapshot begins
    const other = new Database(file);
    other.pragma('busy_timeout = 0'); // a lock would fail at once, not wait
    const record = token('written');
    other
      .prepare(
        'INSERT INTO keyway_tokens (id_hash, name, scopes, expires_at, created_at, created_by) VALUES (?, ?, ?, ?, ?, ?)',
      )
      .run(record.idHash, record.name, '["acme/**"]', record.expiresAt, NOW, 'root');
    await nextTurn();
    expect((await storage.findLiveTokenByName('written', NOW))?.idHash).toBe(record.idHash);
    other.close();
    await storage.close();
  });

  it('shows a read its own storage’s write at once, and another storage’s of this process', async () => {
    const file = fileOf();
    const first = sqliteStorage(file);
    const second = sqliteStorage(file);
    const record = token('mine');
    // Both begin a snapshot in this turn, before the write.
    expect(await first.findLiveTokenByName('mine', NOW)).toBeNull();
    expect(await second.findLiveTokenByName('mine', NOW)).toBeNull();
    expect(await first.insertToken(record, NOW)).toBe(true);
    expect((await first.findLiveTokenByName('mine', NOW))?.idHash).toBe(record.idHash);
    expect((await second.findLiveTokenByName('mine', NOW))?.idHash).toBe(record.idHash);
    // A write answered like a read (a take, `RETURNING`) is a write too.
    expect(await second.deleteTokenTree('mine', NOW)).toBe(true);
    expect(await first.findLiveTokenByName('mine', NOW)).toBeNull();
    await first.close();
    await second.close();
  });

  it('leaves a database given to it without a snapshot: its owner begins transactions of its own', async () => {
    const file = fileOf();
    await sqliteStorage(file).close();
    const db = new Database(file);
    const storage = sqliteStorage(db);
    expect(await storage.findLiveTokenByName('none', NOW)).toBeNull();
    expect(db.inTransaction).toBe(false);
    // The owner's own transaction in the same turn: none of the storage's is open.
    const changes = db.transaction(() => db.prepare('DELETE FROM keyway_tokens').run().changes)();
    expect(changes).toBe(0);
    await storage.close();
    db.close();
  });

  it('commits the snapshot at the end of the turn, or when the storage closes', async () => {
    const file = fileOf();
    const storage = sqliteStorage(file);
    expect(await storage.findLiveTokenByName('none', NOW)).toBeNull();
    expect(storage.database.inTransaction).toBe(true);
    await nextTurn();
    expect(storage.database.inTransaction).toBe(false);
    expect(await storage.findLiveTokenByName('none', NOW)).toBeNull();
    expect(storage.database.inTransaction).toBe(true);
    await storage.close();
    expect(storage.database.open).toBe(false);
    // Nothing was left behind: the file opens and writes at once.
    const again = sqliteStorage(file);
    expect(await again.insertToken(token('after'), NOW)).toBe(true);
    await again.close();
  });
});
