import { getEventListeners } from 'node:events';
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import type { Socket } from 'node:net';
import { createTestWorld, type TestWorld } from '@keyway/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { connectionGone } from '../src/node/handler.js';
import { toNodeHandler, toWebRequest, writeWebResponse } from '../src/node/index.js';
import {
  Harness,
  listenOnLoopback,
  START,
  sendRaw,
  storageFactories,
  UPSTREAM_TRANSPORTS,
} from './harness.js';

/*
 * The API proxy (docs/api.md §13): `{base}/proxy/<connection>/<rest>` against a loopback API
 * that echoes what it received, behind an authorization server of the test kit on the same
 * origin, through `keyway serve`'s Node adapter on SQLite.
 */

const CONNECTION = 'acme/users/alice/api';
const CLIENT = { client_id: 'proxy-app', client_secret: 'proxy-app-secret-0123456789' };
const sqlite = storageFactories.find((factory) => factory.name === 'sqlite');

interface Echoed {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

describe.each(UPSTREAM_TRANSPORTS)(
  'the API proxy: {base}/proxy/<connection>/<rest> (docs/api.md §13), %s',
  (_, transport) => {
    let h: Harness;
    let world: TestWorld;
    let api: { port: number; close(): Promise<void> };
    let keyway: { port: number; close(): Promise<void> };
    let origin: string;
    const echoed: Echoed[] = [];
    /** Answers 401 to this many API requests first (a token the API stopped taking). */
    let refuse = 0;
    /** The client connections `keyway` served. */
    const sockets = new Set<Socket>();

    beforeEach(async () => {
      sockets.clear();
      echoed.length = 0;
      refuse = 0;
      api = await listenOnLoopback((req, res) => {
        if (req.url?.startsWith('/as/')) {
          void world.fetch(toWebRequest(req)).then((response) => writeWebResponse(res, response));
          return;
        }
        const chunks: Buffer[] = [];
        req.on('data', (chunk: Buffer) => chunks.push(chunk));
        req.on('end', () => {
          echoed.push({
            method: req.method ?? '',
            url: req.url ?? '',
            headers: req.headers,
            body: Buffer.concat(chunks).toString('utf8'),
          });
          if (refuse > 0) {
            refuse--;
            res.writeHead(401, { 'www-authenticate': 'Bearer error="invalid_token"' });
            res.end();
            return;
          }
          res.writeHead(200, {
            'content-type': 'application/json',
            etag: '"v1"',
            'set-cookie': 'api-session=upstream',
            'x-upstream-secret': 'never-forwarded',
          });
          res.end(JSON.stringify({ seen: req.url }));
        });
      });
      origin = `http://127.0.0.1:${api.port}`;
      world = createTestWorld({
        issuer: `${origin}/as`,
        now: () => h?.now ?? START,
        issParameter: false,
        dynamicRegistration: false,
      });
      world.preregister({ ...CLIENT, redirect_uris: [] });
      h = new Harness(await (sqlite?.create() ?? Promise.reject(new Error('no sqlite'))), {
        providerManagement: true,
        allowedHosts: ['127.0.0.1'],
        baseUrl: 'https://keyway.example.test',
        ...transport,
      });
      const client = world.clients.get(CLIENT.client_id);
      if (client) client.redirect_uris = ['https://keyway.example.test/api/oauth/callback'];
      keyway = await listenOnLoopback((req, res) => {
        sockets.add(req.socket);
        toNodeHandler(h.handler)(req, res);
      });
      const put = await h.call('PUT', '/api/admin/providers/api', {
        body: {
          template: 'oauth2',
          configuration: {
            authorization_endpoint: `${origin}/as/oauth/authorize`,
            token_endpoint: `${origin}/as/oauth/token`,
            api_base_url: `${origin}/api/v1`,
          },
          credentials: CLIENT,
        },
      });
      expect(put.status, put.text).toBe(201);
      const started = await h.call('POST', '/api/oauth/authorize/api', {
        body: { connection_id: CONNECTION },
      });
      const back = new URL(world.consent(started.body.authorization_url));
      expect((await h.call('GET', `${back.pathname}${back.search}`, { token: null })).status).toBe(
        200,
      );
    });

    afterEach(async () => {
      await keyway.close();
      await api.close();
      expect(h.errors).toEqual([]);
      await h.broker.close();
    });

    const raw = (method: string, path: string, token: string, extra: Record<string, string> = {}) =>
      sendRaw({
        port: keyway.port,
        method,
        path,
        headers: { authorization: `Bearer ${token}`, ...extra },
      });

    it('forwards the method, the path under the API base, the query and the body; the token goes, the caller’s credential and cookies do not', async () => {
      const alice = await h.mint('alice', ['acme/users/alice']);
      const got = await raw(
        'GET',
        `/proxy/${CONNECTION}/repos/keyway?per_page=5&q=a%20b+c%2B`,
        alice,
        {
          cookie: 'session=caller',
          'user-agent': 'caller-agent/1',
          accept: 'application/json',
          'if-none-match': '"v0"',
          'x-custom': 'not forwarded',
        },
      );
      expect(got.status, got.text).toBe(200);
      // The query as written: `%20`, `+` and `%2B` each kept.
      expect(JSON.parse(got.text)).toEqual({
        seen: '/api/v1/repos/keyway?per_page=5&q=a%20b+c%2B',
      });
      expect(got.headers['content-type']).toBe('application/json');
      expect(got.headers.etag).toBe('"v1"');
      expect(got.headers['cache-control']).toBe('no-store');
      expect(got.headers['set-cookie']).toBeUndefined();
      expect(got.headers['x-upstream-secret']).toBeUndefined();
      const [first] = echoed;
      expect(first?.method).toBe('GET');
      const token = String(first?.headers.authorization).replace(/^Bearer /, '');
      expect(world.isValidAccessToken(token)).toBe(true);
      expect(first?.headers.cookie).toBeUndefined();
      expect(first?.headers['x-custom']).toBeUndefined();
      expect(first?.headers.accept).toBe('application/json');
      expect(first?.headers['if-none-match']).toBe('"v0"');
      // Keyway's own, never the caller's: some APIs (GitHub's) refuse a request without one.
      expect(first?.headers['user-agent']).toBe('Keyway-Proxy');
      expect(JSON.stringify(first?.headers)).not.toContain(alice);

      for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
        const sent = await sendRaw({
          port: keyway.port,
          method,
          path: `/proxy/${CONNECTION}/items/7`,
          headers: {
            authorization: `Bearer ${alice}`,
            'content-type': 'application/json',
            // Node's client sends a DELETE body unframed without it.
            'content-length': String(JSON.stringify({ method }).length),
          },
          body: JSON.stringify({ method }),
        });
        expect(sent.status, `${method} ${sent.text}`).toBe(200);
        expect(echoed.at(-1)).toMatchObject({ method, url: '/api/v1/items/7' });
        expect(echoed.at(-1)?.body).toBe(JSON.stringify({ method }));
        expect(echoed.at(-1)?.headers['content-type']).toBe('application/json');
      }
      // The API base itself, and a trailing slash kept.
      expect((await raw('GET', `/proxy/${CONNECTION}`, alice)).status).toBe(200);
      expect(echoed.at(-1)?.url).toBe('/api/v1');
      expect((await raw('GET', `/proxy/${CONNECTION}/list/`, alice)).status).toBe(200);
      expect(echoed.at(-1)?.url).toBe('/api/v1/list/');
    });

    it.each([
      ['..', `/proxy/${CONNECTION}/../../bob/api/x`],
      ['%2e%2e', `/proxy/${CONNECTION}/%2e%2e/%2E%2E/x`],
      ['.%2e', `/proxy/${CONNECTION}/.%2e/x`],
      ['%2f', `/proxy/${CONNECTION}/a%2f..%2f..%2fadmin`],
      ['%5c', `/proxy/${CONNECTION}/a%5c..%5cadmin`],
      ['//host', `/proxy/${CONNECTION}//evil.example/x`],
      ['an absolute URL', `/proxy/${CONNECTION}/https://evil.example/x`],
      ['a single dot', `/proxy/${CONNECTION}/./x`],
    ])('refuses a path with %s, and sends nothing', async (_, path) => {
      const alice = await h.mint('alice', ['acme/users/alice']);
      const got = await raw('GET', path, alice);
      expect(got.status, got.text).toBe(400);
      expect(JSON.parse(got.text).error).toBe('invalid_path');
      expect(echoed).toEqual([]);
    });

    it('finds only connections the caller covers, and refreshes once on a 401', async () => {
      const bob = await h.mint('bob', ['acme/users/bob']);
      const denied = await raw('GET', `/proxy/${CONNECTION}/x`, bob);
      expect(denied.status).toBe(404);
      expect(JSON.parse(denied.text).error).toBe('not_found');
      expect(echoed).toEqual([]);

      refuse = 1;
      const alice = await h.mint('alice', ['acme/users/alice']);
      const retried = await raw('GET', `/proxy/${CONNECTION}/x`, alice);
      expect(retried.status, retried.text).toBe(200);
      expect(world.stats.refreshes).toBe(1);
      expect(echoed).toHaveLength(2);
      expect(echoed[0]?.headers.authorization).not.toBe(echoed[1]?.headers.authorization);
      expect(world.isValidAccessToken(String(echoed[1]?.headers.authorization).slice(7))).toBe(
        true,
      );
    });

    it('keeps no listener of a request on a kept-alive client connection once its answer is over', async () => {
      const alice = await h.mint('alice', ['acme/users/alice']);
      const agent = new HttpAgent({ keepAlive: true, maxSockets: 1 });
      const call = (method: string, body?: string) =>
        new Promise<number>((resolve, reject) => {
          const outgoing = httpRequest(
            `http://127.0.0.1:${keyway.port}/proxy/${CONNECTION}/items?n=1`,
            {
              method,
              agent,
              headers: {
                authorization: `Bearer ${alice}`,
                ...(body === undefined ? {} : { 'content-type': 'application/json' }),
              },
            },
            (answer) => {
              answer.resume();
              answer.once('end', () => resolve(answer.statusCode ?? 0));
            },
          );
          outgoing.once('error', reject);
          outgoing.end(body);
        });
      for (let i = 0; i < 10; i++) expect(await call('GET')).toBe(200);
      refuse = 1;
      expect(await call('POST', '{"a":1}')).toBe(200);
      expect(world.stats.refreshes).toBe(1);
      expect(await call('DELETE')).toBe(200);
      await new Promise((resolve) => setImmediate(resolve));
      expect(sockets.size).toBe(1);
      expect(
        [...sockets].map((socket) => getEventListeners(connectionGone(socket), 'abort').length),
      ).toEqual([0]);
      agent.destroy();
    });

    it('refuses a provider without an API base', async () => {
      await h.call('PUT', '/api/admin/providers/noapi', {
        body: {
          template: 'oauth2',
          configuration: {
            authorization_endpoint: `${origin}/as/oauth/authorize`,
            token_endpoint: `${origin}/as/oauth/token`,
          },
          credentials: CLIENT,
        },
      });
      const started = await h.call('POST', '/api/oauth/authorize/noapi', {
        body: { connection_id: 'acme/users/alice/noapi' },
      });
      const back = new URL(world.consent(started.body.authorization_url));
      await h.call('GET', `${back.pathname}${back.search}`, { token: null });
      const got = await raw('GET', '/proxy/acme/users/alice/noapi/x', await h.mint('a', ['acme']));
      expect(got.status).toBe(400);
      expect(JSON.parse(got.text).error).toBe('invalid_request');
      expect(echoed).toEqual([]);
    });
  },
);
