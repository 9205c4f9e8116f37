import { memoryStorage } from '@keyway/store-memory';
import { createTestWorld, type TestWorld } from '@keyway/testing';
import { beforeEach, describe, expect, it } from 'vitest';
import { connectThroughConsent, Harness, putProvider, START } from './harness.js';

const BASE = 'https://keyway.example.test';
const CONNECTION = 'acme/alice/linear';

/** How the MCP server in front of the world behaves, per test. */
type McpMode = 'world' | 'stateless' | 'down' | 'refuses';

describe('POST /api/oauth/probe/<connection> (docs/api.md §8)', () => {
  let world: TestWorld;
  let h: Harness;
  let mode: McpMode;
  let seen: { method: string; version: string | null; meta: boolean }[];

  beforeEach(async () => {
    mode = 'world';
    seen = [];
    world = createTestWorld({ now: () => h?.now ?? START });
    const mcpHost = new URL(world.resourceUrl).origin;
    const fetch = async (input: string | URL | Request, init?: RequestInit) => {
      const request = new Request(input, init);
      if (!request.url.startsWith(mcpHost) || !request.headers.has('authorization')) {
        return world.fetch(request);
      }
      const body = request.method === 'POST' ? await request.clone().text() : '';
      const message =
        body === ''
          ? null
          : (JSON.parse(body) as { id?: number; method: string; params?: { _meta?: unknown } });
      if (message !== null) {
        seen.push({
          method: message.method,
          version: request.headers.get('mcp-protocol-version'),
          meta: message.params?._meta !== undefined,
        });
      }
      if (mode === 'down') throw new TypeError('fetch failed: connect ECONNREFUSED');
      if (mode === 'refuses') {
        return new Response('{}', {
          status: 401,
          headers: { 'www-authenticate': 'Bearer error="invalid_token"' },
        });
      }
      if (mode === 'stateless' && message?.method === 'server/discover') {
        return Response.json({
          jsonrpc: '2.0',
          id: message.id,
          result: {
            supportedVersions: ['2026-07-28'],
            serverInfo: { name: 'modern', version: '2.0' },
          },
        });
      }
      return world.fetch(request);
    };
    h = new Harness(memoryStorage(), { fetch, baseUrl: BASE, providerManagement: true });
    await putProvider(h, world);
    expect((await connectThroughConsent(h, world, CONNECTION)).status).toBe(200);
  });

  const probe = (path = CONNECTION, token?: string) =>
    h.call('POST', `/api/oauth/probe/${path}`, token === undefined ? {} : { token });

  it('speaks the stateful wire to a server without server/discover, and never shows the token', async () => {
    const reply = await probe();
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({
      ok: true,
      server: { name: 'keyway-test-world', version: '1', protocol_version: '2025-06-18' },
      tools: [{ name: 'echo', description: 'Echoes its arguments' }],
      steps: [
        {
          step: 'discover',
          status: 200,
          ok: true,
          note: 'no server/discover (JSON-RPC error -32601: Method not found): the stateful wire',
        },
        {
          step: 'initialize',
          status: 200,
          ok: true,
          note: '"keyway-test-world" "1", protocol 2025-06-18',
        },
        { step: 'initialized', status: 202, ok: true, note: 'acknowledged' },
        { step: 'tools/list', status: 200, ok: true, note: '1 tool' },
      ],
    });
    expect(seen.map((call) => [call.method, call.version])).toEqual([
      ['server/discover', '2026-07-28'],
      ['initialize', null],
      ['notifications/initialized', '2025-06-18'],
      ['tools/list', '2025-06-18'],
    ]);
    const credentials = await h.call('GET', `/api/oauth/credentials/${CONNECTION}`);
    expect(reply.text).not.toContain(credentials.body.access_token);
  });

  it('speaks the stateless 2026-07-28 wire to a server that answers server/discover', async () => {
    mode = 'stateless';
    const reply = await probe();
    expect(reply.body).toMatchObject({
      ok: true,
      server: { name: 'modern', version: '2.0', protocol_version: '2026-07-28' },
      tools: [{ name: 'echo' }],
    });
    expect(reply.body.steps.map((step: { step: string }) => step.step)).toEqual([
      'discover',
      'tools/list',
    ]);
    expect(seen).toEqual([
      { method: 'server/discover', version: '2026-07-28', meta: true },
      { method: 'tools/list', version: '2026-07-28', meta: true },
    ]);
  });

  it('reports a server that cannot be reached in the failing step, with 200', async () => {
    mode = 'down';
    const reply = await probe();
    expect(reply.status).toBe(200);
    expect(reply.body.ok).toBe(false);
    expect(reply.body.server).toBeNull();
    expect(reply.body.steps).toHaveLength(1);
    expect(reply.body.steps[0]).toMatchObject({ step: 'discover', status: null, ok: false });
    expect(reply.body.steps[0].note).toMatch(/^https:\/\/mcp\.example\.test: /);
  });

  it('reports a server that refuses the token, also after one refresh', async () => {
    mode = 'refuses';
    const refreshes = world.stats.refreshes;
    const reply = await probe();
    expect(reply.body).toEqual({
      ok: false,
      server: null,
      tools: [],
      steps: [
        {
          step: 'discover',
          status: 401,
          ok: false,
          note: 'the server refused the token (HTTP 401), also after a refresh',
        },
      ],
    });
    expect(world.stats.refreshes).toBe(refreshes + 1);
  });

  it('answers 409 for a connection that is not active, and 403 outside the caller’s scopes', async () => {
    await h.call('POST', '/api/oauth/authorize/linear', {
      body: { connection_id: 'acme/bob/linear' },
    });
    const pending = await probe('acme/bob/linear');
    expect([pending.status, pending.body.error]).toEqual([409, 'connection_not_active']);
    const bob = await h.mint('bob', ['acme/bob']);
    const outside = await probe(CONNECTION, bob);
    expect([outside.status, outside.body.error]).toEqual([403, 'insufficient_scope']);
    const missing = await probe('acme/nobody');
    expect([missing.status, missing.body.error]).toEqual([404, 'not_found']);
    expect(seen).toEqual([]);
  });
});
