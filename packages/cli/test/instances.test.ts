import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase } from '@keyway/test-support/postgres';
import { type BrokerProcess, startBrokerProcess } from '@keyway/test-support/processes';
import { afterAll, afterEach, describe, expect, inject, it } from 'vitest';
import { serveWorld } from './peers.js';

const ROOT_KEY = 'two-instances-root-key-0123456789abcdef';
const VAULT_KEY = 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8';
const dir = mkdtempSync(join(tmpdir(), 'keyway-instances-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function call(base: string, method: string, path: string, token: string, body?: unknown) {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

describe.each([
  {
    engine: 'SQLite',
    database: async () => ({ url: join(dir, 'shared.sqlite'), drop: async () => {} }),
  },
  { engine: 'PostgreSQL', database: () => createTestDatabase(inject('databaseUrl')) },
])('two broker processes over one $engine database', ({ database }) => {
  const processes: BrokerProcess[] = [];
  let drop = async () => {};

  afterEach(async () => {
    for (const broker of processes.splice(0)) await broker.stop();
    await drop();
  });

  it('share tokens: minted through one, used on the other, deleted through one, refused by the other', async () => {
    const db = await database();
    drop = db.drop;
    const env: Record<string, string> = { KEYWAY_ROOT_KEY: ROOT_KEY, KEYWAY_DATABASE: db.url };
    if (db.url.startsWith('postgres')) env.KEYWAY_VAULT_KEYS = VAULT_KEY;
    // Started together: migrations must apply once, whoever comes first.
    const [a, b] = await Promise.all([startBrokerProcess(env), startBrokerProcess(env)]);
    processes.push(a as BrokerProcess, b as BrokerProcess);
    const one = (a as BrokerProcess).url;
    const two = (b as BrokerProcess).url;
    expect((a as BrokerProcess).child.pid).not.toBe((b as BrokerProcess).child.pid);

    const minted = await call(one, 'POST', '/api/admin/tokens', ROOT_KEY, {
      name: 'shared',
      scopes: ['acme'],
    });
    expect(minted.status).toBe(201);
    const token = minted.body.access_token as string;
    expect((await call(two, 'GET', '/api/admin/tokens/shared', token)).status).toBe(200);

    const child = await call(two, 'POST', '/api/admin/tokens', token, {
      name: 'shared.bot',
      scopes: ['acme/x'],
      expires_in: 600,
    });
    expect(child.status).toBe(201);
    const taken = await call(one, 'POST', '/api/admin/tokens', ROOT_KEY, {
      name: 'shared.bot',
      scopes: ['acme'],
    });
    expect(taken.status).toBe(409);

    expect((await call(two, 'DELETE', '/api/admin/tokens/shared', ROOT_KEY)).status).toBe(204);
    const refused = await call(one, 'GET', '/api/admin/tokens', token);
    expect(refused.status).toBe(401);
    expect((await call(one, 'GET', '/api/admin/tokens', child.body.access_token)).status).toBe(401);

    // Contention across processes: 20 mints of one name, alternating between the two.
    const statuses = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        call(i % 2 ? one : two, 'POST', '/api/admin/tokens', ROOT_KEY, {
          name: 'contended',
          scopes: ['acme'],
        }).then((reply) => reply.status),
      ),
    );
    expect(statuses.filter((status) => status === 201)).toHaveLength(1);
    expect(statuses.filter((status) => status === 409)).toHaveLength(19);

    // The vault keys are shared too: a secret written through one is read through the other.
    expect(
      (await call(one, 'PUT', '/api/vault/secrets/acme/k', ROOT_KEY, { value: 'shared secret' }))
        .status,
    ).toBe(201);
    const read = await call(two, 'GET', '/api/vault/secrets/acme/k', ROOT_KEY);
    expect(read.body.value).toBe('shared secret');
  });
});

describe.each([
  {
    engine: 'SQLite',
    database: async () => ({ url: join(dir, 'storm.sqlite'), drop: async () => {} }),
  },
  { engine: 'PostgreSQL', database: () => createTestDatabase(inject('databaseUrl')) },
])('refresh storm: two broker processes over one $engine database', ({ database }) => {
  it('refreshes exactly once at the authorization server for 50 concurrent callers, all getting the new token', async () => {
    const served = await serveWorld();
    const db = await database();
    const env: Record<string, string> = {
      KEYWAY_ROOT_KEY: ROOT_KEY,
      KEYWAY_DATABASE: db.url,
      KEYWAY_VAULT_KEYS: VAULT_KEY,
      KEYWAY_ALLOWED_HOSTS: '127.0.0.1',
      // Behind a load balancer every instance has the same public base URL.
      KEYWAY_BASE_URL: 'http://localhost:8787',
    };
    const brokers = await Promise.all([startBrokerProcess(env), startBrokerProcess(env)]);
    try {
      const [a, b] = brokers.map((broker) => broker.url) as [string, string];
      const { world } = served;
      // A token of one second, expired when the callers come: none has a valid token to be
      // served while the one refresh runs, so every one gets its result.
      world.set({ accessTokenLifetime: 1 });
      const provider = await call(a, 'PUT', '/api/admin/providers/linear', ROOT_KEY, {
        template: 'mcp',
        configuration: { resource_url: world.resourceUrl },
      });
      expect(provider.status).toBe(201);
      const started = await call(a, 'POST', '/api/oauth/authorize/linear', ROOT_KEY, {
        connection_id: 'acme/alice/linear',
      });
      expect(started.status).toBe(201);
      // The browser comes back to the callback of whichever instance; here, the other one.
      const back = new URL(world.consent(started.body.authorization_url));
      const callback = await fetch(`${b}${back.pathname}${back.search}`);
      expect(callback.status).toBe(200);
      const page = await callback.text();
      expect(page, page).toContain('Connected');
      world.set({ accessTokenLifetime: 3600 }); // the refreshed token is outside the margin
      await new Promise((resolve) => setTimeout(resolve, 1_100));

      const replies = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          call(i % 2 ? a : b, 'GET', '/api/oauth/credentials/acme/alice/linear', ROOT_KEY),
        ),
      );
      expect(replies.map((reply) => reply.status)).toEqual(Array(50).fill(200));
      expect(world.stats.refreshes).toBe(1);
      const tokens = new Set(replies.map((reply) => reply.body.access_token));
      expect(tokens.size).toBe(1);
      expect(world.isValidAccessToken([...tokens][0] as string)).toBe(true);
    } finally {
      for (const broker of brokers) await broker.stop();
      await served.close();
      await db.drop();
    }
  });
});
