import type { PendingAuthorizationRecord, VaultWrite } from '@keyway/core/storage';
import { describe, expect, it } from 'vitest';
import type { CaseContext } from './conformance.js';
import { ORDER_KEYS, ORDERED_KEYS } from './path-record-cases.js';
import { tokenRecord } from './token-cases.js';

const NOW = Date.UTC(2026, 10, 21, 9, 30, 0, 0);
const MINUTE = 60_000;

let pendingCounter = 0;

export function pendingRecord(
  overrides: Partial<PendingAuthorizationRecord> = {},
): PendingAuthorizationRecord {
  pendingCounter++;
  return {
    stateHash: `${pendingCounter.toString(16).padStart(8, '0')}${'e'.repeat(56)}`,
    connectionId: 'acme/users/alice/linear',
    providerId: 'linear',
    state: { verifier: 'encrypted-envelope', redirect_to: null, scopes: ['read'] },
    expiresAt: NOW + 10 * MINUTE,
    createdAt: NOW,
    ...overrides,
  };
}

const write = (
  kind: string,
  key: string,
  ciphertext = `ct:${kind}:${key}`,
  keyId = 'k1',
): VaultWrite => ({
  kind,
  key,
  ciphertext,
  keyId,
});

export function pendingAuthorizationCases({ open, connectAgain, readBehind }: CaseContext): void {
  describe('pending authorizations', () => {
    it('gives the record to the first take and null to every later one', async () => {
      const storage = await open();
      const record = pendingRecord();
      await storage.insertPendingAuthorization(record);
      expect(await storage.takePendingAuthorization(record.stateHash, NOW)).toEqual(record);
      expect(await storage.takePendingAuthorization(record.stateHash, NOW)).toBeNull();
      const rows = await readBehind(storage)?.rows('pending_authorizations');
      if (rows !== undefined) expect(rows).toEqual([]);
    });

    it('never returns an expired record, not even at its expiry instant', async () => {
      const storage = await open();
      const record = pendingRecord({ expiresAt: NOW });
      await storage.insertPendingAuthorization(record);
      expect(await storage.takePendingAuthorization(record.stateHash, NOW)).toBeNull();
      expect(await storage.takePendingAuthorization(record.stateHash, NOW - 1)).toEqual(record);
    });

    it('answers null for an unknown state hash', async () => {
      const storage = await open();
      expect(await storage.takePendingAuthorization('0'.repeat(64), NOW)).toBeNull();
    });

    it('gives one of 20 concurrent takes the record, across connections', async () => {
      const storage = await open();
      const other = await connectAgain(storage);
      const record = pendingRecord();
      await storage.insertPendingAuthorization(record);
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          (i % 2 ? other : storage).takePendingAuthorization(record.stateHash, NOW),
        ),
      );
      expect(results.filter((result) => result !== null)).toEqual([record]);
    });

    it('refuses a second record with the same state hash', async () => {
      const storage = await open();
      const record = pendingRecord();
      await storage.insertPendingAuthorization(record);
      await expect(
        storage.insertPendingAuthorization({ ...record, connectionId: 'x' }),
      ).rejects.toThrow();
      expect(await storage.takePendingAuthorization(record.stateHash, NOW)).toEqual(record);
    });
  });
}

export function vaultStorageCases({ open, connectAgain, readBehind }: CaseContext): void {
  describe('vault entries', () => {
    it('creates an entry at version 1 and adds one per put, keeping its creation time', async () => {
      const storage = await open();
      const first = await storage.putVaultEntry(write('secret', 'acme/a', 'v1'), NOW);
      expect(first).toEqual({
        created: true,
        entry: {
          kind: 'secret',
          key: 'acme/a',
          ciphertext: 'v1',
          keyId: 'k1',
          version: 1,
          createdAt: NOW,
          updatedAt: NOW,
        },
      });
      const second = await storage.putVaultEntry(write('secret', 'acme/a', 'v2', 'k2'), NOW + 5);
      expect(second).toEqual({
        created: false,
        entry: {
          kind: 'secret',
          key: 'acme/a',
          ciphertext: 'v2',
          keyId: 'k2',
          version: 2,
          createdAt: NOW,
          updatedAt: NOW + 5,
        },
      });
      expect(await storage.getVaultEntry('secret', 'acme/a')).toEqual(second.entry);
    });

    it('keeps kinds apart: one key can exist in several kinds', async () => {
      const storage = await open();
      await storage.putVaultEntry(write('secret', 'acme/a', 'user'), NOW);
      await storage.putVaultEntry(write('connection_tokens', 'acme/a', 'internal'), NOW);
      expect((await storage.getVaultEntry('secret', 'acme/a'))?.ciphertext).toBe('user');
      expect((await storage.getVaultEntry('connection_tokens', 'acme/a'))?.ciphertext).toBe(
        'internal',
      );
      expect(await storage.deleteVaultEntry('secret', 'acme/a')).toBe(true);
      expect(await storage.deleteVaultEntry('secret', 'acme/a')).toBe(false);
      expect(await storage.getVaultEntry('secret', 'acme/a')).toBeNull();
      expect(await storage.getVaultEntry('connection_tokens', 'acme/a')).not.toBeNull();
    });

    it('gives each of 10 concurrent puts a distinct version', async () => {
      const storage = await open();
      const other = await connectAgain(storage);
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          (i % 2 ? other : storage).putVaultEntry(write('secret', 'race', `v${i}`), NOW),
        ),
      );
      expect(results.map((r) => r.entry.version).sort((a, b) => a - b)).toEqual([
        1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
      ]);
      expect(results.filter((r) => r.created)).toHaveLength(1);
    });

    it('lists one kind by key in code point order, by subtree and page', async () => {
      const storage = await open();
      for (const key of ORDER_KEYS) await storage.putVaultEntry(write('secret', key), NOW);
      await storage.putVaultEntry(write('other', 'a/zzz'), NOW);
      const keys = async (query: Parameters<typeof storage.listVaultEntries>[0]) =>
        (await storage.listVaultEntries(query)).map((entry) => entry.key);
      expect(await keys({ kind: 'secret', limit: 100 })).toEqual(ORDERED_KEYS);
      expect(await keys({ kind: 'secret', within: ['a/b'], limit: 100 })).toEqual(['a/b', 'a/b/c']);
      expect(await keys({ kind: 'secret', within: ['a'], after: 'a/b', limit: 1 })).toEqual([
        'a/b/c',
      ]);
    });

    const rewrap =
      'lists what a re-wrap still has to move, in (kind, key) order, and swaps ciphertext by compare-and-set';
    it(rewrap, async () => {
      const storage = await open();
      await storage.putVaultEntry(write('secret', 'b', 'old-b', 'old'), NOW);
      await storage.putVaultEntry(write('secret', 'a', 'old-a', 'old'), NOW);
      await storage.putVaultEntry(write('internal', 'z', 'old-z', 'old'), NOW);
      await storage.putVaultEntry(write('secret', 'c', 'new-c', 'new'), NOW);
      const page = await storage.listVaultEntriesNotUnderKey('new', null, 2);
      expect(page.map((e) => `${e.kind}:${e.key}`)).toEqual(['internal:z', 'secret:a']);
      const rest = await storage.listVaultEntriesNotUnderKey(
        'new',
        { kind: 'secret', key: 'a' },
        10,
      );
      expect(rest.map((e) => `${e.kind}:${e.key}`)).toEqual(['secret:b']);

      expect(
        await storage.replaceVaultCiphertext('secret', 'a', 'stale', {
          ciphertext: 'x',
          keyId: 'new',
        }),
      ).toBe(false);
      expect(
        await storage.replaceVaultCiphertext('secret', 'a', 'old-a', {
          ciphertext: 'new-a',
          keyId: 'new',
        }),
      ).toBe(true);
      expect(await storage.getVaultEntry('secret', 'a')).toEqual({
        kind: 'secret',
        key: 'a',
        ciphertext: 'new-a',
        keyId: 'new',
        version: 1,
        createdAt: NOW,
        updatedAt: NOW,
      });
      const rows = await readBehind(storage)?.rows('vault_entries');
      if (rows !== undefined) {
        expect(rows.map((row) => row.ciphertext).sort()).toEqual([
          'new-a',
          'new-c',
          'old-b',
          'old-z',
        ]);
      }
    });
  });
}

export function leaseStorageCases({ open, connectAgain }: CaseContext): void {
  describe('leases', () => {
    it('holds one owner at a time, lets the owner extend, and frees on expiry or release', async () => {
      const storage = await open();
      expect(await storage.acquireLease('conn/a', 'one', NOW + MINUTE, NOW)).toBe(true);
      expect(await storage.acquireLease('conn/a', 'two', NOW + MINUTE, NOW + 1)).toBe(false);
      expect(await storage.acquireLease('conn/a', 'one', NOW + 2 * MINUTE, NOW + 1)).toBe(true);
      // Still held by "one" until NOW + 2 minutes.
      expect(await storage.acquireLease('conn/a', 'two', NOW + 3 * MINUTE, NOW + MINUTE)).toBe(
        false,
      );
      expect(await storage.acquireLease('conn/a', 'two', NOW + 3 * MINUTE, NOW + 2 * MINUTE)).toBe(
        true,
      );
      await storage.releaseLease('conn/a', 'one'); // not the holder: no effect
      expect(
        await storage.acquireLease('conn/a', 'three', NOW + 4 * MINUTE, NOW + 2 * MINUTE),
      ).toBe(false);
      await storage.releaseLease('conn/a', 'two');
      expect(
        await storage.acquireLease('conn/a', 'three', NOW + 4 * MINUTE, NOW + 2 * MINUTE),
      ).toBe(true);
      expect(await storage.acquireLease('conn/b', 'two', NOW + MINUTE, NOW)).toBe(true);
    });

    it('gives a free lease to exactly one of 20 concurrent callers', async () => {
      const storage = await open();
      const other = await connectAgain(storage);
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          (i % 2 ? other : storage).acquireLease('conn/a', `owner-${i}`, NOW + MINUTE, NOW),
        ),
      );
      expect(results.filter(Boolean)).toHaveLength(1);
    });
  });
}

export function counterStorageCases({ open, connectAgain }: CaseContext): void {
  describe('counters', () => {
    it('counts within a window, keeps the window of a live counter, and starts anew after it', async () => {
      const storage = await open();
      expect(await storage.getCounter('auth:192.0.2.1', NOW)).toBeNull();
      expect(await storage.incrementCounter('auth:192.0.2.1', NOW + MINUTE, NOW)).toEqual({
        count: 1,
        expiresAt: NOW + MINUTE,
      });
      // A later window end does not move a live counter's window.
      expect(await storage.incrementCounter('auth:192.0.2.1', NOW + 2 * MINUTE, NOW + 10)).toEqual({
        count: 2,
        expiresAt: NOW + MINUTE,
      });
      expect(await storage.getCounter('auth:192.0.2.1', NOW + MINUTE - 1)).toEqual({
        count: 2,
        expiresAt: NOW + MINUTE,
      });
      expect(await storage.getCounter('auth:192.0.2.1', NOW + MINUTE)).toBeNull();
      expect(
        await storage.incrementCounter('auth:192.0.2.1', NOW + 3 * MINUTE, NOW + MINUTE),
      ).toEqual({ count: 1, expiresAt: NOW + 3 * MINUTE });
      expect(await storage.getCounter('auth:192.0.2.2', NOW)).toBeNull();
      expect(await storage.incrementCounter('auth:192.0.2.2', NOW + MINUTE, NOW)).toEqual({
        count: 1,
        expiresAt: NOW + MINUTE,
      });
    });

    it('gives each of 20 concurrent increments its own count', async () => {
      const storage = await open();
      const other = await connectAgain(storage);
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          (i % 2 ? other : storage).incrementCounter('mint:ci', NOW + MINUTE, NOW),
        ),
      );
      expect(results.map((r) => r.count).sort((a, b) => a - b)).toEqual(
        Array.from({ length: 20 }, (_, i) => i + 1),
      );
      expect(await storage.getCounter('mint:ci', NOW)).toEqual({
        count: 20,
        expiresAt: NOW + MINUTE,
      });
    });
  });
}

export function maintenanceCases({ open, connectAgain, readBehind }: CaseContext): void {
  describe('purgeExpired()', () => {
    it('deletes expired tokens, pending authorizations, leases and counters, and nothing live', async () => {
      const storage = await open();
      const live = tokenRecord('live');
      const dead = tokenRecord('dead', { expiresAt: NOW });
      await storage.insertToken(live, NOW - MINUTE);
      await storage.insertToken(dead, NOW - MINUTE);
      const livePending = pendingRecord();
      await storage.insertPendingAuthorization(livePending);
      await storage.insertPendingAuthorization(pendingRecord({ expiresAt: NOW - 1 }));
      await storage.acquireLease('old', 'x', NOW - 1, NOW - MINUTE);
      await storage.acquireLease('new', 'x', NOW + 1, NOW - MINUTE);
      await storage.incrementCounter('auth:old', NOW, NOW - MINUTE);
      await storage.incrementCounter('auth:new', NOW + 1, NOW - MINUTE);

      expect(await storage.purgeExpired(NOW, 100)).toBe(4);
      expect(await storage.findTokenByIdHash(dead.idHash)).toBeNull();
      expect(await storage.findTokenByIdHash(live.idHash)).toEqual(live);
      expect(await storage.takePendingAuthorization(livePending.stateHash, NOW)).toEqual(
        livePending,
      );
      // The purged lease is free; the live one is still held.
      expect(await storage.acquireLease('new', 'y', NOW + MINUTE, NOW)).toBe(false);
      expect(await storage.purgeExpired(NOW, 100)).toBe(0);
      const raw = readBehind(storage);
      if (raw !== null) {
        expect((await raw.rows('tokens')).map((row) => row.name)).toEqual(['live']);
        expect((await raw.rows('leases')).map((row) => row.key)).toEqual(['new']);
        expect((await raw.rows('counters')).map((row) => row.key)).toEqual(['auth:new']);
      }
    });

    it('deletes at most the limit per kind per call', async () => {
      const storage = await open();
      for (let i = 0; i < 5; i++) {
        await storage.insertToken(tokenRecord(`t${i}`, { expiresAt: NOW - 1 }), NOW - MINUTE);
      }
      expect(await storage.purgeExpired(NOW, 2)).toBe(2);
      expect(await storage.purgeExpired(NOW, 2)).toBe(2);
      expect(await storage.purgeExpired(NOW, 2)).toBe(1);
      expect(await storage.purgeExpired(NOW, 2)).toBe(0);
    });
  });

  describe('health()', () => {
    it('names its engine and, with a schema (what a store read behind has), holds the one it needs', async () => {
      const storage = await open();
      const health = await storage.health();
      expect(health.engine).toMatch(/^[a-z][a-z0-9_-]*$/);
      // A store with tables (read behind by the suite) has a schema; memory has none.
      expect(health.schema === null).toBe(readBehind(storage) === null);
      expect(health.schema?.version ?? 0).toBe(health.schema?.expected ?? 0);
      // A second handle on the same database says the same.
      expect(await (await connectAgain(storage)).health()).toEqual(health);
    });
  });
}
