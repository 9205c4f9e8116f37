import type {
  ConnectionRecord,
  ConnectionStatus,
  ProviderRecord,
  Storage,
  VaultWrite,
} from '@keyway/core/storage';
import { describe, expect, it } from 'vitest';
import type { CaseContext } from './conformance.js';

const NOW = Date.UTC(2026, 10, 21, 9, 30, 0, 0);

/** Keys whose code point order differs from naive orders: UTF-16, length-first, segment-first. */
export const ORDER_KEYS = [
  'b',
  'a/b',
  'a',
  'a!',
  'a!/x',
  'a/b/c',
  'a-b',
  'a/c',
  '\u{1F600}',
  '\uFF5E',
  'é/1',
];
export const ORDERED_KEYS = [
  'a',
  'a!',
  'a!/x',
  'a-b',
  'a/b',
  'a/b/c',
  'a/c',
  'b',
  'é/1',
  '\uFF5E',
  '\u{1F600}',
];

export function providerRecord(
  id: string,
  overrides: Partial<ProviderRecord> = {},
): ProviderRecord {
  return {
    id,
    template: 'mcp',
    state: {
      label: `Provider ${id}`,
      configuration: { resource_url: 'https://mcp.example/mcp', scopes: ['read', 'wríte'] },
      nested: { list: [1, 2.5, null, true, 'x'], empty: {} },
    },
    version: 1,
    createdAt: NOW,
    updatedAt: NOW,
    ...overrides,
  };
}

export function connectionRecord(
  id: string,
  overrides: Partial<ConnectionRecord> = {},
): ConnectionRecord {
  return {
    id,
    providerId: 'linear',
    status: 'pending',
    state: { scopes: ['read'], error: null, authorized_at: null },
    version: 1,
    createdAt: NOW,
    updatedAt: NOW,
    ...overrides,
  };
}

const secret = (key: string, ciphertext = `ct-${key}`): VaultWrite => ({
  kind: 'internal',
  key,
  ciphertext,
  keyId: 'k1',
});

async function ids(records: Promise<{ id: string }[]>): Promise<string[]> {
  return (await records).map((record) => record.id);
}

/** Cases shared by the two path-keyed record kinds. */
function pathListCases(
  open: () => Promise<Storage>,
  insert: (storage: Storage, id: string) => Promise<boolean>,
  list: (
    storage: Storage,
    query: { within?: string[]; after?: string; limit: number },
  ) => Promise<{ id: string }[]>,
): void {
  it('lists in code point order', async () => {
    const storage = await open();
    for (const key of ORDER_KEYS) expect(await insert(storage, key)).toBe(true);
    expect(await ids(list(storage, { limit: 100 }))).toEqual(ORDERED_KEYS);
  });

  it('lists a subtree: the root and what lies below it, never a sibling sharing a prefix', async () => {
    const storage = await open();
    for (const key of ORDER_KEYS) await insert(storage, key);
    expect(await ids(list(storage, { within: ['a'], limit: 100 }))).toEqual([
      'a',
      'a/b',
      'a/b/c',
      'a/c',
    ]);
    expect(await ids(list(storage, { within: ['a/b'], limit: 100 }))).toEqual(['a/b', 'a/b/c']);
    expect(await ids(list(storage, { within: ['a/b/c/d'], limit: 100 }))).toEqual([]);
    expect(await ids(list(storage, { within: [], limit: 100 }))).toEqual([]);
  });

  it('merges several subtrees in code point order, even where they interleave', async () => {
    const storage = await open();
    for (const key of ORDER_KEYS) await insert(storage, key);
    expect(await ids(list(storage, { within: ['a', 'a!', '\u{1F600}'], limit: 100 }))).toEqual([
      'a',
      'a!',
      'a!/x',
      'a/b',
      'a/b/c',
      'a/c',
      '\u{1F600}',
    ]);
  });

  it('gives each row once where subtrees overlap, and cuts the merged page at its limit', async () => {
    const storage = await open();
    for (const key of ORDER_KEYS) await insert(storage, key);
    expect(await ids(list(storage, { within: ['a', 'a/b', 'a/b/c'], limit: 100 }))).toEqual([
      'a',
      'a/b',
      'a/b/c',
      'a/c',
    ]);
    expect(await ids(list(storage, { within: ['a/b', 'a'], limit: 3 }))).toEqual([
      'a',
      'a/b',
      'a/b/c',
    ]);
    expect(await ids(list(storage, { within: ['a', 'a!'], after: 'a', limit: 2 }))).toEqual([
      'a!',
      'a!/x',
    ]);
  });

  it('pages with after and limit', async () => {
    const storage = await open();
    for (const key of ORDER_KEYS) await insert(storage, key);
    expect(await ids(list(storage, { limit: 3 }))).toEqual(['a', 'a!', 'a!/x']);
    expect(await ids(list(storage, { after: 'a!/x', limit: 3 }))).toEqual(['a-b', 'a/b', 'a/b/c']);
    expect(await ids(list(storage, { within: ['a'], after: 'a/b', limit: 2 }))).toEqual([
      'a/b/c',
      'a/c',
    ]);
    expect(await ids(list(storage, { after: '\u{1F600}', limit: 3 }))).toEqual([]);
  });
}

export function providerStorageCases({ open, connectAgain }: CaseContext): void {
  describe('providers', () => {
    it('stores every field exactly and reads it by id', async () => {
      const storage = await open();
      const record = providerRecord('acme/linear');
      expect(await storage.insertProvider(record)).toBe(true);
      expect(await storage.getProvider('acme/linear')).toEqual(record);
      expect(await storage.getProvider('acme/other')).toBeNull();
    });

    it('refuses a second insert of one id, applying none of its vault changes', async () => {
      const storage = await open();
      const first = providerRecord('linear');
      await storage.insertProvider(first);
      const again = providerRecord('linear', { template: 'other' });
      expect(await storage.insertProvider(again, { put: [secret('linear/secret')] })).toBe(false);
      expect(await storage.getProvider('linear')).toEqual(first);
      expect(await storage.getVaultEntry('internal', 'linear/secret')).toBeNull();
    });

    it('writes a provider and its vault entries together', async () => {
      const storage = await open();
      const record = providerRecord('linear');
      await storage.insertProvider(record, { put: [secret('linear/a', 'one')] });
      expect(await storage.getVaultEntry('internal', 'linear/a')).toMatchObject({
        ciphertext: 'one',
        version: 1,
      });
      const next = { ...record, version: 2, updatedAt: NOW + 1, state: { label: 'x' } };
      expect(
        await storage.compareAndSetProvider(next, 1, {
          put: [secret('linear/a', 'two')],
          delete: [{ kind: 'internal', key: 'gone' }],
        }),
      ).toBe(true);
      expect(await storage.getProvider('linear')).toEqual(next);
      expect(await storage.getVaultEntry('internal', 'linear/a')).toMatchObject({
        ciphertext: 'two',
        version: 2,
      });
    });

    it('compare-and-set refuses a stale version and writes nothing', async () => {
      const storage = await open();
      const record = providerRecord('linear');
      await storage.insertProvider(record);
      const stale = { ...record, version: 2, state: { label: 'stale' } };
      expect(await storage.compareAndSetProvider(stale, 7, { put: [secret('s')] })).toBe(false);
      expect(await storage.getProvider('linear')).toEqual(record);
      expect(await storage.getVaultEntry('internal', 's')).toBeNull();
      expect(
        await storage.compareAndSetProvider(providerRecord('missing', { version: 2 }), 1),
      ).toBe(false);
    });

    it('lets exactly one of 20 concurrent writers from one version win', async () => {
      const storage = await open();
      const other = await connectAgain(storage);
      await storage.insertProvider(providerRecord('linear'));
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          (i % 2 ? other : storage).compareAndSetProvider(
            providerRecord('linear', { version: 2, state: { writer: i } }),
            1,
          ),
        ),
      );
      expect(results.filter(Boolean)).toHaveLength(1);
      const winner = results.indexOf(true);
      expect((await other.getProvider('linear'))?.state).toEqual({ writer: winner });
    });

    it('deletes a provider and its vault entries unless a connection uses it', async () => {
      const storage = await open();
      await storage.insertProvider(providerRecord('linear'), { put: [secret('linear/s')] });
      await storage.insertConnection(connectionRecord('acme/alice', { providerId: 'linear' }));
      const keys = [{ kind: 'internal', key: 'linear/s' }];
      expect(await storage.deleteProvider('linear', keys)).toBe('in_use');
      expect(await storage.getProvider('linear')).not.toBeNull();
      expect(await storage.getVaultEntry('internal', 'linear/s')).not.toBeNull();
      await storage.deleteConnection('acme/alice');
      expect(await storage.deleteProvider('linear', keys)).toBe('deleted');
      expect(await storage.getProvider('linear')).toBeNull();
      expect(await storage.getVaultEntry('internal', 'linear/s')).toBeNull();
      expect(await storage.deleteProvider('linear')).toBe('not_found');
    });

    pathListCases(
      open,
      (storage, id) => storage.insertProvider(providerRecord(id)),
      (storage, query) => storage.listProviders(query),
    );
  });
}

export function connectionStorageCases({ open, connectAgain }: CaseContext): void {
  describe('connections', () => {
    it('stores every field exactly and reads it by id', async () => {
      const storage = await open();
      const record = connectionRecord('acme/users/álice/linear', {
        status: 'error',
        state: { error: { code: 'x', description: 'y' }, token_expires_at: NOW + 5 },
      });
      expect(await storage.insertConnection(record)).toBe(true);
      expect(await storage.getConnection(record.id)).toEqual(record);
      expect(await storage.getConnection('acme/users')).toBeNull();
    });

    it('refuses a second insert of one id', async () => {
      const storage = await open();
      const first = connectionRecord('acme/a');
      await storage.insertConnection(first);
      expect(await storage.insertConnection(connectionRecord('acme/a', { providerId: 'x' }))).toBe(
        false,
      );
      expect(await storage.getConnection('acme/a')).toEqual(first);
    });

    it('compare-and-set writes the record and its tokens together, or neither', async () => {
      const storage = await open();
      const record = connectionRecord('acme/a');
      await storage.insertConnection(record);
      const active = { ...record, status: 'active' as const, version: 2, updatedAt: NOW + 10 };
      const tokens = secret('acme/a', 'tokens-v1');
      expect(await storage.compareAndSetConnection(active, 1, { put: [tokens] })).toBe(true);
      expect(await storage.getConnection('acme/a')).toEqual(active);
      expect((await storage.getVaultEntry('internal', 'acme/a'))?.ciphertext).toBe('tokens-v1');

      const lost = { ...active, version: 3, state: { lost: true } };
      expect(
        await storage.compareAndSetConnection(lost, 1, { put: [secret('acme/a', 'tokens-lost')] }),
      ).toBe(false);
      expect(await storage.getConnection('acme/a')).toEqual(active);
      expect((await storage.getVaultEntry('internal', 'acme/a'))?.ciphertext).toBe('tokens-v1');
    });

    it('lets exactly one of 20 concurrent writers from one version win', async () => {
      const storage = await open();
      const other = await connectAgain(storage);
      await storage.insertConnection(connectionRecord('acme/a'));
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          (i % 2 ? other : storage).compareAndSetConnection(
            connectionRecord('acme/a', { version: 2, state: { writer: i } }),
            1,
            { put: [secret('acme/a', `writer-${i}`)] },
          ),
        ),
      );
      expect(results.filter(Boolean)).toHaveLength(1);
      const winner = results.indexOf(true);
      expect((await other.getConnection('acme/a'))?.state).toEqual({ writer: winner });
      expect((await other.getVaultEntry('internal', 'acme/a'))?.ciphertext).toBe(
        `writer-${winner}`,
      );
    });

    it('filters a listing by provider and status', async () => {
      const storage = await open();
      const rows: [string, string, ConnectionStatus][] = [
        ['acme/a', 'linear', 'active'],
        ['acme/b', 'github', 'active'],
        ['acme/c', 'linear', 'pending'],
        ['acme/d', 'linear', 'active'],
        ['other/e', 'linear', 'active'],
      ];
      for (const [id, providerId, status] of rows) {
        await storage.insertConnection(connectionRecord(id, { providerId, status }));
      }
      expect(await ids(storage.listConnections({ providerId: 'linear', limit: 10 }))).toEqual([
        'acme/a',
        'acme/c',
        'acme/d',
        'other/e',
      ]);
      expect(
        await ids(
          storage.listConnections({
            within: ['acme'],
            providerId: 'linear',
            status: 'active',
            limit: 10,
          }),
        ),
      ).toEqual(['acme/a', 'acme/d']);
      expect(await ids(storage.listConnections({ status: 'pending', limit: 10 }))).toEqual([
        'acme/c',
      ]);
    });

    it('deletes a connection and its vault entries in one step', async () => {
      const storage = await open();
      await storage.insertConnection(connectionRecord('acme/a'), { put: [secret('acme/a')] });
      expect(await storage.deleteConnection('acme/a', [{ kind: 'internal', key: 'acme/a' }])).toBe(
        true,
      );
      expect(await storage.getConnection('acme/a')).toBeNull();
      expect(await storage.getVaultEntry('internal', 'acme/a')).toBeNull();
      expect(await storage.deleteConnection('acme/a')).toBe(false);
    });

    pathListCases(
      open,
      (storage, id) => storage.insertConnection(connectionRecord(id)),
      (storage, query) => storage.listConnections(query),
    );
  });
}
