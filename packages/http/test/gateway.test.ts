import { getEventListeners, once } from 'node:events';
import { createServer, Agent as HttpAgent, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { connectionFetch, rootPrincipal } from '@keyway/core';
import { parseMetrics, sampleOf } from '@keyway/test-support/prometheus';
import { createTestWorld } from '@keyway/testing';
import {
  Client as ModernClient,
  StreamableHTTPClientTransport as ModernTransport,
} from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UrlElicitationRequiredError } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createMetrics } from '../src/metrics/index.js';
import { connectionGone } from '../src/node/handler.js';
import { toNodeHandler } from '../src/node/index.js';
import { gate, Upstream } from './gateway-upstream.js';
import {
  connectThroughConsent,
  Harness,
  ROOT_KEY,
  START,
  storageFactories,
  UPSTREAM_TRANSPORTS,
} from './harness.js';

const CONNECTION = 'acme/users/alice/linear';
const sqlite = storageFactories.find((factory) => factory.name === 'sqlite');

/** What an MCP client received from the gateway: every header and body, as text. */
class Received {
  readonly texts: Promise<string>[] = [];
  readonly headers: [string, string][] = [];
  /** A fetch for the SDK transports that keeps a copy of each answer. */
  readonly fetch = async (input: string | URL | Request, init?: RequestInit) => {
    const response = await fetch(input, init);
    response.headers.forEach((value, name) => {
      this.headers.push([name, value]);
    });
    this.texts.push(
      response
        .clone()
        .text()
        .catch(() => ''),
    );
    return response;
  };

  async all(): Promise<string> {
    const texts = await Promise.all(this.texts);
    return [...this.headers.map(([name, value]) => `${name}: ${value}`), ...texts].join('\n');
  }
}

describe.each(UPSTREAM_TRANSPORTS)(
  'the MCP gateway: {base}/mcp/<connection> (docs/api.md §13), %s',
  (_, transport) => {
    let upstream: Upstream;
    let h: Harness;
    let keyway: Server;
    let base: string;
    const clients: { close(): Promise<void> }[] = [];

    beforeEach(async () => {
      upstream = new Upstream();
      await upstream.start((origin) =>
        createTestWorld({
          issuer: `${origin}/as`,
          resourceUrl: `${origin}/mcp`,
          now: () => h?.now ?? START,
        }),
      );
      keyway = createServer();
      keyway.listen(0, '127.0.0.1');
      await once(keyway, 'listening');
      base = `http://127.0.0.1:${(keyway.address() as AddressInfo).port}`;
      h = new Harness(await (sqlite?.create() ?? Promise.reject(new Error('no sqlite'))), {
        baseUrl: base,
        providerManagement: true,
        allowedHosts: ['127.0.0.1'],
        ...transport,
      });
      keyway.on('request', (req, res) => toNodeHandler(h.handler)(req, res));
      const put = await h.call('PUT', '/api/admin/providers/linear', {
        body: { template: 'mcp', configuration: { resource_url: upstream.world.resourceUrl } },
      });
      expect(put.status).toBe(201);
      expect((await connectThroughConsent(h, upstream.world, CONNECTION)).status).toBe(200);
    });

    afterEach(async () => {
      for (const client of clients.splice(0)) await client.close().catch(() => {});
      keyway.closeAllConnections();
      keyway.close();
      await upstream.stop();
      expect(h.errors).toEqual([]);
      await h.broker.close();
    });

    const gatewayUrl = (path = CONNECTION) => new URL(`${base}/mcp/${path}`);

    async function classicClient(
      token: string,
      received = new Received(),
    ): Promise<Client & { wire: StreamableHTTPClientTransport }> {
      const client = new Client({ name: 'gateway-test', version: '1.0.0' });
      clients.push(client);
      const transport = new StreamableHTTPClientTransport(gatewayUrl(), {
        fetch: received.fetch,
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      });
      await client.connect(transport);
      return Object.assign(client, { wire: transport });
    }

    /** Whether a secret of the upstream's (access or refresh token) is anywhere in `text`. */
    const leaks = (text: string) =>
      upstream.world.secrets().filter((secret) => text.includes(secret));

    describe('the stateful wire (initialize, Mcp-Session-Id), the official SDK on both ends', () => {
      it('serves initialize, tools/list and tools/call with SSE answers; the upstream gets only the connection’s token', async () => {
        const alice = await h.mint('alice', ['acme/users/alice']);
        const received = new Received();
        const client = await classicClient(alice, received);
        expect((await client.listTools()).tools.map((tool) => tool.name)).toEqual([
          'echo',
          'admin',
          'progress',
        ]);
        const result = await client.callTool({ name: 'echo', arguments: { text: 'hi' } });
        expect(result.content).toEqual([{ type: 'text', text: 'echo: hi' }]);
        await client.wire.terminateSession();
        await client.close();

        const methods = upstream.seen.map((seen) => {
          const body = seen.body === '' ? null : (JSON.parse(seen.body) as { method?: string });
          return `${seen.method} ${body?.method ?? ''}`.trim();
        });
        expect(methods).toContain('POST initialize');
        expect(methods).toContain('POST notifications/initialized');
        expect(methods).toContain('POST tools/call');
        expect(methods).toContain('DELETE');
        // One session, ended by the client's DELETE through the gateway.
        expect(upstream.ended).toHaveLength(1);
        expect(upstream.sessions.size).toBe(0);
        const session = upstream.ended[0];
        expect(
          upstream.seen.filter((seen) => seen.headers['mcp-session-id'] === session).length,
        ).toBe(upstream.seen.length - 1);
        // The upstream saw the connection's token and nothing of the caller's credential.
        const stored = await h.storedTokens(CONNECTION);
        expect(new Set(upstream.tokens())).toEqual(new Set([stored.access_token]));
        for (const seen of upstream.seen) {
          expect(JSON.stringify(seen.headers)).not.toContain(alice);
          expect(seen.headers.cookie).toBeUndefined();
        }
        // The client never received an upstream secret.
        expect(leaks(await received.all())).toEqual([]);
        expect(received.headers.filter(([name]) => name === 'mcp-session-id')[0]?.[1]).toBe(
          session,
        );
      });

      it('passes JSON answers as they came', async () => {
        upstream.mode = 'stateful-json';
        const client = await classicClient(ROOT_KEY);
        const result = await client.callTool({ name: 'echo', arguments: { text: 'json' } });
        expect(result.content).toEqual([{ type: 'text', text: 'echo: json' }]);
        const call = upstream.seen.find((seen) => seen.body.includes('"tools/call"'));
        expect(call?.headers.accept).toBe('application/json, text/event-stream');
        expect(call?.headers['mcp-protocol-version']).toBe('2025-11-25');
      });

      it('streams progress notifications as they arrive: the first reaches the client before the server sends the second', async () => {
        upstream.progressGate = gate();
        const client = await classicClient(ROOT_KEY);
        const progress: number[] = [];
        const result = await client.callTool({ name: 'progress', arguments: {} }, undefined, {
          onprogress: ({ progress: value }) => {
            progress.push(value);
            // The server waits for this before it sends the second: a gateway that held the
            // stream back would never let the call finish.
            if (value === 1) upstream.progressGate.release();
          },
        });
        expect(progress).toEqual([1, 2]);
        expect(result.content).toEqual([{ type: 'text', text: 'done' }]);
      });
    });

    describe('the stateless 2026-07-28 wire, the official v2 SDK on both ends', () => {
      async function modernClient(token: string, received = new Received()): Promise<ModernClient> {
        const client = new ModernClient(
          { name: 'gateway-test', version: '2.0.0' },
          { versionNegotiation: { mode: { pin: '2026-07-28' } } },
        );
        clients.push(client);
        await client.connect(
          new ModernTransport(gatewayUrl(), {
            fetch: received.fetch,
            requestInit: { headers: { authorization: `Bearer ${token}` } },
          }),
        );
        return client;
      }

      it('discovers, lists and calls with no session, the SEP-2243 headers forwarded', async () => {
        upstream.mode = 'modern';
        const received = new Received();
        const client = await modernClient(ROOT_KEY, received);
        expect((await client.listTools()).tools.map((tool) => tool.name)).toEqual([
          'echo',
          'progress',
        ]);
        const result = await client.callTool({ name: 'echo', arguments: { text: 'modern' } });
        expect(result.content).toEqual([{ type: 'text', text: 'echo: modern' }]);
        const bodies = upstream.seen
          .filter((seen) => seen.method === 'POST')
          .map((seen) => JSON.parse(seen.body) as { method: string });
        expect(bodies[0]?.method).toBe('server/discover');
        expect(bodies.map((body) => body.method)).not.toContain('initialize');
        const call = upstream.seen.find((seen) => seen.body.includes('"tools/call"'));
        expect(call?.headers['mcp-protocol-version']).toBe('2026-07-28');
        expect(call?.headers['mcp-method']).toBe('tools/call');
        expect(call?.headers['mcp-name']).toBe('echo');
        expect(upstream.seen.every((seen) => seen.headers['mcp-session-id'] === undefined)).toBe(
          true,
        );
        expect(leaks(await received.all())).toEqual([]);
      });

      it('streams progress notifications as they arrive', async () => {
        upstream.mode = 'modern';
        upstream.progressGate = gate();
        const client = await modernClient(ROOT_KEY);
        const progress: number[] = [];
        const result = await client.callTool(
          { name: 'progress', arguments: {} },
          {
            onprogress: ({ progress: value }) => {
              progress.push(value);
              if (value === 1) upstream.progressGate.release();
            },
          },
        );
        expect(progress).toEqual([1, 2]);
        expect(result.content).toEqual([{ type: 'text', text: 'done' }]);
      });
    });

    describe('credentials handled by the broker (the policy: core/test/upstream/gateway-credentials.test.ts)', () => {
      it('passes a 403 insufficient_scope back with its scope, without the upstream’s metadata', async () => {
        const received = new Received();
        const client = await classicClient(ROOT_KEY, received);
        await expect(client.callTool({ name: 'admin', arguments: {} })).rejects.toThrow();
        const answer = await fetch(gatewayUrl(), {
          method: 'POST',
          headers: {
            authorization: `Bearer ${ROOT_KEY}`,
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            'mcp-session-id': [...upstream.sessions.keys()][0] ?? '',
            'mcp-protocol-version': '2025-11-25',
          },
          body: JSON.stringify({
            jsonrpc: '2.0',
            id: 9,
            method: 'tools/call',
            params: { name: 'admin', arguments: {} },
          }),
        });
        expect(answer.status).toBe(403);
        expect(answer.headers.get('www-authenticate')).toBe(
          'Bearer realm="keyway", error="insufficient_scope", scope="admin"',
        );
        expect(await answer.json()).toEqual({
          error: 'insufficient_scope',
          error_description: 'the MCP server needs more scope: admin',
          details: [{ path: 'scope', scopes: ['admin'] }],
        });
        expect(await received.all()).not.toContain(upstream.origin);
      });

      it('never follows an upstream redirect', async () => {
        upstream.mode = 'raw';
        upstream.raw = (_req, res) => {
          res.writeHead(307, { location: 'http://127.0.0.1:1/elsewhere' }).end();
        };
        const response = await post({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
        expect(response.status).toBe(502);
        expect(((await response.json()) as { error_description: string }).error_description).toBe(
          'the MCP server answered a redirect (HTTP 307), which the gateway does not follow',
        );
        expect(upstream.seen).toHaveLength(1);
      });
    });

    /** A POST to the gateway with a JSON-RPC body. */
    function post(
      body: unknown,
      options: { token?: string; path?: string; headers?: Record<string, string> } = {},
    ): Promise<Response> {
      return fetch(gatewayUrl(options.path), {
        method: 'POST',
        headers: {
          authorization: `Bearer ${options.token ?? ROOT_KEY}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...options.headers,
        },
        body: typeof body === 'string' ? body : JSON.stringify(body),
      });
    }

    describe('a connection that needs consent', () => {
      beforeEach(async () => {
        // Pending: authorized, never consented.
        const started = await h.call('POST', '/api/oauth/authorize/linear', {
          body: { connection_id: 'acme/users/bob/linear' },
        });
        expect(started.status).toBe(201);
      });

      it('answers -32042 with a fresh authorization URL to a caller that may authorize, and the SDK client throws UrlElicitationRequiredError', async () => {
        const client = new Client({ name: 'gateway-test', version: '1.0.0' });
        clients.push(client);
        const failure = await client
          .connect(
            new StreamableHTTPClientTransport(gatewayUrl('acme/users/bob/linear'), {
              requestInit: { headers: { authorization: `Bearer ${ROOT_KEY}` } },
            }),
          )
          .then(
            () => null,
            (error: unknown) => error,
          );
        expect(failure).toBeInstanceOf(UrlElicitationRequiredError);
        const [elicitation] = (failure as UrlElicitationRequiredError).elicitations;
        expect(elicitation?.mode).toBe('url');
        const url = new URL(elicitation?.url ?? '');
        const provider = await h.call('GET', '/api/admin/providers/linear');
        expect(`${url.origin}${url.pathname}`).toBe(
          provider.body.authorization_server.authorization_endpoint,
        );
        expect(url.searchParams.get('resource')).toBe(upstream.world.resourceUrl);
        // The URL works: consent, then the same client connects.
        const back = new URL(upstream.world.consent(elicitation?.url ?? ''));
        expect(
          (await h.call('GET', `${back.pathname}${back.search}`, { token: null })).status,
        ).toBe(200);
        const again = new Client({ name: 'gateway-test', version: '1.0.0' });
        clients.push(again);
        await again.connect(
          new StreamableHTTPClientTransport(gatewayUrl('acme/users/bob/linear'), {
            requestInit: { headers: { authorization: `Bearer ${ROOT_KEY}` } },
          }),
        );
        expect((await again.listTools()).tools).toHaveLength(3);
      });

      it('answers the JSON-RPC error with the request’s id and each call a new authorization', async () => {
        const first = await post(
          { jsonrpc: '2.0', id: 'a-7', method: 'tools/list' },
          {
            path: 'acme/users/bob/linear',
          },
        );
        const second = await post(
          { jsonrpc: '2.0', id: 8, method: 'tools/list' },
          {
            path: 'acme/users/bob/linear',
          },
        );
        expect(first.status).toBe(200);
        expect(first.headers.get('content-type')).toBe('application/json');
        const one = (await first.json()) as {
          id: unknown;
          error: { code: number; data: { authorization_url: string; connection_id: string } };
        };
        const two = (await second.json()) as typeof one;
        expect(one.id).toBe('a-7');
        expect(two.id).toBe(8);
        expect(one.error.code).toBe(-32042);
        expect(one.error.data.connection_id).toBe('acme/users/bob/linear');
        expect(one.error.data.authorization_url).not.toBe(two.error.data.authorization_url);
        expect(upstream.seen).toHaveLength(0);
      });

      it('answers 409 reauthorization_required to a caller that cannot authorize, and to a GET', async () => {
        const bob = await h.mint('bob', ['acme/users/bob']);
        const refused = await post(
          { jsonrpc: '2.0', id: 1, method: 'tools/list' },
          {
            token: bob,
            path: 'acme/users/bob/linear',
          },
        );
        expect(refused.status).toBe(409);
        expect(((await refused.json()) as { error: string }).error).toBe(
          'reauthorization_required',
        );
        const stream = await fetch(gatewayUrl('acme/users/bob/linear'), {
          headers: { authorization: `Bearer ${ROOT_KEY}`, accept: 'text/event-stream' },
        });
        expect(stream.status).toBe(409);
        const notification = await post(
          { jsonrpc: '2.0', method: 'notifications/initialized' },
          { path: 'acme/users/bob/linear' },
        );
        expect(notification.status).toBe(409);
      });
    });

    describe('inject-only providers ("hand_out": false)', () => {
      beforeEach(async () => {
        const put = await h.call('PUT', '/api/admin/providers/linear', {
          body: {
            template: 'mcp',
            hand_out: false,
            configuration: { resource_url: upstream.world.resourceUrl },
          },
        });
        expect(put.status).toBe(200);
        expect(put.body.hand_out).toBe(false);
      });

      it('refuses hand-outs with 403 credentials_not_exportable, and records none', async () => {
        const answer = await h.call('GET', `/api/oauth/credentials/${CONNECTION}`);
        expect(answer.status).toBe(403);
        expect(answer.body.error).toBe('credentials_not_exportable');
        expect(answer.text).not.toContain((await h.storedTokens(CONNECTION)).access_token);
        const audit = await h.call('GET', '/api/admin/audit?type=credentials.issued');
        expect(audit.body.items).toEqual([]);
      });

      it('still serves the gateway and the in-process connectionFetch', async () => {
        const client = await classicClient(ROOT_KEY);
        expect((await client.listTools()).tools).toHaveLength(3);
        const trusted = new Client({ name: 'in-process', version: '1.0.0' });
        clients.push(trusted);
        await trusted.connect(
          new StreamableHTTPClientTransport(new URL(upstream.world.resourceUrl), {
            fetch: connectionFetch({
              source: { broker: h.broker, principal: rootPrincipal(), connectionId: CONNECTION },
            }),
          }),
        );
        expect((await trusted.listTools()).tools).toHaveLength(3);
      });

      it('shows hand_out in the view, true by default', async () => {
        expect((await h.call('GET', '/api/admin/providers/linear')).body.hand_out).toBe(false);
        await h.call('PUT', '/api/admin/providers/linear', {
          body: { template: 'mcp', configuration: { resource_url: upstream.world.resourceUrl } },
        });
        expect((await h.call('GET', '/api/admin/providers/linear')).body.hand_out).toBe(true);
        expect((await h.call('GET', `/api/oauth/credentials/${CONNECTION}`)).status).toBe(200);
      });
    });

    describe('streams, cancellation and limits', () => {
      /** An upstream that opens an event stream, sends one event, and holds it open. */
      function holdingStream(headers: Record<string, string> = {}): Promise<void> {
        return new Promise<void>((closed) => {
          upstream.mode = 'raw';
          upstream.raw = (_req, res) => {
            res.writeHead(200, { 'content-type': 'text/event-stream', ...headers });
            res.write('event: message\ndata: {"n":1}\n\n');
            res.once('close', () => closed());
          };
        });
      }

      const openStream = (signal?: AbortSignal, token = ROOT_KEY) =>
        fetch(gatewayUrl(), {
          headers: {
            authorization: `Bearer ${token}`,
            accept: 'text/event-stream',
            cookie: 'session=caller-cookie',
            'x-forwarded-for': '203.0.113.7',
            'mcp-session-id': 'session-1',
            'last-event-id': '41',
          },
          ...(signal === undefined ? {} : { signal }),
        });

      it('passes a JSON answer the server sends in pieces back whole, as one document', async () => {
        upstream.mode = 'raw';
        const pieces = ['{"jsonrpc":"2.0",', '"id":7,', '"result":{"tools":[]}}'];
        upstream.raw = (_req, res) => {
          res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
          res.write(pieces[0]);
          setTimeout(() => {
            res.write(pieces[1]);
            setTimeout(() => res.end(pieces[2]), 20);
          }, 20);
        };
        const answer = await post({ jsonrpc: '2.0', id: 7, method: 'tools/list' });
        expect(answer.status).toBe(200);
        expect(answer.headers.get('content-type')).toBe('application/json; charset=utf-8');
        expect(await answer.text()).toBe(pieces.join(''));
        // And one sent whole, then nothing: the same, with nothing held back.
        upstream.raw = (_req, res) => {
          res
            .writeHead(200, { 'content-type': 'application/json' })
            .end('{"jsonrpc":"2.0","id":8,"result":{}}');
        };
        const whole = await post({ jsonrpc: '2.0', id: 8, method: 'tools/list' });
        expect(await whole.json()).toEqual({ jsonrpc: '2.0', id: 8, result: {} });
      });

      it('forwards only MCP headers, passes back only Content-Type and Mcp-Session-Id, and the client’s abort closes the upstream request', async () => {
        const upstreamClosed = holdingStream({
          'set-cookie': 'upstream=secret',
          'x-upstream-internal': 'yes',
          'mcp-session-id': 'session-1',
        });
        const abort = new AbortController();
        const response = await openStream(abort.signal);
        expect(response.status).toBe(200);
        const ours = [...response.headers.keys()].filter(
          (name) => !['date', 'connection', 'keep-alive', 'transfer-encoding'].includes(name),
        );
        expect(ours.sort()).toEqual([
          'cache-control',
          'content-type',
          'mcp-session-id',
          'x-accel-buffering',
          'x-request-id',
        ]);
        expect(response.headers.get('set-cookie')).toBeNull();
        expect(response.headers.get('x-upstream-internal')).toBeNull();
        expect(response.headers.get('content-type')).toBe('text/event-stream');
        expect(response.headers.get('mcp-session-id')).toBe('session-1');
        const reader = (response.body as ReadableStream<Uint8Array>).getReader();
        const first = await reader.read();
        expect(new TextDecoder().decode(first.value)).toBe('event: message\ndata: {"n":1}\n\n');
        const [seen] = upstream.seen;
        expect(Object.keys(seen?.headers ?? {}).sort()).toEqual([
          'accept',
          'authorization',
          'connection',
          'host',
          'last-event-id',
          'mcp-session-id',
          'user-agent',
        ]);
        expect(seen?.headers['last-event-id']).toBe('41');
        expect(seen?.headers['user-agent']).toBe('Keyway-Gateway');
        abort.abort();
        // The upstream sees its request end: the gateway closed it when the client left.
        await upstreamClosed;
      });

      it('ends the client’s stream when the upstream closes it', async () => {
        upstream.mode = 'raw';
        upstream.raw = (_req, res) => {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write('data: {"n":1}\n\n');
          res.end('data: {"n":2}\n\n');
        };
        const response = await openStream();
        expect(await response.text()).toBe('data: {"n":1}\n\ndata: {"n":2}\n\n');
      });

      it('keeps no listener of a request on a kept-alive client connection once its answer is over, whatever the path', async () => {
        // One client connection for every call, as an MCP client's keep-alive agent has.
        const agent = new HttpAgent({ keepAlive: true, maxSockets: 1 });
        const sockets = new Set<Socket>();
        keyway.on('connection', (socket: Socket) => sockets.add(socket));
        const call = (body: string, accept = 'application/json, text/event-stream') =>
          new Promise<{ status: number; text: string }>((resolve, reject) => {
            const outgoing = httpRequest(
              gatewayUrl(),
              {
                method: 'POST',
                agent,
                headers: {
                  authorization: `Bearer ${ROOT_KEY}`,
                  'content-type': 'application/json',
                  accept,
                },
              },
              (answer) => {
                let text = '';
                answer.setEncoding('utf8').on('data', (chunk: string) => {
                  text += chunk;
                });
                answer.once('end', () => resolve({ status: answer.statusCode ?? 0, text }));
              },
            );
            outgoing.once('error', reject);
            outgoing.end(body);
          });
        const listening = () =>
          [...sockets].map((socket) => getEventListeners(connectionGone(socket), 'abort').length);
        upstream.mode = 'raw';
        upstream.raw = (_req, res) => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end('{"jsonrpc":"2.0","id":1,"result":{}}');
        };
        for (let i = 0; i < 12; i++) {
          expect(await call('{"jsonrpc":"2.0","id":1,"method":"ping"}')).toEqual({
            status: 200,
            text: '{"jsonrpc":"2.0","id":1,"result":{}}',
          });
        }
        // A 401 (the answer read as a Web Response), a refresh, the same call again.
        upstream.refused.add((await h.storedTokens(CONNECTION)).access_token);
        expect((await call('{"jsonrpc":"2.0","id":2,"method":"ping"}')).status).toBe(200);
        // An event stream the upstream ends.
        upstream.raw = (_req, res) => {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write('data: {"n":1}\n\n');
          res.end('data: {"n":2}\n\n');
        };
        expect(await call('{"jsonrpc":"2.0","id":3,"method":"ping"}')).toEqual({
          status: 200,
          text: 'data: {"n":1}\n\ndata: {"n":2}\n\n',
        });
        // A 403 insufficient_scope passed back (the MCP server's own mode).
        upstream.mode = 'stateful-json';
        const stepUp = await call(
          '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"admin","arguments":{}}}',
        );
        expect(stepUp.status).toBe(403);
        await new Promise((resolve) => setImmediate(resolve));
        expect(sockets.size).toBe(1);
        expect(listening()).toEqual([0]);
        agent.destroy();
      });

      it('refuses a body over the limit with 413 before anything goes upstream', async () => {
        Object.assign(h.extra, { gateway: { maxBodyBytes: 1024 } });
        h.rebuild(ROOT_KEY);
        const large = JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/call',
          params: { name: 'echo', arguments: { text: 'x'.repeat(2000) } },
        });
        const response = await post(large);
        expect(response.status).toBe(413);
        expect(((await response.json()) as { error: string }).error).toBe('payload_too_large');
        expect(upstream.seen).toHaveLength(0);
        // Chunked, with no declared length: reading stops at the limit.
        const chunked = await fetch(gatewayUrl(), {
          method: 'POST',
          headers: { authorization: `Bearer ${ROOT_KEY}`, 'content-type': 'application/json' },
          body: new ReadableStream({
            start(controller) {
              controller.enqueue(new TextEncoder().encode(large));
              controller.close();
            },
          }),
          duplex: 'half',
        } as RequestInit);
        expect(chunked.status).toBe(413);
        expect(upstream.seen).toHaveLength(0);
        const fits = await post({ jsonrpc: '2.0', id: 1, method: 'ping' });
        expect(fits.status).not.toBe(413);
      });

      it('limits the upstream streams open at once per connection, and frees the slot when a stream ends', async () => {
        Object.assign(h.extra, { gateway: { maxStreamsPerConnection: 1 } });
        h.rebuild(ROOT_KEY);
        const upstreamClosed = holdingStream();
        const abort = new AbortController();
        const held = await openStream(abort.signal);
        expect(held.status).toBe(200);
        const refused = await openStream();
        expect(refused.status).toBe(429);
        expect(refused.headers.get('retry-after')).toBe('1');
        expect(((await refused.json()) as { error_description: string }).error_description).toBe(
          'connection "acme/users/alice/linear" has 1 upstream requests open (the limit): close one and retry',
        );
        expect(upstream.seen).toHaveLength(1);
        abort.abort();
        await upstreamClosed;
        const again = await openStream();
        expect(again.status).toBe(200);
        await again.body?.cancel();
      });

      it('limits the upstream streams open at once per caller', async () => {
        Object.assign(h.extra, { gateway: { maxStreamsPerCaller: 1 } });
        h.rebuild(ROOT_KEY);
        holdingStream();
        const alice = await h.mint('alice', ['acme/users/alice']);
        const held = await openStream(undefined, alice);
        expect(held.status).toBe(200);
        const refused = await openStream(undefined, alice);
        expect(refused.status).toBe(429);
        expect(((await refused.json()) as { error_description: string }).error_description).toBe(
          'this caller has 1 upstream requests open (the limit): close one and retry',
        );
        // Another caller has its own share.
        const root = await openStream();
        expect(root.status).toBe(200);
        await held.body?.cancel();
        await root.body?.cancel();
      });

      it('closes a stream that stays silent longer than the idle timeout, upstream and client side', async () => {
        Object.assign(h.extra, { gateway: { idleTimeoutMs: 1000 } });
        h.rebuild(ROOT_KEY);
        const upstreamClosed = holdingStream();
        const response = await openStream();
        const reader = (response.body as ReadableStream<Uint8Array>).getReader();
        expect((await reader.read()).done).toBe(false);
        // Nothing more comes: the gateway gives up on the upstream and ends the client's stream.
        const next = await reader.read().then(
          (result) => (result.done ? 'ended' : 'data'),
          () => 'broken',
        );
        expect(next).toBe('broken');
        await upstreamClosed;
      });

      it('counts failed authentications toward the limit of docs/api.md §12', async () => {
        const statuses: number[] = [];
        for (let attempt = 0; attempt < 21; attempt++) {
          statuses.push(
            (await post({ jsonrpc: '2.0', id: 1, method: 'ping' }, { token: 'kw_wrong' })).status,
          );
        }
        expect(statuses.slice(0, 20)).toEqual(new Array(20).fill(401));
        expect(statuses[20]).toBe(429);
        expect(upstream.seen).toHaveLength(0);
      });
    });

    describe('watching it', () => {
      it('counts each forwarded request in the metrics and writes no hand-out to the audit log', async () => {
        const metrics = createMetrics({ processMetrics: false });
        Object.assign(h.extra, { observe: metrics.observe });
        h.rebuild(ROOT_KEY);
        const client = await classicClient(ROOT_KEY);
        await client.listTools();
        await client.callTool({ name: 'echo', arguments: { text: 'count me' } });
        await expect(client.callTool({ name: 'admin', arguments: {} })).rejects.toThrow();
        await client.wire.terminateSession();
        await client.close();
        const families = async () => parseMetrics(await metrics.text());
        const count = async (outcome: string) =>
          sampleOf(await families(), 'keyway_gateway_requests_total', {
            provider: 'linear',
            outcome,
          });
        // Every upstream request but the refused admin call answered 2xx; that one is a step-up.
        expect(await count('2xx')).toBe(upstream.seen.length - 1);
        expect(await count('step_up')).toBe(1);
        // The event stream the client opened is released once it ends.
        await expect
          .poll(async () => sampleOf(await families(), 'keyway_gateway_open_streams', {}))
          .toBe(0);
        const audit = await h.call('GET', '/api/admin/audit?type=credentials.issued');
        expect(audit.body.items).toEqual([]);
      });
    });

    describe('attacks', () => {
      it('keeps a hostile scope challenge out of the caller’s WWW-Authenticate', async () => {
        upstream.mode = 'raw';
        upstream.raw = (_req, res) => {
          res
            .writeHead(403, {
              'www-authenticate':
                'Bearer error="insufficient_scope", scope="ok \\"x\\", realm=\\"evil\\" two"',
            })
            .end();
        };
        const answer = await post({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
        expect(answer.status).toBe(403);
        expect(answer.headers.get('www-authenticate')).toBe(
          'Bearer realm="keyway", error="insufficient_scope", scope="ok two"',
        );
      });

      it('does not take a caller’s Authorization for the upstream, nor a second one', async () => {
        const alice = await h.mint('alice', ['acme/users/alice']);
        const response = await fetch(gatewayUrl(), {
          method: 'POST',
          headers: [
            ['authorization', `Bearer ${alice}`],
            ['authorization', 'Bearer upstream-token-of-my-own'],
            ['content-type', 'application/json'],
          ],
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
        });
        expect(response.status).toBe(401);
        expect(upstream.seen).toEqual([]);
      });
    });

    describe('access', () => {
      it('refuses a caller whose scopes do not cover the connection, and an unknown connection', async () => {
        const bob = await h.mint('bob', ['acme/users/bob']);
        const refused = await post({ jsonrpc: '2.0', id: 1, method: 'tools/list' }, { token: bob });
        expect(refused.status).toBe(403);
        expect(((await refused.json()) as { error: string }).error).toBe('insufficient_scope');
        const missing = await post(
          { jsonrpc: '2.0', id: 1, method: 'tools/list' },
          {
            path: 'acme/users/nobody/linear',
          },
        );
        expect(missing.status).toBe(404);
        expect(upstream.seen).toHaveLength(0);
      });

      it('refuses a request without a credential with 401 and no upstream call', async () => {
        const response = await fetch(gatewayUrl(), { method: 'POST', body: '{}' });
        expect(response.status).toBe(401);
        expect(response.headers.get('www-authenticate')).toBe('Bearer realm="keyway"');
        expect(upstream.seen).toHaveLength(0);
      });

      it('answers 405 with Allow for another method', async () => {
        const response = await fetch(gatewayUrl(), {
          method: 'PUT',
          headers: { authorization: `Bearer ${ROOT_KEY}` },
        });
        expect(response.status).toBe(405);
        expect(response.headers.get('allow')).toBe('POST, GET, DELETE');
      });
    });
  },
);
