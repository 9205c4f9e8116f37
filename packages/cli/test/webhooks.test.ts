import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase } from '@keyway/test-support/postgres';
import { type BrokerProcess, startBrokerProcess } from '@keyway/test-support/processes';
import { startWebhookReceiver } from '@keyway/test-support/webhooks';
import { afterAll, afterEach, describe, expect, inject, it } from 'vitest';
import { freePort } from './peers.js';

const ROOT_KEY = 'webhook-processes-root-key-0123456789abcdef';
const VAULT_KEY = 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8';
const SECRET = 'whsec_KQ5oHY3H4w0DbhjLB5dgBtmG8wFJk3WQ';
const dir = mkdtempSync(join(tmpdir(), 'keyway-webhooks-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function call(base: string, method: string, path: string, body?: unknown) {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${ROOT_KEY}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

async function until(condition: () => boolean, what: string, seconds = 30) {
  for (let waited = 0; !condition(); waited += 50) {
    if (waited > seconds * 1000) throw new Error(`waited ${seconds} s for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe.each([
  {
    engine: 'SQLite',
    database: async () => ({ url: join(dir, `hooks-${Date.now()}.sqlite`), drop: async () => {} }),
  },
  { engine: 'PostgreSQL', database: () => createTestDatabase(inject('databaseUrl')) },
])('webhooks of keyway serve on $engine', ({ database }) => {
  const processes: BrokerProcess[] = [];
  const closers: (() => Promise<void>)[] = [];
  let drop = async () => {};

  afterEach(async () => {
    for (const broker of processes.splice(0)) await broker.stop();
    for (const close of closers.splice(0)) await close();
    await drop();
  });

  async function environment(hookPort: number) {
    const db = await database();
    drop = db.drop;
    const env: Record<string, string> = {
      KEYWAY_ROOT_KEY: ROOT_KEY,
      KEYWAY_DATABASE: db.url,
      KEYWAY_ALLOWED_HOSTS: '127.0.0.1',
      KEYWAY_WEBHOOK_URL: `http://127.0.0.1:${hookPort}/keyway`,
      KEYWAY_WEBHOOK_SECRET: SECRET,
    };
    if (db.url.startsWith('postgres')) env.KEYWAY_VAULT_KEYS = VAULT_KEY;
    return env;
  }

  it('delivers an event whose process was killed with SIGKILL before it could, once restarted', async () => {
    const port = await freePort();
    const env = await environment(port);
    const first = await startBrokerProcess(env);
    processes.push(first);
    const minted = await call(first.url, 'POST', '/api/admin/tokens', {
      name: 'survivor',
      scopes: ['acme'],
    });
    expect(minted.status).toBe(201);
    // The change is committed; the endpoint is not listening, so nothing was delivered.
    first.child.kill('SIGKILL');
    await once(first.child, 'exit');
    expect(first.child.signalCode).toBe('SIGKILL');

    const hook = await startWebhookReceiver({ secret: SECRET, port, status: () => 204 });
    closers.push(hook.close);
    const second = await startBrokerProcess(env);
    processes.push(second);
    // Killed mid-attempt, the dead process holds its lease for at most 30 s.
    await until(() => hook.received.length > 0, 'the delivery after the restart', 45);
    const audit = await call(second.url, 'GET', '/api/admin/audit?type=token.created');
    const [event] = audit.body.items;
    expect(event).toMatchObject({ type: 'token.created', actor: 'root', resource: 'survivor' });
    expect(
      hook.received.map(({ id, event, verified }) => ({
        id,
        type: event.type,
        resource: event.resource,
        verified,
      })),
    ).toEqual([{ id: event.id, type: 'token.created', resource: 'survivor', verified: true }]);
    const delivered = await call(
      second.url,
      'GET',
      '/api/admin/webhooks/deliveries?status=delivered',
    );
    expect(delivered.body.items.map((d: { event: { id: string } }) => d.event.id)).toEqual([
      event.id,
    ]);
    expect(second.output()).not.toContain(SECRET);
  }, 90_000);

  it('two processes run each attempt once: every event twice (a failure, then a success), never more', async () => {
    const hook = await startWebhookReceiver({
      secret: SECRET,
      status: (_, nth) => (nth === 1 ? 500 : 204),
    });
    closers.push(hook.close);
    const env = await environment(hook.port);
    const [a, b] = await Promise.all([startBrokerProcess(env), startBrokerProcess(env)]);
    processes.push(a as BrokerProcess, b as BrokerProcess);
    const bases = [(a as BrokerProcess).url, (b as BrokerProcess).url];
    const replies = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        call(bases[i % 2] as string, 'POST', '/api/admin/tokens', {
          name: `bot-${i}`,
          scopes: ['acme'],
        }),
      ),
    );
    expect(replies.map((reply) => reply.status)).toEqual(Array(20).fill(201));
    // Each first attempt fails; the retries come 5 s later, from either process.
    await until(() => hook.received.length >= 40, '40 attempts');
    // Give a duplicate attempt, if there were one, time to arrive.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    const ids = new Map<string, number>();
    for (const r of hook.received) ids.set(r.id, (ids.get(r.id) ?? 0) + 1);
    expect(ids.size).toBe(20);
    expect([...ids.values()]).toEqual(Array(20).fill(2));
    expect(hook.received.every((r) => r.verified)).toBe(true);
    expect(new Set(hook.received.map((r) => r.event.resource)).size).toBe(20);
    const delivered = await call(
      bases[0] as string,
      'GET',
      '/api/admin/webhooks/deliveries?status=delivered&limit=500',
    );
    expect(delivered.body.items).toHaveLength(20);
    expect(delivered.body.items.every((d: { attempts: number }) => d.attempts === 2)).toBe(true);
  }, 90_000);
});
