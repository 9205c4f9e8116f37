import { readFileSync } from 'node:fs';
import type { Storage, StorageHealth } from '@keyway/core/storage';
import { afterEach, describe, expect, it } from 'vitest';
import { Harness, storageFactories } from './harness.js';

const { version } = JSON.parse(
  readFileSync(new URL('../package.json', import.meta.url), 'utf8'),
) as { version: string };

/** The storage with another `health()`: what a broken or older database would answer. */
function withHealth(storage: Storage, health: () => Promise<StorageHealth>): Storage {
  return new Proxy(storage, {
    get: (target, property) =>
      property === 'health' ? health : Reflect.get(target, property, target),
  });
}

describe.each(storageFactories)('health and status ($name storage)', (factory) => {
  const opened: Storage[] = [];
  afterEach(async () => {
    for (const storage of opened.splice(0)) await storage.close().catch(() => {});
  });
  const open = async () => {
    const storage = await factory.create();
    opened.push(storage);
    return storage;
  };

  it('is live and ready without a credential, and tells the operator its storage', async () => {
    const h = new Harness(await open());
    const live = await h.call('GET', '/healthz', { token: null });
    expect(live.status).toBe(200);
    expect(live.body).toEqual({ status: 'ok' });
    expect(live.headers.get('cache-control')).toBe('no-store');
    const ready = await h.call('GET', '/readyz', { token: null });
    expect(ready.status).toBe(200);
    expect(ready.body).toEqual({ status: 'ready' });
    const status = await h.call('GET', '/api/admin/status');
    expect(status.status).toBe(200);
    // Memory keeps no schema; the SQL storages hold all five migrations of @keyway/sql.
    const schema = factory.name === 'memory' ? null : 5;
    expect(status.body).toEqual({
      version,
      ready: true,
      storage: { engine: factory.name, schema_version: schema, schema_expected: schema },
      reason: null,
      credential: { name: null, scopes: ['**'], expires_at: null },
      provider_management: false,
      sign_in: false,
    });
    // The status is not public.
    expect((await h.call('GET', '/api/admin/status', { token: null })).status).toBe(401);
  });

  it('is not ready on a database of an older schema, and says why to the root key only', async () => {
    const storage = await open();
    const h = new Harness(
      withHealth(storage, async () => ({
        engine: factory.name,
        schema: { version: 2, expected: 3 },
      })),
    );
    const ready = await h.call('GET', '/readyz', { token: null });
    expect(ready.status).toBe(503);
    expect(ready.text).toBe('{"status":"unavailable"}');
    expect((await h.call('GET', '/healthz', { token: null })).status).toBe(200);
    const status = await h.call('GET', '/api/admin/status');
    expect(status.body).toEqual({
      version,
      ready: false,
      storage: { engine: factory.name, schema_version: 2, schema_expected: 3 },
      reason: 'storage: schema version 2, this code needs 3',
      credential: { name: null, scopes: ['**'], expires_at: null },
      provider_management: false,
      sign_in: false,
    });
    const minted = await h.call('POST', '/api/admin/tokens', {
      body: { name: 'ops', scopes: ['acme'] },
    });
    const scoped = await h.call('GET', '/api/admin/status', { token: minted.body.access_token });
    expect(scoped.status).toBe(200);
    expect(scoped.body.ready).toBe(false);
    expect(scoped.body.reason).toBeNull();
    // Who is asking (the inspector shows only what these scopes allow).
    expect(scoped.body.credential).toEqual({
      name: 'ops',
      scopes: ['acme/**'],
      expires_at: minted.body.expires_at,
    });
  });

  it('is not ready while the storage cannot answer, and the error stays off the wire', async () => {
    const storage = await open();
    const h = new Harness(
      withHealth(storage, async () => {
        throw new Error('connect ECONNREFUSED 10.0.0.5:5432 (user keyway)');
      }),
    );
    const ready = await h.call('GET', '/readyz', { token: null });
    expect(ready.status).toBe(503);
    expect(ready.text).toBe('{"status":"unavailable"}');
    expect(await h.broker.health()).toEqual({
      ready: false,
      storage: null,
      reason: 'storage: connect ECONNREFUSED 10.0.0.5:5432 (user keyway)',
    });
  });
});

describe.each(storageFactories.filter((factory) => factory.name !== 'memory'))(
  'readiness of a closed database ($name storage)',
  (factory) => {
    it('answers 503 once the storage is closed, and the broker stays live', async () => {
      const storage = await factory.create();
      const h = new Harness(storage);
      expect((await h.call('GET', '/readyz', { token: null })).status).toBe(200);
      await storage.close();
      const ready = await h.call('GET', '/readyz', { token: null });
      expect(ready.status).toBe(503);
      expect(ready.body).toEqual({ status: 'unavailable' });
      expect((await h.call('GET', '/healthz', { token: null })).status).toBe(200);
      const health = await h.broker.health();
      expect(health.ready).toBe(false);
      expect(health.storage).toBeNull();
      expect(health.reason).toMatch(/^storage: /);
    });
  },
);
