import type { Storage, TokenCheckRecord, TokenRecord } from '@keyway/core/storage';
import { describe, expect, it } from 'vitest';
import type { CaseContext } from './conformance.js';

const NOW = Date.UTC(2026, 10, 21, 9, 30, 0, 0);
const HOUR = 3_600_000;

let counter = 0;

/** A token record with a unique id hash; live for an hour from NOW unless overridden. */
export function tokenRecord(name: string, overrides: Partial<TokenRecord> = {}): TokenRecord {
  counter++;
  return {
    idHash: counter.toString(16).padStart(64, '0'),
    name,
    scopes: ['acme/**'],
    expiresAt: NOW + HOUR,
    createdAt: NOW,
    createdBy: 'root',
    ...overrides,
  };
}

/** What a token check reads of a lookup's answer; a storage may answer the whole record. */
const checked = (found: TokenCheckRecord | null) =>
  found === null ? null : { name: found.name, scopes: found.scopes, expiresAt: found.expiresAt };

async function insertAll(storage: Storage, records: TokenRecord[]): Promise<void> {
  for (const record of records) expect(await storage.insertToken(record, NOW)).toBe(true);
}

async function liveNames(storage: Storage, now = NOW): Promise<string[]> {
  const records = await storage.listLiveTokens({ limit: 1000, now });
  return records.map((record) => record.name);
}

export function tokenStorageCases({ open, connectAgain }: CaseContext): void {
  describe('broker tokens', () => {
    it('stores every field of a token record exactly and finds it by id hash', async () => {
      const storage = await open();
      const record = tokenRecord('alice.bot-1_x', {
        scopes: ['acme/café/**', 'acme/😀/**', 'zeta/**'],
        expiresAt: NOW + 2_592_000_000,
        createdAt: NOW + 1,
        createdBy: 'token:alice',
      });
      expect(await storage.insertToken(record, NOW)).toBe(true);
      expect(await storage.findTokenByIdHash(record.idHash)).toEqual(record);
      expect(await storage.findLiveTokenByName('alice.bot-1_x', NOW)).toEqual(record);
    });

    it("keeps a token's audience, absent where it was absent, in every lookup and a tree update", async () => {
      const storage = await open();
      const bound = tokenRecord('alice.signin-g1', {
        scopes: ['acme/users/alice/linear/**'],
        audience: 'mcp/acme/users/alice/linear',
      });
      const plain = tokenRecord('alice');
      await insertAll(storage, [plain, bound]);
      expect(await storage.findTokenByIdHash(bound.idHash)).toEqual(bound);
      expect(await storage.findLiveTokenByName('alice.signin-g1', NOW)).toEqual(bound);
      expect(await storage.findTokenByIdHash(plain.idHash)).not.toHaveProperty('audience');
      const fast = storage.fastPaths;
      const sync = fast?.findTokenByIdHashSync;
      const check = fast?.findTokenCheckByIdHash;
      for (const lookup of [sync, check]) {
        if (lookup === undefined) continue;
        expect((await lookup(bound.idHash))?.audience).toBe('mcp/acme/users/alice/linear');
        expect(await lookup(plain.idHash)).not.toHaveProperty('audience');
      }
      // Narrowing the tree rewrites its records: the audience stays what it was.
      expect(
        await storage.updateTokenTree('alice', NOW, (tree) => ({
          update: tree.map((record) => ({ ...record, expiresAt: NOW + 60_000 })),
          delete: [],
        })),
      ).toBe(true);
      expect(await storage.findTokenByIdHash(bound.idHash)).toEqual({
        ...bound,
        expiresAt: NOW + 60_000,
      });
      expect(await storage.findTokenByIdHash(plain.idHash)).not.toHaveProperty('audience');
    });

    it("keeps a token's tool globs, in order, absent where they were absent, in every lookup", async () => {
      const storage = await open();
      const limited = tokenRecord('alice.agent', {
        scopes: ['acme/users/alice/**'],
        tools: ['linear__get_*', 'notion__search', 'github__*'],
      });
      const empty = tokenRecord('alice.none', { tools: [] });
      const plain = tokenRecord('alice');
      await insertAll(storage, [plain, limited, empty]);
      expect(await storage.findTokenByIdHash(limited.idHash)).toEqual(limited);
      expect(await storage.findLiveTokenByName('alice.agent', NOW)).toEqual(limited);
      // An empty list is a token that may call no tool: not the same as none at all.
      expect((await storage.findTokenByIdHash(empty.idHash))?.tools).toEqual([]);
      expect(await storage.findTokenByIdHash(plain.idHash)).not.toHaveProperty('tools');
      const fast = storage.fastPaths;
      for (const lookup of [fast?.findTokenByIdHashSync, fast?.findTokenCheckByIdHash]) {
        if (lookup === undefined) continue;
        expect((await lookup(limited.idHash))?.tools).toEqual([
          'linear__get_*',
          'notion__search',
          'github__*',
        ]);
        expect((await lookup(empty.idHash))?.tools).toEqual([]);
        expect(await lookup(plain.idHash)).not.toHaveProperty('tools');
      }
    });

    // The token check's two optional lookups, each held to findTokenByIdHash where offered.
    const lookups = [
      {
        title: 'synchronous lookup',
        prefix: 'sync',
        // Optional: a storage that reads asynchronously only has none.
        of: (storage: Storage) => {
          const sync = storage.fastPaths?.findTokenByIdHashSync;
          if (sync === undefined) return undefined;
          return async (idHash: string) => {
            const found = sync(idHash);
            expect(found).not.toBeInstanceOf(Promise);
            return found;
          };
        },
      },
      {
        title: "check's asynchronous lookup",
        prefix: 'check',
        // Optional: core reads the whole record without it.
        of: (storage: Storage) => storage.fastPaths?.findTokenCheckByIdHash,
      },
    ];
    for (const { title, prefix, of } of lookups) {
      it(`answers the ${title}, where offered, with findTokenByIdHash's name, scopes and expiry`, async () => {
        const storage = await open();
        const record = tokenRecord(`${prefix}.reader`, { scopes: ['acme/**'], expiresAt: NOW + 1 });
        const expired = tokenRecord(`${prefix}.gone`, { expiresAt: NOW - 1 });
        await insertAll(storage, [record, expired]);
        const lookup = of(storage);
        if (lookup === undefined) return;
        for (const idHash of [record.idHash, expired.idHash, 'e'.repeat(64)]) {
          expect(checked(await lookup(idHash))).toEqual(
            checked(await storage.findTokenByIdHash(idHash)),
          );
        }
        expect(checked(await lookup(record.idHash))).toEqual({
          name: `${prefix}.reader`,
          scopes: ['acme/**'],
          expiresAt: NOW + 1,
        });
        expect(checked(await lookup(expired.idHash))).toEqual({
          name: `${prefix}.gone`,
          scopes: ['acme/**'],
          expiresAt: NOW - 1,
        });
        expect(await lookup('e'.repeat(64))).toBeNull();
        const found = (await lookup(record.idHash)) as TokenCheckRecord;
        found.scopes.push('other/**');
        expect(checked(await lookup(record.idHash))?.scopes).toEqual(['acme/**']);
        expect(await storage.findTokenByIdHash(record.idHash)).toEqual(record);
      });
    }

    it('answers null for an unknown id hash or name', async () => {
      const storage = await open();
      expect(await storage.findTokenByIdHash('f'.repeat(64))).toBeNull();
      expect(await storage.findLiveTokenByName('nobody', NOW)).toBeNull();
    });

    it('returns copies: changing a returned record changes nothing stored', async () => {
      const storage = await open();
      const record = tokenRecord('alice');
      await insertAll(storage, [record]);
      const found = (await storage.findTokenByIdHash(record.idHash)) as TokenRecord;
      found.scopes.push('other/**');
      found.expiresAt = 0;
      expect(await storage.findTokenByIdHash(record.idHash)).toEqual(record);
    });

    it('refuses to insert a name that a live token holds', async () => {
      const storage = await open();
      const first = tokenRecord('alice');
      const second = tokenRecord('alice');
      expect(await storage.insertToken(first, NOW)).toBe(true);
      expect(await storage.insertToken(second, NOW)).toBe(false);
      expect(await storage.findTokenByIdHash(second.idHash)).toBeNull();
      expect(await storage.findLiveTokenByName('alice', NOW)).toEqual(first);
    });

    it('treats names as case-sensitive', async () => {
      const storage = await open();
      await insertAll(storage, [tokenRecord('alice'), tokenRecord('Alice')]);
      expect(await liveNames(storage)).toEqual(['Alice', 'alice']);
    });

    it('replaces an expired token of the same name on insert', async () => {
      const storage = await open();
      const old = tokenRecord('alice', { expiresAt: NOW - 1 });
      expect(await storage.insertToken(old, NOW - 2 * HOUR)).toBe(true);
      const fresh = tokenRecord('alice');
      expect(await storage.insertToken(fresh, NOW)).toBe(true);
      expect(await storage.findTokenByIdHash(old.idHash)).toBeNull();
      expect(await storage.findLiveTokenByName('alice', NOW)).toEqual(fresh);
    });

    it('counts a token as expired at its expiry instant', async () => {
      const storage = await open();
      const record = tokenRecord('alice', { expiresAt: NOW });
      expect(await storage.insertToken(record, NOW - 1)).toBe(true);
      expect(await storage.findLiveTokenByName('alice', NOW - 1)).toEqual(record);
      expect(await storage.findLiveTokenByName('alice', NOW)).toBeNull();
      // The hot path still finds it, so the caller can say "expired" rather than "unknown".
      expect(await storage.findTokenByIdHash(record.idHash)).toEqual(record);
      expect(await storage.insertToken(tokenRecord('alice'), NOW)).toBe(true);
    });

    it('lets exactly one of 20 concurrent inserts of one name win', async () => {
      const storage = await open();
      const other = await connectAgain(storage);
      const records = Array.from({ length: 20 }, () => tokenRecord('race'));
      const results = await Promise.all(
        records.map((record, i) => (i % 2 === 0 ? storage : other).insertToken(record, NOW)),
      );
      expect(results.filter(Boolean)).toHaveLength(1);
      const winner = records[results.indexOf(true)] as TokenRecord;
      expect(await storage.findLiveTokenByName('race', NOW)).toEqual(winner);
      expect(await other.findLiveTokenByName('race', NOW)).toEqual(winner);
    });

    it('sees a write through one handle from another handle at once', async () => {
      const storage = await open();
      const other = await connectAgain(storage);
      const record = tokenRecord('alice');
      await insertAll(storage, [record]);
      expect(await other.findTokenByIdHash(record.idHash)).toEqual(record);
      expect(await other.deleteTokenTree('alice', NOW)).toBe(true);
      expect(await storage.findTokenByIdHash(record.idHash)).toBeNull();
    });

    describe('listLiveTokens()', () => {
      const names = ['b', 'a-b', 'a', 'a.b', 'a_b', 'A', '0', 'a.b.c', 'a.a', 'ab'];

      it('lists live tokens in code point order, without expired ones', async () => {
        const storage = await open();
        await insertAll(
          storage,
          names.map((name) => tokenRecord(name)),
        );
        await insertAll(storage, [tokenRecord('expired', { expiresAt: NOW })]);
        expect(await liveNames(storage)).toEqual([
          '0',
          'A',
          'a',
          'a-b',
          'a.a',
          'a.b',
          'a.b.c',
          'a_b',
          'ab',
          'b',
        ]);
      });

      it('pages with limit and the last name seen', async () => {
        const storage = await open();
        await insertAll(
          storage,
          names.map((name) => tokenRecord(name)),
        );
        const first = await storage.listLiveTokens({ limit: 3, now: NOW });
        expect(first.map((r) => r.name)).toEqual(['0', 'A', 'a']);
        const second = await storage.listLiveTokens({ after: 'a', limit: 3, now: NOW });
        expect(second.map((r) => r.name)).toEqual(['a-b', 'a.a', 'a.b']);
        const last = await storage.listLiveTokens({ after: 'ab', limit: 3, now: NOW });
        expect(last.map((r) => r.name)).toEqual(['b']);
      });

      it('lists a tree: the token and its dotted descendants, never a name that merely shares a prefix', async () => {
        const storage = await open();
        await insertAll(
          storage,
          ['alice', 'alice.bot', 'alice.bot.x', 'alice2', 'alice-x', 'alic', 'bob', 'alice_'].map(
            (name) => tokenRecord(name),
          ),
        );
        const tree = await storage.listLiveTokens({ treeOf: 'alice', limit: 100, now: NOW });
        expect(tree.map((r) => r.name)).toEqual(['alice', 'alice.bot', 'alice.bot.x']);
        const page = await storage.listLiveTokens({
          treeOf: 'alice',
          after: 'alice',
          limit: 1,
          now: NOW,
        });
        expect(page.map((r) => r.name)).toEqual(['alice.bot']);
      });

      it('treats LIKE wildcards in names literally', async () => {
        const storage = await open();
        await insertAll(
          storage,
          ['a_', 'a_.x', 'ab.x', 'aX.x'].map((name) => tokenRecord(name)),
        );
        const tree = await storage.listLiveTokens({ treeOf: 'a_', limit: 100, now: NOW });
        expect(tree.map((r) => r.name)).toEqual(['a_', 'a_.x']);
      });
    });

    describe('updateTokenTree()', () => {
      it('passes the live tree, root first, and writes every change', async () => {
        const storage = await open();
        const records = ['alice', 'alice.bot', 'alice.bot.x', 'alice2'].map((name) =>
          tokenRecord(name),
        );
        await insertAll(storage, records);
        await insertAll(storage, [tokenRecord('alice.old', { expiresAt: NOW })]);
        const [alice, bot, botX, alice2] = records as [
          TokenRecord,
          TokenRecord,
          TokenRecord,
          TokenRecord,
        ];
        let seen: string[] = [];
        const narrowedAlice = { ...alice, scopes: ['acme/a/**'], expiresAt: NOW + 60_000 };
        const found = await storage.updateTokenTree('alice', NOW, (tree) => {
          seen = tree.map((record) => record.name);
          return { update: [narrowedAlice], delete: [botX.idHash] };
        });
        expect(found).toBe(true);
        expect(seen).toEqual(['alice', 'alice.bot', 'alice.bot.x']);
        expect(await storage.findTokenByIdHash(alice.idHash)).toEqual(narrowedAlice);
        expect(await storage.findTokenByIdHash(bot.idHash)).toEqual(bot);
        expect(await storage.findTokenByIdHash(botX.idHash)).toBeNull();
        expect(await storage.findTokenByIdHash(alice2.idHash)).toEqual(alice2);
      });

      it('writes nothing when the plan throws', async () => {
        const storage = await open();
        const records = ['alice', 'alice.bot', 'alice.bot.x'].map((name) => tokenRecord(name));
        await insertAll(storage, records);
        const failure = new Error('plan refused');
        await expect(
          storage.updateTokenTree('alice', NOW, () => {
            throw failure;
          }),
        ).rejects.toBe(failure);
        for (const record of records) {
          expect(await storage.findTokenByIdHash(record.idHash)).toEqual(record);
        }
      });

      it('rolls back every write when one write of the plan fails', async () => {
        const storage = await open();
        const [alice, bot, bob] = ['alice', 'alice.bot', 'bob'].map((name) =>
          tokenRecord(name),
        ) as [TokenRecord, TokenRecord, TokenRecord];
        await insertAll(storage, [alice, bot, bob]);
        // The first write is fine; the second takes a name a live token holds and must fail.
        await expect(
          storage.updateTokenTree('alice', NOW, () => ({
            update: [
              { ...alice, scopes: ['narrow/**'] },
              { ...bot, name: 'bob' },
            ],
            delete: [],
          })),
        ).rejects.toThrow();
        expect(await storage.findTokenByIdHash(alice.idHash)).toEqual(alice);
        expect(await storage.findTokenByIdHash(bot.idHash)).toEqual(bot);
        expect(await storage.findTokenByIdHash(bob.idHash)).toEqual(bob);
      });

      it('answers false without calling the plan when no live token has the name', async () => {
        const storage = await open();
        await insertAll(storage, [
          tokenRecord('alice', { expiresAt: NOW }),
          tokenRecord('alice.bot'),
        ]);
        let called = false;
        const found = await storage.updateTokenTree('alice', NOW, () => {
          called = true;
          return { update: [], delete: [] };
        });
        expect(found).toBe(false);
        expect(called).toBe(false);
      });

      it('serializes concurrent tree updates: no update is lost', async () => {
        const storage = await open();
        const other = await connectAgain(storage);
        const alice = tokenRecord('alice', { scopes: ['a/**'] });
        await insertAll(storage, [alice]);
        // Each update appends one scope to what it read; a lost update drops a scope.
        const extra = Array.from({ length: 10 }, (_, i) => `s${i}/**`);
        await Promise.all(
          extra.map((scope, i) =>
            (i % 2 === 0 ? storage : other).updateTokenTree('alice', NOW, ([root]) => ({
              update: [
                { ...(root as TokenRecord), scopes: [...(root as TokenRecord).scopes, scope] },
              ],
              delete: [],
            })),
          ),
        );
        const stored = (await storage.findTokenByIdHash(alice.idHash)) as TokenRecord;
        expect([...stored.scopes].sort()).toEqual(['a/**', ...extra].sort());
      });
    });

    describe('deleteTokenTree()', () => {
      it('deletes the token and every descendant, live or expired, and nothing else', async () => {
        const storage = await open();
        const keep = ['alice2', 'alice-x', 'alic', 'bob'].map((name) => tokenRecord(name));
        const gone = ['alice', 'alice.bot', 'alice.bot.x'].map((name) => tokenRecord(name));
        const expiredChild = tokenRecord('alice.old', { expiresAt: NOW });
        await insertAll(storage, [...keep, ...gone, expiredChild]);
        expect(await storage.deleteTokenTree('alice', NOW)).toBe(true);
        for (const record of [...gone, expiredChild]) {
          expect(await storage.findTokenByIdHash(record.idHash)).toBeNull();
        }
        for (const record of keep) {
          expect(await storage.findTokenByIdHash(record.idHash)).toEqual(record);
        }
      });

      it('answers false and deletes nothing when no live token has the name', async () => {
        const storage = await open();
        const expiredRoot = tokenRecord('alice', { expiresAt: NOW });
        const child = tokenRecord('alice.bot');
        await insertAll(storage, [expiredRoot, child]);
        expect(await storage.deleteTokenTree('alice', NOW)).toBe(false);
        expect(await storage.findTokenByIdHash(expiredRoot.idHash)).toEqual(expiredRoot);
        expect(await storage.findTokenByIdHash(child.idHash)).toEqual(child);
        expect(await storage.deleteTokenTree('nobody', NOW)).toBe(false);
      });
    });
  });
}
