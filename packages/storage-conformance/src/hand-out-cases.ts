import type { HandOutRead, Storage, TokensRead } from '@keyway/core/storage';
import { describe, expect, it } from 'vitest';
import type { CaseContext } from './conformance.js';
import { connectionRecord, providerRecord } from './path-record-cases.js';

const TOKENS_KIND = 'connection_tokens';

/** A joined read, as a promise. */
type Read = (id: string, kind: string) => Promise<HandOutRead | null>;

/** Each connection's provider and the `hand_out` member of that provider's state. */
const PROVIDERS: [providerId: string, handOut: unknown][] = [
  ['p/plain', undefined],
  ['p/inject', false],
  ['p/open', true],
  ['p/odd', 'x'],
];

/** What the three reads `readForHandOut` stands for answer, read one at a time. */
async function apart(storage: Storage, id: string, kind: string) {
  const connection = await storage.getConnection(id);
  if (connection === null) return null;
  return {
    connection,
    vaultEntry: await storage.getVaultEntry(kind, id),
    provider: await storage.getProvider(connection.providerId),
  };
}

/**
 * A storage holding the providers of {@link PROVIDERS} and six connections, with vault
 * entries of two kinds (`acme/b` has no tokens; `acme/e`'s provider does not exist).
 */
async function seeded(open: CaseContext['open']): Promise<Storage> {
  const storage = await open();
  for (const [id, handOut] of PROVIDERS) {
    const record = providerRecord(id);
    if (handOut !== undefined) record.state.hand_out = handOut;
    // What a remote server sent may hold a NUL: the member is read all the same.
    record.state.discovered = { note: 'a\u0000b', é: ['\u{1F600}'] };
    expect(await storage.insertProvider(record)).toBe(true);
  }
  // A member of the same name deeper in the state is not the provider's hand_out.
  const nested = providerRecord('p/nested');
  nested.state.nested = { hand_out: false };
  expect(await storage.insertProvider(nested)).toBe(true);
  const rows: [string, string][] = [
    ['acme/a', 'p/plain'],
    ['acme/b', 'p/inject'],
    ['acme/c', 'p/open'],
    ['acme/d', 'p/odd'],
    ['acme/e', 'p/none'],
    ['acme/f', 'p/nested'],
  ];
  for (const [id, providerId] of rows) {
    const vault = id === 'acme/b' ? [] : [{ kind: TOKENS_KIND, key: id, ciphertext: `t-${id}` }];
    const put = [...vault, { kind: 'internal', key: id, ciphertext: `i-${id}` }].map((write) => ({
      ...write,
      keyId: 'k1',
    }));
    expect(
      await storage.insertConnection(
        connectionRecord(id, { providerId, status: 'active', state: { n: id } }),
        { put },
      ),
    ).toBe(true);
  }
  return storage;
}

/**
 * A storage's joined read and its synchronous twin, each as a promise, the twin held to
 * answering a value, never a promise. Empty when it offers neither.
 */
function bothOf<T>(
  promised: ((id: string, kind: string) => Promise<T>) | undefined,
  sync: ((id: string, kind: string) => T) | undefined,
): ((id: string, kind: string) => Promise<T>)[] {
  const reads: ((id: string, kind: string) => Promise<T>)[] = [];
  if (promised !== undefined) reads.push(promised);
  if (sync !== undefined) {
    reads.push(async (id, kind) => {
      const answer = sync(id, kind);
      expect(answer).not.toBeInstanceOf(Promise);
      return answer;
    });
  }
  return reads;
}

/** A joined read's vault entries: of the kind asked, `null` where there is none of it. */
async function readsVaultEntries(
  read: (id: string, kind: string) => Promise<TokensRead | null>,
): Promise<void> {
  expect((await read('acme/a', TOKENS_KIND))?.vaultEntry).toMatchObject({
    kind: TOKENS_KIND,
    key: 'acme/a',
    ciphertext: 't-acme/a',
    keyId: 'k1',
    version: 1,
  });
  expect((await read('acme/b', TOKENS_KIND))?.vaultEntry).toBeNull();
  expect((await read('acme/b', 'internal'))?.vaultEntry?.ciphertext).toBe('i-acme/b');
}

/** Each read answers `null` for the ids `getConnection` answers `null` for. */
async function answersNullAsGetConnection(
  storage: Storage,
  reads: ((id: string, kind: string) => Promise<unknown>)[],
): Promise<void> {
  for (const read of reads) {
    for (const id of ['acme', 'acme/a/x', 'acme/z', 'p/plain']) {
      expect(await storage.getConnection(id), id).toBeNull();
      expect(await read(id, TOKENS_KIND), id).toBeNull();
    }
  }
}

export function handOutReadCases({ open }: CaseContext): void {
  describe("a hand-out's reads in one (readForHandOut, readForHandOutSync, optional)", () => {
    /**
     * The storage's joined reads, each as a promise: `readForHandOut`, and
     * `readForHandOutSync`, held to answering a value, never a promise. Empty when it offers
     * neither.
     */
    async function setUp() {
      const storage = await seeded(open);
      const fast = storage.fastPaths;
      const reads: Read[] = bothOf(fast?.readForHandOut, fast?.readForHandOutSync);
      return { storage, reads };
    }

    const joined =
      'answers the connection, its vault entry of the kind asked and its provider’s hand_out ' +
      'member, as the three reads would';
    it(joined, async () => {
      const { storage, reads } = await setUp();
      // Optional: a storage without them reads one at a time.
      for (const read of reads) await answersAsApart(storage, read);
    });

    async function answersAsApart(storage: Storage, read: Read) {
      const expected: Record<string, HandOutRead['provider']> = {
        'acme/a': { handOut: null },
        'acme/b': { handOut: 'false' },
        'acme/c': { handOut: 'true' },
        'acme/d': { handOut: '"x"' },
        'acme/e': null,
        'acme/f': { handOut: null },
      };
      for (const [id, provider] of Object.entries(expected)) {
        const one = await read(id, TOKENS_KIND);
        const three = await apart(storage, id, TOKENS_KIND);
        expect(one, id).toEqual({
          connection: three?.connection,
          vaultEntry: three?.vaultEntry,
          provider,
        });
        expect(three?.provider === null, id).toBe(provider === null);
      }
      await readsVaultEntries(read);
    }

    it('answers null exactly when getConnection does', async () => {
      const { storage, reads } = await setUp();
      await answersNullAsGetConnection(storage, reads);
    });

    it('reads what is stored now, and answers copies', async () => {
      const { storage, reads } = await setUp();
      for (const [index, read] of reads.entries()) await readsNow(storage, read, index);
    });

    /** The `index`th read sees the changes made before it, each read a copy. */
    async function readsNow(storage: Storage, read: Read, index: number) {
      const provider = await storage.getProvider('p/open');
      if (provider === null) throw new Error('no provider p/open');
      // Each read changes what is stored once more: the provider's hand_out, the tokens.
      const handOut = index % 2 === 0;
      const changed = { ...provider, state: { ...provider.state, hand_out: handOut } };
      expect(
        await storage.compareAndSetProvider({ ...changed, version: index + 2 }, index + 1),
      ).toBe(true);
      expect((await read('acme/c', TOKENS_KIND))?.provider).toEqual({ handOut: `${handOut}` });
      const ciphertext = `t-${index + 2}`;
      expect(
        await storage.putVaultEntry(
          { kind: TOKENS_KIND, key: 'acme/c', ciphertext, keyId: 'k2' },
          Date.UTC(2026, 10, 21, 10 + index),
        ),
      ).toMatchObject({ created: false, entry: { version: index + 2 } });
      const first = (await read('acme/c', TOKENS_KIND)) as HandOutRead;
      expect(first.vaultEntry).toMatchObject({ ciphertext, keyId: 'k2', version: index + 2 });
      first.connection.state.n = 'changed';
      (first.vaultEntry as { ciphertext: string }).ciphertext = 'changed';
      const again = (await read('acme/c', TOKENS_KIND)) as HandOutRead;
      expect(again.connection.state).toEqual({ n: 'acme/c' });
      expect(again.vaultEntry?.ciphertext).toBe(ciphertext);
    }

    it('offers readForHandOutSync only beside readForHandOut', async () => {
      const storage = await open();
      const fast = storage.fastPaths;
      if (fast?.readForHandOutSync !== undefined)
        expect(fast.readForHandOut).toBeTypeOf('function');
    });
  });

  describe("a connection's tokens in one read (readWithTokens, readWithTokensSync, optional)", () => {
    async function setUp() {
      const storage = await seeded(open);
      const fast = storage.fastPaths;
      return { storage, reads: bothOf(fast?.readWithTokens, fast?.readWithTokensSync) };
    }

    const asApart =
      'answers the connection and its vault entry of the kind asked, as the two reads would, ' +
      'and no provider';
    it(asApart, async () => {
      const { storage, reads } = await setUp();
      for (const read of reads) {
        // acme/e's provider does not exist: its connection and tokens are read all the same.
        for (const id of ['acme/a', 'acme/b', 'acme/c', 'acme/d', 'acme/e', 'acme/f']) {
          for (const kind of [TOKENS_KIND, 'internal']) {
            const one = await read(id, kind);
            const connection = await storage.getConnection(id);
            expect(one, `${id} ${kind}`).toStrictEqual({
              connection,
              vaultEntry: await storage.getVaultEntry(kind, id),
            });
          }
        }
        await readsVaultEntries(read);
        expect((await read('acme/e', TOKENS_KIND))?.connection.providerId).toBe('p/none');
      }
    });

    it('answers null exactly when getConnection does', async () => {
      const { storage, reads } = await setUp();
      await answersNullAsGetConnection(storage, reads);
    });

    it('reads what is stored now, and answers copies', async () => {
      const { storage, reads } = await setUp();
      for (const [index, read] of reads.entries()) {
        const ciphertext = `t-${index + 2}`;
        await storage.putVaultEntry(
          { kind: TOKENS_KIND, key: 'acme/c', ciphertext, keyId: 'k2' },
          Date.UTC(2026, 10, 21, 10 + index),
        );
        const connection = await storage.getConnection('acme/c');
        if (connection === null) throw new Error('no connection acme/c');
        const changed = { ...connection, status: index % 2 === 0 ? 'error' : 'active' } as const;
        expect(
          await storage.compareAndSetConnection({ ...changed, version: index + 2 }, index + 1),
        ).toBe(true);
        const first = await read('acme/c', TOKENS_KIND);
        if (first === null) throw new Error('no read of acme/c');
        expect(first.connection).toMatchObject({ status: changed.status, version: index + 2 });
        expect(first.vaultEntry).toMatchObject({ ciphertext, keyId: 'k2', version: index + 2 });
        first.connection.state.n = 'changed';
        (first.vaultEntry as { ciphertext: string }).ciphertext = 'changed';
        const again = await read('acme/c', TOKENS_KIND);
        expect(again?.connection.state).toEqual({ n: 'acme/c' });
        expect(again?.vaultEntry?.ciphertext).toBe(ciphertext);
      }
    });

    it('offers readWithTokensSync only beside readWithTokens', async () => {
      const storage = await open();
      const fast = storage.fastPaths;
      if (fast?.readWithTokensSync !== undefined)
        expect(fast.readWithTokens).toBeTypeOf('function');
    });
  });
}
