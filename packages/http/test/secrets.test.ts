import { generateVaultKey } from '@keyway/core';
import type { VaultEntryRecord } from '@keyway/core/storage';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Harness, ROOT_KEY, START, storageFactories, VAULT_KEY } from './harness.js';

const iso = (ms: number) => new Date(ms).toISOString();
const SECRET = 'sk-live-7f3a9c-correct-horse-battery-staple';

describe.each(storageFactories)('vault endpoints ($name storage)', (factory) => {
  let h: Harness;

  beforeEach(async () => {
    h = new Harness(await factory.create());
  });

  afterEach(async () => {
    expect(h.errors).toEqual([]);
    await h.broker.close();
  });

  it('creates (201), replaces (200), reads with no-store, lists without values, deletes (204)', async () => {
    const created = await h.call('PUT', '/api/vault/secrets/acme/api-key', {
      body: { value: SECRET },
    });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      path: 'acme/api-key',
      version: 1,
      created_at: iso(START),
      updated_at: iso(START),
    });
    h.now += 1000;
    const replaced = await h.call('PUT', '/api/vault/secrets/acme/api-key', {
      body: { value: 'v2' },
    });
    expect(replaced.status).toBe(200);
    expect(replaced.body.version).toBe(2);

    const read = await h.call('GET', '/api/vault/secrets/acme/api-key');
    expect(read.status).toBe(200);
    expect(read.headers.get('cache-control')).toBe('no-store');
    expect(read.body).toEqual({
      path: 'acme/api-key',
      value: 'v2',
      version: 2,
      created_at: iso(START),
      updated_at: iso(START + 1000),
    });

    const list = await h.call('GET', '/api/vault/secrets?prefix=acme');
    expect(list.body).toEqual({
      items: [
        { path: 'acme/api-key', version: 2, created_at: iso(START), updated_at: iso(START + 1000) },
      ],
      next_cursor: null,
    });
    expect(list.text).not.toContain('v2"');

    expect((await h.call('DELETE', '/api/vault/secrets/acme/api-key')).status).toBe(204);
    const gone = await h.call('GET', '/api/vault/secrets/acme/api-key');
    expect(gone.status).toBe(404);
    expect(gone.body.error).toBe('not_found');
    expect((await h.call('DELETE', '/api/vault/secrets/acme/api-key')).status).toBe(404);
  });

  it('keeps every value encrypted at rest: the clear value is nowhere in the database', async () => {
    await h.call('PUT', '/api/vault/secrets/acme/a', { body: { value: SECRET } });
    await h.call('PUT', '/api/vault/secrets/acme/b', { body: { value: `${SECRET}-two` } });
    const raw = await factory.rawText(h.storage);
    if (raw === null) return; // memory: nothing at rest
    expect(raw).toContain('acme/a'); // the rows are there…
    expect(raw).not.toContain(SECRET); // …but never the value
    expect(raw).not.toContain('correct-horse');
  });

  it('enforces scopes: a token on acme/** cannot read, write, delete or list other/x', async () => {
    await h.call('PUT', '/api/vault/secrets/other/x', { body: { value: 'theirs' } });
    await h.call('PUT', '/api/vault/secrets/acme/y', { body: { value: 'ours' } });
    await h.call('PUT', '/api/vault/secrets/acme-x/z', { body: { value: 'sibling' } });
    const token = await h.mint('acme', ['acme']);
    for (const [method, path, body] of [
      ['GET', '/api/vault/secrets/other/x', undefined],
      ['PUT', '/api/vault/secrets/other/x', { value: 'overwritten' }],
      ['DELETE', '/api/vault/secrets/other/x', undefined],
      ['GET', '/api/vault/secrets/acme-x/z', undefined],
      ['GET', '/api/vault/secrets/nonexistent', undefined],
    ] as const) {
      const reply = await h.call(method, path, { token, ...(body ? { body } : {}) });
      expect(reply.status, `${method} ${path}`).toBe(403);
      expect(reply.body.error).toBe('insufficient_scope');
    }
    expect((await h.call('GET', '/api/vault/secrets/acme/y', { token })).body.value).toBe('ours');
    const list = await h.call('GET', '/api/vault/secrets', { token });
    expect(list.body.items.map((s: any) => s.path)).toEqual(['acme/y']);
    const outside = await h.call('GET', '/api/vault/secrets?prefix=other', { token });
    expect(outside.body.items).toEqual([]);
    expect((await h.call('GET', '/api/vault/secrets/other/x')).body.value).toBe('theirs');
  });

  it('never serves the entries Keyway keeps for itself', async () => {
    const internal = await h.broker.vault.seal(
      { kind: 'client_secret', key: 'acme/linear' },
      SECRET,
    );
    await h.storage.putVaultEntry(internal, START);
    expect((await h.call('GET', '/api/vault/secrets/acme/linear')).status).toBe(404);
    expect((await h.call('GET', '/api/vault/secrets')).body.items).toEqual([]);
  });

  it('refuses a ciphertext moved to another entry, without leaking anything', async () => {
    await h.call('PUT', '/api/vault/secrets/acme/a', { body: { value: SECRET } });
    await h.call('PUT', '/api/vault/secrets/acme/b', { body: { value: 'bee' } });
    const a = await h.storage.getVaultEntry('secret', 'acme/a');
    await h.storage.putVaultEntry(
      {
        kind: 'secret',
        key: 'acme/b',
        ciphertext: a?.ciphertext as string,
        keyId: a?.keyId as string,
      },
      START,
    );
    const reply = await h.call('GET', '/api/vault/secrets/acme/b');
    expect(reply.status).toBe(500);
    expect(reply.body.error).toBe('internal_error');
    expect(reply.text).not.toContain(SECRET);
    expect(h.errors).toHaveLength(1);
    h.errors.length = 0;
    expect((await h.call('GET', '/api/vault/secrets/acme/a')).body.value).toBe(SECRET);
  });

  it('re-wraps every entry onto a new key: all still readable, none left under the old key', async () => {
    for (const key of ['a', 'b', 'c']) {
      await h.call('PUT', `/api/vault/secrets/acme/${key}`, {
        body: { value: `${SECRET}-${key}` },
      });
    }
    const internal = await h.broker.vault.seal(
      { kind: 'connection_tokens', key: 'acme/c' },
      'tokens',
    );
    await h.storage.putVaultEntry(internal, START);
    const newKey = generateVaultKey();
    h.rebuild(ROOT_KEY, [newKey, VAULT_KEY]);
    const newId = h.broker.vault.activeKeyId;
    expect(await h.broker.vault.rewrap(h.storage, 2)).toBe(4);
    expect(await h.storage.listVaultEntriesNotUnderKey(newId, null, 100)).toEqual([]);
    h.rebuild(ROOT_KEY, [newKey]); // the old key is gone for good
    for (const key of ['a', 'b', 'c']) {
      const reply = await h.call('GET', `/api/vault/secrets/acme/${key}`);
      expect(reply.body.value).toBe(`${SECRET}-${key}`);
      expect(reply.body.version).toBe(1);
    }
    const internalEntry = await h.storage.getVaultEntry('connection_tokens', 'acme/c');
    expect(internalEntry).not.toBeNull();
    expect(await h.broker.vault.open(internalEntry as VaultEntryRecord)).toBe('tokens');
    expect(await h.broker.vault.rewrap(h.storage)).toBe(0);
  });

  it('validates paths and values', async () => {
    const cases: [string, unknown, number, string][] = [
      ['/api/vault/secrets/a%2Fb', { value: 'x' }, 400, 'invalid_path'],
      ['/api/vault/secrets/a/**', { value: 'x' }, 400, 'invalid_path'],
      [`/api/vault/secrets/${'a'.repeat(513)}`, { value: 'x' }, 400, 'invalid_path'],
      ['/api/vault/secrets/a', { value: 5 }, 400, 'invalid_request'],
      ['/api/vault/secrets/a', { value: 'x', extra: 1 }, 400, 'invalid_request'],
      ['/api/vault/secrets/a', { value: 'é'.repeat(32 * 1024 + 1) }, 400, 'invalid_request'],
    ];
    for (const [path, body, status, error] of cases) {
      const reply = await h.call('PUT', path, { body });
      expect(reply.status, path).toBe(status);
      expect(reply.body.error, path).toBe(error);
    }
    const max = await h.call('PUT', '/api/vault/secrets/a', {
      body: { value: 'x'.repeat(64 * 1024) },
    });
    expect(max.status).toBe(201);
    expect((await h.call('GET', '/api/vault/secrets?prefix=a//b')).body.error).toBe('invalid_path');
  });

  it('decodes a percent-encoded path once and stores it in NFC', async () => {
    await h.call('PUT', '/api/vault/secrets/acme/cafe%CC%81', { body: { value: 'x' } });
    expect((await h.call('GET', '/api/vault/secrets/acme/caf%C3%A9')).status).toBe(200);
    expect((await h.call('GET', '/api/vault/secrets')).body.items[0].path).toBe('acme/café');
  });
});
