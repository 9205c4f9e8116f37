import { memoryStorage } from '@keyway/store-memory';
import { describe, expect, it } from 'vitest';
import { readWithTokens, readWithTokensNow } from '../../src/connections/hand-out.js';
import type { Storage, StorageFastPaths } from '../../src/storage/contract.js';

const NOW = Date.UTC(2026, 10, 29, 12);
const ID = 'acme/alice/linear';

/** A memory storage holding one connection with its tokens, offering `keep` of its fast paths. */
async function storageWith(keep: (keyof StorageFastPaths)[]): Promise<{
  storage: Storage;
  calls: string[];
}> {
  const inner = memoryStorage();
  expect(
    await inner.insertConnection(
      {
        id: ID,
        providerId: 'linear',
        status: 'active',
        state: { n: 1 },
        version: 1,
        createdAt: NOW,
        updatedAt: NOW,
      },
      { put: [{ kind: 'connection_tokens', key: ID, ciphertext: 'sealed', keyId: 'k1' }] },
    ),
  ).toBe(true);
  const calls: string[] = [];
  const all = inner.fastPaths ?? {};
  const fastPaths: Record<string, unknown> = {};
  for (const name of keep) {
    const path = all[name] as ((...args: unknown[]) => unknown) | undefined;
    if (path === undefined) throw new Error(`memory storage offers no ${name}`);
    fastPaths[name] = (...args: unknown[]) => {
      calls.push(name);
      return path(...args);
    };
  }
  return { storage: { ...inner, fastPaths }, calls };
}

/** What each read answers of the one connection, and which fast path answered it. */
async function readsOf(keep: (keyof StorageFastPaths)[]) {
  const { storage, calls } = await storageWith(keep);
  const now = readWithTokensNow(storage, ID);
  const nowCalls = calls.splice(0);
  const promised = await readWithTokens(storage, ID);
  const promisedCalls = calls.splice(0);
  return {
    now:
      now === undefined ? undefined : { ciphertext: now?.vaultEntry?.ciphertext, calls: nowCalls },
    promised: { ciphertext: promised?.vaultEntry?.ciphertext, calls: promisedCalls },
    missing: [readWithTokensNow(storage, 'acme/none'), await readWithTokens(storage, 'acme/none')],
  };
}

describe("a connection's tokens read for their use (the gateway's, the proxy's, the probe's)", () => {
  it('reads with readWithTokens(Sync), never the hand-out read, where the storage offers both', async () => {
    const reads = await readsOf([
      'readWithTokens',
      'readWithTokensSync',
      'readForHandOut',
      'readForHandOutSync',
    ]);
    expect(reads).toEqual({
      now: { ciphertext: 'sealed', calls: ['readWithTokensSync'] },
      promised: { ciphertext: 'sealed', calls: ['readWithTokens'] },
      missing: [null, null],
    });
  });

  it("falls back to a hand-out's joined read for a storage written before readWithTokens", async () => {
    const reads = await readsOf(['readForHandOut', 'readForHandOutSync']);
    expect(reads).toEqual({
      now: { ciphertext: 'sealed', calls: ['readForHandOutSync'] },
      promised: { ciphertext: 'sealed', calls: ['readForHandOut'] },
      missing: [null, null],
    });
  });

  it('waits for a storage that offers no synchronous read', async () => {
    const reads = await readsOf(['readWithTokens']);
    expect(reads).toEqual({
      now: undefined,
      promised: { ciphertext: 'sealed', calls: ['readWithTokens'] },
      missing: [undefined, null],
    });
  });

  it('reads the connection alone without any joined read (its tokens read after)', async () => {
    const { storage, calls } = await storageWith([]);
    expect(readWithTokensNow(storage, ID)).toBeUndefined();
    const read = await readWithTokens(storage, ID);
    expect(read?.connection).toMatchObject({ id: ID, status: 'active', version: 1 });
    expect(read?.vaultEntry).toBeUndefined();
    expect(await readWithTokens(storage, 'acme/none')).toBeNull();
    expect(calls).toEqual([]);
  });

  it("calls an adapter's fast paths as its methods (`this` is its fastPaths)", async () => {
    const { storage: inner } = await storageWith([
      'readWithTokens',
      'readWithTokensSync',
      'readForHandOut',
      'readForHandOutSync',
    ]);
    const paths = inner.fastPaths as Required<StorageFastPaths>;
    /** Fast paths written before readWithTokens, as a class reaching its store through `this`. */
    class Older {
      readonly store = paths;
      readForHandOut(id: string, kind: string) {
        return this.store.readForHandOut(id, kind);
      }
      readForHandOutSync(id: string, kind: string) {
        return this.store.readForHandOutSync(id, kind);
      }
    }
    /** The same with readWithTokens. */
    class Newer extends Older {
      readWithTokens(id: string, kind: string) {
        return this.store.readWithTokens(id, kind);
      }
      readWithTokensSync(id: string, kind: string) {
        return this.store.readWithTokensSync(id, kind);
      }
    }
    for (const fastPaths of [new Newer(), new Older()]) {
      const storage = { ...inner, fastPaths };
      expect(readWithTokensNow(storage, ID)?.vaultEntry?.ciphertext).toBe('sealed');
      expect((await readWithTokens(storage, ID))?.vaultEntry?.ciphertext).toBe('sealed');
    }
  });
});
