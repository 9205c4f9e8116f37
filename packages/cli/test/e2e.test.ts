import { createServer, type Server } from 'node:http';
import { type ConnectionTokens, connectionFetch, rootPrincipal } from '@keyway/core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type Provider from 'oidc-provider';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningServer, serve } from '../src/index.js';
import { Browser, callApi, close, listen, oidcProvider, serveMcp } from './peers.js';

const ROOT_KEY = 'e2e-root-key-0123456789abcdefghijklmnopq';
const VAULT_KEY = 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8';
/** Access tokens live 2 seconds, so the test sees one expire. */
const ACCESS_TOKEN_TTL = 2;

describe('end to end with real peers: oidc-provider, an MCP SDK server, keyway serve', () => {
  let asServer: Server;
  let mcpServer: Server;
  let issuer: string;
  let resourceUrl: string;
  let keyway: RunningServer;
  let provider: Provider;
  const grants = { refreshes: 0 };
  /** The request log of keyway serve, line by line. */
  const logLines: string[] = [];

  beforeAll(async () => {
    // ── the authorization server: oidc-provider ──
    asServer = createServer();
    issuer = await listen(asServer);
    const mcpHttp = createServer();
    const mcpOrigin = await listen(mcpHttp);
    resourceUrl = `${mcpOrigin}/mcp`;
    provider = oidcProvider(issuer, () => resourceUrl, {
      accessTokenTTL: ACCESS_TOKEN_TTL,
      accessTokenFormat: 'jwt',
    });
    provider.on('grant.success', (ctx: { oidc: { params?: { grant_type?: string } } }) => {
      if (ctx.oidc.params?.grant_type === 'refresh_token') grants.refreshes++;
    });
    asServer.on('request', provider.callback());

    // ── the resource server: an MCP server from the official SDK, checking JWTs ──
    serveMcp(mcpHttp, {
      issuer,
      resourceUrl,
      name: 'e2e-mcp',
      version: '1.0.0',
      echo: (text) => `echo: ${text}`,
    });
    mcpServer = mcpHttp;

    // ── Keyway ──
    keyway = await serve({
      port: 0,
      rootKey: ROOT_KEY,
      database: ':memory:',
      vaultKeys: [VAULT_KEY],
      allowedHosts: ['127.0.0.1'],
      log: () => {},
      logDestination: {
        write: (line: string) => {
          logLines.push(line);
        },
      },
    });
  });

  afterAll(async () => {
    await keyway?.close();
    if (mcpServer) await close(mcpServer);
    if (asServer) await close(asServer);
  });

  const api = (method: string, path: string, body?: unknown) =>
    callApi(keyway.url, ROOT_KEY, method, path, body);

  it('walks the whole product: provider, consent, callback, credentials, MCP calls, expiry, refresh, delete with revocation', async () => {
    // PUT provider, mode register: discovery of the SDK server and oidc-provider, dynamic registration.
    const created = await api('PUT', '/api/admin/providers/e2e', {
      template: 'mcp',
      label: 'E2E',
      configuration: { resource_url: resourceUrl, scopes: [] },
      credentials: { mode: 'register' },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body.credentials).toMatchObject({
      mode: 'register',
      registration: 'dynamic',
      client_secret_set: true,
    });
    expect(created.body.authorization_server.issuer).toBe(issuer);

    // Authorize, and consent as the user on oidc-provider's pages.
    const started = await api('POST', '/api/oauth/authorize/e2e', {
      connection_id: 'acme/users/alice/e2e',
    });
    expect(started.status).toBe(201);
    const scope = new URL(started.body.authorization_url).searchParams.get('scope');
    expect(scope).toBe('mcp:tools offline_access');
    const browser = new Browser();
    const callbackUrl = await browser.consent(
      started.body.authorization_url,
      // The default base URL names localhost (docs/api.md §0); the server listens on 127.0.0.1.
      `http://localhost:${new URL(keyway.url).port}/api/oauth/callback`,
    );
    expect(new URL(callbackUrl).searchParams.get('iss')).toBe(issuer);
    const landed = await fetch(callbackUrl);
    expect(await landed.text()).toContain('Connected');

    const connection = await api('GET', '/api/oauth/connections/acme/users/alice/e2e');
    expect(connection.body).toMatchObject({ status: 'active', provider_id: 'e2e', error: null });

    // Credentials, and MCP initialize + tools/list + a tool call with the token.
    const first = await api('GET', '/api/oauth/credentials/acme/users/alice/e2e');
    expect(first.status).toBe(200);
    const client = new Client({ name: 'keyway-e2e', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(resourceUrl), {
        fetch: connectionFetch({
          source: {
            broker: keyway.broker,
            principal: rootPrincipal(),
            connectionId: 'acme/users/alice/e2e',
          },
        }),
      }),
    );
    expect((await client.listTools()).tools.map((tool) => tool.name)).toEqual(['echo']);
    expect((await client.callTool({ name: 'echo', arguments: { text: 'one' } })).content).toEqual([
      { type: 'text', text: 'echo: one' },
    ]);

    // The token expires; credentials come back refreshed, and the tool works again.
    const before = grants.refreshes;
    await new Promise((resolve) => setTimeout(resolve, (ACCESS_TOKEN_TTL + 1) * 1000));
    const stale = await fetch(resourceUrl, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${first.body.access_token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list' }),
    });
    expect(stale.status).toBe(401);
    const refreshed = await api('GET', '/api/oauth/credentials/acme/users/alice/e2e');
    expect(refreshed.body.access_token).not.toBe(first.body.access_token);
    expect(grants.refreshes).toBeGreaterThan(before);
    expect((await client.callTool({ name: 'echo', arguments: { text: 'two' } })).content).toEqual([
      { type: 'text', text: 'echo: two' },
    ]);
    await client.close();

    // Delete: the grant is revoked at the authorization server.
    const entry = await keyway.broker.storage.getVaultEntry(
      'connection_tokens',
      'acme/users/alice/e2e',
    );
    const tokens = JSON.parse(await keyway.broker.vault.open(entry as never)) as ConnectionTokens;
    const secretEntry = await keyway.broker.storage.getVaultEntry('client_secret', `e2e ${issuer}`);
    const secret = await keyway.broker.vault.open(secretEntry as NonNullable<typeof secretEntry>);
    const introspect = async (token: string) => {
      const response = await fetch(`${issuer}/token/introspection`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: `Basic ${btoa(`${encodeURIComponent(tokens.party.client_id)}:${encodeURIComponent(secret)}`)}`,
        },
        body: new URLSearchParams({ token }).toString(),
      });
      return ((await response.json()) as { active: boolean }).active;
    };
    expect(await introspect(tokens.refresh_token as string)).toBe(true);
    expect((await api('DELETE', '/api/oauth/connections/acme/users/alice/e2e')).status).toBe(204);
    expect(await introspect(tokens.refresh_token as string)).toBe(false);
    expect((await api('GET', '/api/oauth/connections/acme/users/alice/e2e')).status).toBe(404);

    // The request log (docs/api.md §16): a JSON line per request over HTTP, and not one of
    // the walk's secrets in any of them — root key, vault key, tokens, client secret, the
    // authorization code, state and PKCE challenge.
    const callback = new URL(callbackUrl);
    const authorization = new URL(started.body.authorization_url);
    const secrets = [
      ROOT_KEY,
      VAULT_KEY,
      first.body.access_token,
      refreshed.body.access_token,
      tokens.access_token,
      tokens.refresh_token as string,
      secret,
      callback.searchParams.get('code') as string,
      callback.searchParams.get('state') as string,
      authorization.searchParams.get('code_challenge') as string,
    ];
    expect(secrets.every((value) => typeof value === 'string' && value.length >= 16)).toBe(true);
    const records = logLines.map(
      (line) => JSON.parse(line) as { msg: string; method: string; route: string; status: number },
    );
    expect(records.map(({ msg, method, route, status }) => [msg, method, route, status])).toEqual([
      ['request', 'PUT', '/api/admin/providers/{id}', 201],
      ['request', 'POST', '/api/oauth/authorize/{provider_id}', 201],
      ['request', 'GET', '/api/oauth/callback/{server_key}', 200],
      ['request', 'GET', '/api/oauth/connections/{id}', 200],
      ['request', 'GET', '/api/oauth/credentials/{id}', 200],
      ['request', 'GET', '/api/oauth/credentials/{id}', 200],
      ['request', 'DELETE', '/api/oauth/connections/{id}', 204],
      ['request', 'GET', '/api/oauth/connections/{id}', 404],
    ]);
    for (const line of logLines) {
      for (const value of secrets) expect(line).not.toContain(value);
    }
  });
});
