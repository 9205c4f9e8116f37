import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrokerProcess, startBrokerProcess } from '@keyway/test-support/processes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callApi, serveWorld } from './peers.js';

/*
 * No hidden class made per request (docs/benchmarks.md "No hidden class per request"). On
 * Node 20 an object spread at a site that has seen several shapes gives each copy a map of
 * its own, off the transition tree: a class per request, paid in CPU on every request after
 * it (a connection read went from 39 to 46 µs). V8's map log (`--log-maps`) counts the maps
 * a process makes; `keyway serve`, as shipped (request log on, SQLite), answers each route
 * 400 and then 1,600 times in two processes, and the difference per request is the
 * classes that route makes each time it is asked, in whole classes: a per-request class
 * counts 1 or more; the maps V8 makes with time (an optimization, a timer's work) round to 0.
 */

const ROOT_KEY = 'hidden-classes-root-key-0123456789abcdef';
const VAULT_KEY = 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8';
const CONNECTION = 'acme/users/alice/demo';
const dir = mkdtempSync(join(tmpdir(), 'keyway-hidden-classes-'));

/** One kind of request; `i` is unique to the request in the whole test (a mint's name). */
type Ask = (base: string, token: string, i: number) => Promise<number>;

/** A JSON route of the API, by `callApi`: its status. */
const read = (base: string, token: string, method: string, path: string, body?: unknown) =>
  callApi(base, token, method, path, body).then((answer) => answer.status);

const ROUTES: Record<string, Ask> = {
  'token read': (base, token) => read(base, token, 'GET', '/api/admin/tokens/agent'),
  'connection read': (base, token) =>
    read(base, token, 'GET', `/api/oauth/connections/${CONNECTION}`),
  'connection list': (base, token) => read(base, token, 'GET', '/api/oauth/connections?limit=10'),
  'credentials hand-out': (base, token) =>
    read(base, token, 'GET', `/api/oauth/credentials/${CONNECTION}`),
  'token mint': (base, _token, i) =>
    read(base, ROOT_KEY, 'POST', '/api/admin/tokens', {
      name: `load.${i}`,
      scopes: ['acme/load'],
      expires_in: 600,
    }),
  // Not JSON for callApi: the gateway may answer an event stream.
  'gateway tools/call': async (base, token, i) => {
    const response = await fetch(`${base}/mcp/${CONNECTION}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-11-25',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: i,
        method: 'tools/call',
        params: { name: 'echo', arguments: { text: `call ${i}` } },
      }),
    });
    await response.arrayBuffer();
    return response.status;
  },
};

/** What a route answers: 201 for a mint, 200 otherwise. */
const expected = (route: string) => (route === 'token mint' ? 201 : 200);

describe('hidden classes per request, keyway serve on SQLite', () => {
  let served: Awaited<ReturnType<typeof serveWorld>>;
  let env: Record<string, string>;
  let token: string;

  beforeAll(async () => {
    served = await serveWorld({ accessTokenLifetime: 86_400 });
    env = {
      KEYWAY_ROOT_KEY: ROOT_KEY,
      KEYWAY_DATABASE: join(dir, 'keyway.sqlite'),
      KEYWAY_VAULT_KEYS: VAULT_KEY,
      KEYWAY_ALLOWED_HOSTS: '127.0.0.1',
      KEYWAY_BASE_URL: 'http://localhost:8787',
    };
    const broker = await startBrokerProcess(env);
    try {
      const call = (method: string, path: string, body?: unknown) =>
        callApi(broker.url, ROOT_KEY, method, path, body);
      expect(
        (
          await call('PUT', '/api/admin/providers/demo', {
            template: 'mcp',
            configuration: { resource_url: served.world.resourceUrl },
          })
        ).status,
      ).toBe(201);
      const started = await call('POST', '/api/oauth/authorize/demo', {
        connection_id: CONNECTION,
      });
      const back = new URL(served.world.consent(started.body.authorization_url));
      const landed = await fetch(`${broker.url}${back.pathname}${back.search}`);
      expect(landed.status).toBe(200);
      await landed.text();
      const minted = await call('POST', '/api/admin/tokens', {
        name: 'agent',
        scopes: ['acme'],
        expires_in: 86_400,
      });
      expect(minted.status).toBe(201);
      token = minted.body.access_token;
    } finally {
      await broker.stop();
    }
  }, 120_000);

  afterAll(async () => {
    await served?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The maps a fresh `keyway serve` made by its exit, having answered `route` `n` times. */
  async function mapsAfter(route: string, n: number): Promise<number> {
    const log = join(dir, `${route.replaceAll(/\W/g, '-')}-${n}.log`);
    let broker: BrokerProcess | null = await startBrokerProcess(env, [
      '--log-maps',
      '--no-logfile-per-isolate',
      `--logfile=${log}`,
    ]);
    try {
      const ask = ROUTES[route] as Ask;
      const statuses = new Map<number, number>();
      for (let i = 0; i < n; i++) {
        const status = await ask(broker.url, token, n * 10_000 + i);
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
      }
      expect([...statuses]).toEqual([[expected(route), n]]);
      await broker.stop();
      broker = null;
    } finally {
      await broker?.stop();
    }
    // The log is written through at exit; a line per map created or changed.
    let maps = 0;
    for (const line of readFileSync(log, 'latin1').split('\n')) if (line.startsWith('map,')) maps++;
    return maps;
  }

  it('makes none on the token and connection reads, lists, hand-outs, mints and gateway calls', async () => {
    const perRequest: Record<string, number> = {};
    for (const route of Object.keys(ROUTES)) {
      const few = await mapsAfter(route, 400);
      const many = await mapsAfter(route, 1_600);
      // Whole classes: what V8 makes with time (a late optimization, a timer's work in the
      // longer run) came to 0.1 a request at most here; a class per request counts 1. The
      // longer run may also make a few maps fewer than the shorter: that reads 0, not -0.
      perRequest[route] = Math.max(0, Math.round((many - few) / 1_200));
    }
    expect(perRequest).toEqual(Object.fromEntries(Object.keys(ROUTES).map((route) => [route, 0])));
  }, 300_000);
});
