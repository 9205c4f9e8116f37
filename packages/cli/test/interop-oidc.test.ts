import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase } from '@keyway/test-support/postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type RunningServer, serve } from '../src/index.js';
import { Browser, callApi, close, listen, oidcProvider } from './peers.js';

// What real servers send, against a real authorization server: oidc-provider.

const ROOT_KEY = 'interop-root-key-0123456789abcdefghijklmn';
const VAULT_KEY = 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8';
/** An id and a secret with every character class a careless encoder breaks (RFC 6749 allows printable ASCII only). */
const ODD_CLIENT = { id: 'pre-registered:client %41+*', secret: 'se cret:+/%2F-~_.' };

/** The storages two instances share: one SQLite file, one PostgreSQL database. */
const ENGINES = [
  {
    engine: 'SQLite',
    database: async (directory: string) => ({
      url: join(directory, 'shared.sqlite'),
      drop: async () => {},
    }),
  },
  { engine: 'PostgreSQL', database: () => createTestDatabase(inject('databaseUrl')) },
];

describe.each(ENGINES)(
  'interop with oidc-provider, two keyway serve instances on one $engine database',
  ({ database }) => {
    let asServer: Server;
    let mcpServer: Server;
    let issuer: string;
    let resourceUrl: string;
    let directory: string;
    let first: RunningServer;
    let second: RunningServer;
    let shared: { url: string; drop(): Promise<void> };
    const grants = { refreshes: 0, reuses: 0 };

    beforeAll(async () => {
      directory = mkdtempSync(join(tmpdir(), 'keyway-interop-'));
      shared = await database(directory);
      asServer = createServer();
      issuer = await listen(asServer);
      mcpServer = createServer();
      const mcpOrigin = await listen(mcpServer);
      resourceUrl = `${mcpOrigin}/mcp`;
      const options = {
        port: 0,
        rootKey: ROOT_KEY,
        database: shared.url,
        vaultKeys: [VAULT_KEY],
        allowedHosts: ['127.0.0.1'],
        log: () => {},
        logLevel: 'silent' as const,
      };
      first = await serve(options);
      second = await serve(options);
      const callback = `http://localhost:${new URL(first.url).port}/api/oauth/callback`;
      const provider = oidcProvider(issuer, () => resourceUrl, {
        clients: [
          {
            client_id: ODD_CLIENT.id,
            client_secret: ODD_CLIENT.secret,
            redirect_uris: [callback],
            token_endpoint_auth_method: 'client_secret_basic',
            grant_types: ['authorization_code', 'refresh_token'],
            application_type: 'native',
          },
        ],
        accessTokenTTL: 60,
      });
      provider.on('grant.success', (ctx: { oidc: { params?: { grant_type?: string } } }) => {
        if (ctx.oidc.params?.grant_type === 'refresh_token') grants.refreshes++;
      });
      provider.on('grant.error', (_ctx: unknown, error: { message?: string }) => {
        if (/consumed|reuse|revoked/i.test(String(error?.message))) grants.reuses++;
      });
      asServer.on('request', provider.callback());
      // The protected resource: its metadata, and a 401 naming it (no MCP calls here).
      mcpServer.on('request', (req, res) => {
        if (req.url === '/.well-known/oauth-protected-resource/mcp') {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ resource: resourceUrl, authorization_servers: [issuer] }));
          return;
        }
        res.writeHead(401, {
          'www-authenticate': `Bearer resource_metadata="${mcpOrigin}/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"`,
        });
        res.end();
      });
    });

    afterAll(async () => {
      await first?.close();
      await second?.close();
      if (mcpServer) await close(mcpServer);
      if (asServer) await close(asServer);
      await shared?.drop();
      rmSync(directory, { recursive: true, force: true });
    });

    const api = (instance: RunningServer, method: string, path: string, body?: unknown) =>
      callApi(instance.url, ROOT_KEY, method, path, body);

    async function connect(providerId: string, connectionId: string): Promise<void> {
      const started = await api(first, 'POST', `/api/oauth/authorize/${providerId}`, {
        connection_id: connectionId,
      });
      expect(started.status, JSON.stringify(started.body)).toBe(201);
      const back = await new Browser().consent(
        started.body.authorization_url,
        `http://localhost:${new URL(first.url).port}/api/oauth/callback`,
      );
      expect(await (await fetch(back)).text()).toContain('Connected');
    }

    it('authenticates a client whose id and secret hold -, :, %, space and + (client_secret_basic)', async () => {
      const created = await api(first, 'PUT', '/api/admin/providers/odd', {
        template: 'mcp',
        configuration: { resource_url: resourceUrl },
        credentials: { mode: 'custom', client_id: ODD_CLIENT.id, client_secret: ODD_CLIENT.secret },
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      expect(created.body.credentials.token_endpoint_auth_method).toBe('client_secret_basic');
      await connect('odd', 'acme/alice/odd');
      const before = grants.refreshes;
      const refreshed = await api(
        first,
        'GET',
        '/api/oauth/credentials/acme/alice/odd?force_refresh=true',
      );
      expect(refreshed.status, JSON.stringify(refreshed.body)).toBe(200);
      expect(grants.refreshes).toBe(before + 1);
    });

    it('never sends a refresh token twice from two instances, to a server that revokes the grant on reuse', async () => {
      const created = await api(first, 'PUT', '/api/admin/providers/rotating', {
        template: 'mcp',
        configuration: { resource_url: resourceUrl },
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      expect(created.body.credentials.registration).toBe('dynamic');
      await connect('rotating', 'acme/alice/rotating');
      const start = grants.refreshes;
      for (let round = 1; round <= 4; round++) {
        const answers = await Promise.all(
          [first, second, first, second].map((instance) =>
            api(instance, 'GET', '/api/oauth/credentials/acme/alice/rotating?force_refresh=true'),
          ),
        );
        expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200, 200]);
        // Concurrent forced refreshes share one: every caller gets its result.
        expect(grants.refreshes - start).toBeLessThanOrEqual(round * 4);
        expect(grants.reuses).toBe(0);
      }
      // The grant is intact: a reuse would have revoked it, and this refresh would fail.
      const last = await api(
        second,
        'GET',
        '/api/oauth/credentials/acme/alice/rotating?force_refresh=true',
      );
      expect(last.status, JSON.stringify(last.body)).toBe(200);
      expect(grants.reuses).toBe(0);
      const view = await api(first, 'GET', '/api/oauth/connections/acme/alice/rotating');
      expect(view.body).toMatchObject({ status: 'active', error: null });
    });
  },
);
