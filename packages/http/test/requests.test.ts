import { EventEmitter } from 'node:events';
import { memoryStorage } from '@keyway/store-memory';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createHandler } from '../src/index.js';
import { connectionGone } from '../src/node/handler.js';
import { toNodeHandler } from '../src/node/index.js';
import { HEALTH_ROUTES } from '../src/routes/health.js';
import {
  compileRoutes,
  matchRoutes,
  type Route,
  type RouteContext,
  routesOf,
} from '../src/routes/index.js';
import { Harness, listenOnLoopback, ROOT_KEY, sendRaw } from './harness.js';

describe('request handling (docs/api.md §1.2)', () => {
  let h: Harness;

  beforeEach(() => {
    h = new Harness(memoryStorage());
  });

  afterEach(() => {
    expect(h.errors).toEqual([]);
  });

  it('answers 405 with Allow for a known path and a wrong method', async () => {
    const reply = await h.call('PUT', '/api/admin/tokens', { body: {} });
    expect(reply.status).toBe(405);
    expect(reply.headers.get('allow')).toBe('GET, POST');
    expect(reply.body.error).toBe('method_not_allowed');
    const named = await h.call('POST', '/api/admin/tokens/alice');
    expect(named.headers.get('allow')).toBe('GET, PATCH, DELETE');
  });

  it('answers 404 not_found for an unknown route', async () => {
    for (const path of ['/', '/api', '/api/admin', '/api/admin/tokensx', '/api/admin/tokens/']) {
      const reply = await h.call('GET', path);
      expect(reply.status, path).toBe(404);
      expect(reply.body.error).toBe('not_found');
    }
  });

  it("checks a token through the storage's lookups in their order: synchronous, the check's asynchronous one, the whole record", async () => {
    const storage = memoryStorage();
    const used: string[] = [];
    const counted = (sync: boolean, check: boolean) =>
      new Harness({
        ...storage,
        fastPaths: {
          ...(sync
            ? {
                findTokenByIdHashSync: (idHash: string) => {
                  used.push('sync');
                  return storage.fastPaths?.findTokenByIdHashSync?.(idHash) ?? null;
                },
              }
            : {}),
          ...(check
            ? {
                findTokenCheckByIdHash: async (idHash: string) => {
                  used.push('check');
                  return storage.findTokenByIdHash(idHash);
                },
              }
            : {}),
        },
        findTokenByIdHash: async (idHash: string) => {
          used.push('record');
          return storage.findTokenByIdHash(idHash);
        },
      });
    for (const [sync, check, expected] of [
      [true, true, 'sync'],
      [false, true, 'check'],
      [false, false, 'record'],
    ] as const) {
      const harness = counted(sync, check);
      const token = await harness.mint(`reader-${expected}`, ['a']);
      used.length = 0;
      expect((await harness.call('GET', '/api/admin/tokens', { token })).status).toBe(200);
      expect(used).toEqual([expected]);
      expect(
        (await harness.call('GET', '/api/admin/tokens', { token: `${token.slice(0, -2)}AA` }))
          .status,
      ).toBe(401);
    }
  });

  it('hands every route the same kind of context: its principal read through the prototype, never an accessor of its own', async () => {
    // A context written as an object literal with a getter had V8 make a hidden class per
    // request (holding that request until a full collection): the shape is held here.
    const route = HEALTH_ROUTES.find((candidate) => candidate.id === 'healthz') as Route;
    const original = route.handle;
    const seen: RouteContext[] = [];
    route.handle = async (context) => {
      seen.push(context);
      return original(context);
    };
    try {
      expect((await h.call('GET', '/healthz')).status).toBe(200);
      expect((await h.call('GET', '/healthz')).status).toBe(200);
    } finally {
      route.handle = original;
    }
    const [first, second] = seen as [RouteContext, RouteContext];
    expect(seen.length).toBe(2);
    expect(Object.getPrototypeOf(first)).toBe(Object.getPrototypeOf(second));
    expect(Object.getPrototypeOf(first)).not.toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(first, 'principal')).toBeUndefined();
    expect(Object.keys(first)).toEqual(Object.keys(second));
    // A public route has no principal: reading it throws, as before.
    expect(() => first.principal).toThrow('a public route has no principal');
    // Handlers take the functions apart: each works without its object.
    const { document, query } = first;
    expect(JSON.parse(document()).openapi).toMatch(/^3\./);
    expect(query()).toEqual({});
  });

  it('routes a path only to the templates it matches, prefixes shared or not', async () => {
    const table = compileRoutes(routesOf(true));
    const ids = (path: string) =>
      matchRoutes(table, path).map(({ route, param }) => [route.id, param]);
    expect(ids('/healthz')).toEqual([['healthz', '']]);
    expect(ids('/healthzx')).toEqual([]);
    expect(ids('/api/admin/tokens')).toEqual([
      ['listTokens', ''],
      ['mintToken', ''],
    ]);
    expect(ids('/api/admin/tokens/a.b')).toEqual([
      ['getToken', 'a.b'],
      ['narrowToken', 'a.b'],
      ['deleteToken', 'a.b'],
    ]);
    expect(ids('/api/admin/tokens/')).toEqual([]);
    // An exact template, and one with a parameter under it.
    expect(ids('/api/oauth/callback')).toEqual([['callback', '']]);
    expect(ids('/api/oauth/callback/k1')).toEqual([['serverCallback', 'k1']]);
    // A dot in a template is a dot.
    expect(ids('/api/oauth/client-metadata.json').length).toBe(1);
    expect(ids('/api/oauth/client-metadataXjson')).toEqual([]);
    expect(ids('/mcp/acme/alice/demo')).toEqual([
      ['gatewayPost', 'acme/alice/demo'],
      ['gatewayGet', 'acme/alice/demo'],
      ['gatewayDelete', 'acme/alice/demo'],
    ]);
  });

  it('finds for any path what a scan of every template finds, in the order declared', () => {
    // Two templates whose first segment is a parameter or partial: held to every path.
    const base = HEALTH_ROUTES[0] as Route;
    const routes: Route[] = [
      { ...base, id: 'anyFirst', path: '/{any}' },
      ...routesOf(true),
      { ...base, id: 'partial', path: '/mc{rest}' },
    ];
    const table = compileRoutes(routes);
    const scanned = (path: string) =>
      routes.flatMap((route) => {
        const source = route.path.replace(/[.]/g, '\\.').replace(/\{[a-z_]+\}/, '(.+)');
        const match = new RegExp(`^${source}$`).exec(path);
        return match === null ? [] : [[route.id, match[1] ?? '']];
      });
    const paths = ['', '/', '//', '/mcp', '/mcp/', '/mcpx/a', '/nowhere/a/b', '/api', '/api/'];
    for (const { path } of routes) {
      const brace = path.indexOf('{');
      const prefix = brace === -1 ? path : path.slice(0, brace);
      paths.push(path, prefix, `${prefix}a`, `${prefix}a/b`, `${path}/x`, `${path}x`);
    }
    let matched = 0;
    for (const path of paths) {
      const found = matchRoutes(table, path).map(({ route, param }) => [route.id, param]);
      expect(found, path).toEqual(scanned(path));
      if (found.length > 0) matched++;
    }
    // Every path answered by the first template, and most by more than it.
    expect(matched).toBe(paths.length - 3);
    expect(matchRoutes(table, '/mcp/a').map(({ route }) => route.id)).toEqual([
      'anyFirst',
      'gatewayPost',
      'gatewayGet',
      'gatewayDelete',
      'partial',
    ]);
  });

  it('answers 415 for a body that is not application/json', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/jsonx']) {
      const reply = await h.call('POST', '/api/admin/tokens', {
        raw: '{"name":"a","scopes":["a"]}',
        headers: { 'content-type': type },
      });
      expect(reply.status, type).toBe(415);
      expect(reply.body.error).toBe('unsupported_media_type');
    }
    const ok = await h.call('POST', '/api/admin/tokens', {
      raw: '{"name":"a","scopes":["a"]}',
      headers: { 'content-type': 'Application/JSON; charset=utf-8' },
    });
    expect(ok.status).toBe(201);
  });

  it('answers 413 for a 2 MiB body, before the media type is looked at', async () => {
    const big = JSON.stringify({ name: 'a', scopes: ['a'], pad: 'x'.repeat(2 * 1024 * 1024) });
    const reply = await h.call('POST', '/api/admin/tokens', { raw: big });
    expect(reply.status).toBe(413);
    expect(reply.body.error).toBe('payload_too_large');
    const wrongType = await h.call('POST', '/api/admin/tokens', {
      raw: big,
      headers: { 'content-type': 'text/plain' },
    });
    expect(wrongType.status).toBe(413);
  });

  it('answers 413 for a streamed body without Content-Length that grows past the limit', async () => {
    const chunk = new Uint8Array(256 * 1024).fill(0x20);
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= 8) controller.close();
        else {
          sent++;
          controller.enqueue(chunk);
        }
      },
    });
    const response = await h.handler(
      new Request('http://keyway.test/api/admin/tokens', {
        method: 'POST',
        headers: { authorization: `Bearer ${ROOT_KEY}`, 'content-type': 'application/json' },
        body: stream,
        duplex: 'half',
      } as RequestInit),
    );
    expect(response.status).toBe(413);
    expect(sent).toBeLessThanOrEqual(6);
  });

  it.each([
    ['malformed JSON', '{"name": "a", '],
    ['a JSON array', '[{"name":"a","scopes":["a"]}]'],
    ['a JSON string', '"hello"'],
    ['JSON null', 'null'],
    ['an empty body', ''],
    ['invalid UTF-8', new Uint8Array([0x7b, 0xff, 0x7d])],
    ['wrong types', '{"name":["a"],"scopes":"a"}'],
    ['an unknown field', '{"name":"a","scopes":["a"],"admin":true}'],
    ['a __proto__ field', '{"name":"a","scopes":["a"],"__proto__":{"x":1}}'],
    ['a missing field', '{"name":"a"}'],
  ])('answers 400 invalid_request for %s', async (_, raw) => {
    const reply = await h.call('POST', '/api/admin/tokens', { raw });
    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('invalid_request');
    expect(Object.keys(reply.body).sort()).toEqual(
      reply.body.details
        ? ['details', 'error', 'error_description']
        : ['error', 'error_description'],
    );
  });

  it.each([
    ['%2F', '/api/admin/tokens/a%2Fb'],
    ['a nested path', '/api/admin/tokens/a/b'],
    ['a backslash', '/api/admin/tokens/a%5Cb'],
    ['a control character', '/api/admin/tokens/a%00b'],
    ['513 characters', `/api/admin/tokens/${'a'.repeat(513)}`],
    ['malformed percent-encoding', '/api/admin/tokens/a%E0%A4'],
    ['an encoded dot segment', '/api/admin/tokens/%2e%2e'],
  ])('answers 4xx, never 500, for a name path with %s', async (_, path) => {
    const reply = await h.call('GET', path);
    expect(reply.status).toBeGreaterThanOrEqual(400);
    expect(reply.status).toBeLessThan(500);
    expect(typeof reply.body.error).toBe('string');
  });

  it('serves under a base path and nowhere else', async () => {
    const handler = createHandler(h.broker, { basePath: '/keyway/' });
    const call = (path: string) =>
      handler(new Request(`http://x${path}`, { headers: { authorization: `Bearer ${ROOT_KEY}` } }));
    expect((await call('/keyway/api/admin/tokens')).status).toBe(200);
    expect((await call('/api/admin/tokens')).status).toBe(404);
    expect((await call('/keywayx/api/admin/tokens')).status).toBe(404);
    expect(() => createHandler(h.broker, { basePath: 'keyway' })).toThrow(TypeError);
  });

  it.each([
    ['asynchronous', 'findTokenByIdHash'],
    ['synchronous', 'findTokenByIdHashSync'],
    ["check's asynchronous", 'findTokenCheckByIdHash'],
  ] as const)(
    'answers 500 internal_error without internals when a %s storage read fails',
    async (_, method) => {
      const storage = memoryStorage();
      const fire = () => {
        throw new Error('database is on fire at 10.0.0.7');
      };
      const failing = new Harness({
        ...storage,
        fastPaths: {
          ...(method === 'findTokenByIdHashSync' ? { findTokenByIdHashSync: fire } : {}),
          ...(method === 'findTokenCheckByIdHash'
            ? { findTokenCheckByIdHash: async () => fire() }
            : {}),
        },
        findTokenByIdHash:
          method === 'findTokenByIdHash' ? async () => fire() : storage.findTokenByIdHash,
      });
      const token = await failing.mint('a', ['a']);
      const reply = await failing.call('GET', '/api/admin/tokens', { token });
      expect(reply.status).toBe(500);
      expect(reply.body).toEqual({
        error: 'internal_error',
        error_description: 'the server failed to handle the request',
      });
      expect(failing.errors).toHaveLength(1);
    },
  );
});

describe('toNodeHandler() over loopback HTTP', () => {
  let server: Awaited<ReturnType<typeof listenOnLoopback>>;
  let port: number;

  beforeAll(async () => {
    server = await listenOnLoopback(toNodeHandler(new Harness(memoryStorage()).handler));
    port = server.port;
  });

  afterAll(() => server.close());

  /** Sends a raw request target, which fetch() would normalize first. */
  async function send(
    method: string,
    path: string,
    body?: string,
    headers: Record<string, string> = {},
  ): Promise<{ status: number; headers: Record<string, unknown>; body: any }> {
    const reply = await sendRaw({
      port,
      method,
      path,
      headers: {
        authorization: `Bearer ${ROOT_KEY}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      ...(body === undefined ? {} : { body }),
    });
    return {
      status: reply.status,
      headers: reply.headers,
      body: reply.text === '' ? null : JSON.parse(reply.text),
    };
  }

  it('mints, reads and deletes a token through Node http', async () => {
    const minted = await send('POST', '/api/admin/tokens', '{"name":"node","scopes":["a"]}');
    expect(minted.status).toBe(201);
    expect(minted.headers['cache-control']).toBe('no-store');
    const read = await send('GET', '/api/admin/tokens/node', undefined, {
      authorization: `Bearer ${minted.body.access_token}`,
    });
    expect(read.status).toBe(200);
    expect(read.body.name).toBe('node');
    const gone = await send('DELETE', '/api/admin/tokens/node');
    expect(gone.status).toBe(204);
    expect(gone.body).toBeNull();
  });

  it('refuses dot segments and backslashes in the raw target instead of resolving them', async () => {
    // new URL() would read /api/admin/tokens/x/../alice as /api/admin/tokens/alice.
    await send('POST', '/api/admin/tokens', '{"name":"alice","scopes":["a"]}');
    for (const path of [
      '/api/admin/tokens/x/../alice',
      '/api/admin/tokens/.',
      '/api/admin/tokens\\alice',
    ]) {
      const reply = await send('GET', path);
      expect(reply.status, path).toBeGreaterThanOrEqual(400);
      expect(reply.status, path).toBeLessThan(500);
      expect(reply.body?.name).toBeUndefined();
    }
  });

  it('refuses dot segments in a resource path instead of reading another path', async () => {
    await send('PUT', '/api/vault/secrets/b', '{"value":"the wrong secret"}');
    for (const path of [
      '/api/vault/secrets/a/../b',
      '/api/vault/secrets/a/%2e%2e/b',
      '/api/vault/secrets/a/./b',
      '/api/vault/secrets/a\\b',
    ]) {
      const reply = await send('GET', path);
      expect(reply.status, path).toBe(400);
      expect(reply.body.error, path).toBe('invalid_path');
    }
  });

  it('answers 413 for a 2 MiB body sent over the socket', async () => {
    const reply = await send(
      'POST',
      '/api/admin/tokens',
      JSON.stringify({ pad: 'x'.repeat(2 << 20) }),
    );
    expect(reply.status).toBe(413);
  });
});

describe('toNodeHandler() around a fetch handler that fails', () => {
  it('answers 500 internal_error when the handler throws before it answers, and hands the error to next() when there is one', async () => {
    const failure = new Error('the app broke: /srv/app/secret.ts');
    const failing = async (): Promise<Response> => {
      throw failure;
    };
    const reported: unknown[] = [];
    const alone = await listenOnLoopback(
      toNodeHandler(failing, { onInternalError: (error) => reported.push(error) }),
    );
    try {
      const reply = await sendRaw({
        port: alone.port,
        method: 'GET',
        path: '/anything',
        headers: {},
      });
      expect(reply.status).toBe(500);
      expect(reply.headers['content-type']).toBe('application/json');
      expect(JSON.parse(reply.text)).toEqual({
        error: 'internal_error',
        error_description: 'the server failed to handle the request',
      });
      expect(reply.text).not.toContain('secret');
      expect(reported).toEqual([failure]);
    } finally {
      await alone.close();
    }
    const seen: unknown[] = [];
    const node = toNodeHandler(failing, { onInternalError: (error) => reported.push(error) });
    const chained = await listenOnLoopback((req, res) =>
      node(req, res, (error) => {
        seen.push(error);
        res.statusCode = 502;
        res.end('from next');
      }),
    );
    try {
      const reply = await sendRaw({ port: chained.port, method: 'GET', path: '/x', headers: {} });
      expect(reply.status).toBe(502);
      expect(reply.text).toBe('from next');
      expect(seen).toEqual([failure]);
      expect(reported).toEqual([failure]);
    } finally {
      await chained.close();
    }
  });
});

describe('connectionGone: the signal of every forwarded request on a client connection', () => {
  it('is one per connection, aborted when it closes, and aborted at once for one already closed', () => {
    const open = Object.assign(new EventEmitter(), { destroyed: false });
    const signal = connectionGone(open);
    expect(connectionGone(open)).toBe(signal);
    expect(signal.aborted).toBe(false);
    open.emit('close');
    expect(signal.aborted).toBe(true);
    expect((signal.reason as DOMException).name).toBe('AbortError');
    expect((signal.reason as DOMException).message).toBe('the client went away');

    // A client that left while its request's body was read: no `close` will come.
    const closed = Object.assign(new EventEmitter(), { destroyed: true });
    expect(connectionGone(closed).aborted).toBe(true);
    expect(connectionGone(new EventEmitter()).aborted).toBe(false);
  });
});
