import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type RunningServer, serve } from '@keyway/cli';
import { connectionFetch, InsufficientScopeError } from '@keyway/core';
import { Browser, callApi, close, jwtVerifier, listen, serveMcp } from '@keyway/test-support/peers';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stockOidcProvider } from '../src/oidc.js';
import { startOpenAuth } from '../src/openauth.js';
import { startSdkDemoProvider } from '../src/sdk-demo.js';
import { startWorker } from '../src/workers.js';

// The servers people run, from npm, each in front of (or hosting) an MCP
// server built with the official SDK, through `keyway serve` end to end. Each peer runs as it
// ships; what a test changes is named where the peer is made, with the reason.

const ROOT_KEY = 'peers-root-key-0123456789abcdefghijklmnop';
const VAULT_KEY = 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8';

/** What one peer is, and what Keyway should see of it. */
interface Peer {
  id: string;
  resourceUrl: string;
  /** The provider's body beside `template` and `resource_url`. */
  configuration?: Record<string, unknown>;
  credentials?: Record<string, unknown>;
  /** Whether the server issues refresh tokens (then a forced refresh gives a new token). */
  refreshes: boolean;
  /** The `revocation` of the `connection.deleted` event. */
  revocation: unknown;
  /** What `echo` answers to `hello`. */
  echo: string;
}

describe('real authorization servers from npm, through keyway serve end to end', () => {
  let keyway: RunningServer;
  let directory: string;
  const servers: Server[] = [];
  const closers: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    directory = mkdtempSync(join(tmpdir(), 'keyway-peers-'));
    keyway = await serve({
      port: 0,
      rootKey: ROOT_KEY,
      database: join(directory, 'keyway.sqlite'),
      vaultKeys: [VAULT_KEY],
      allowedHosts: ['127.0.0.1', 'localhost'],
      log: () => {},
      logLevel: 'silent',
    });
  }, 60_000);

  afterAll(async () => {
    await keyway?.close();
    for (const server of servers) await close(server);
    for (const closer of closers) await closer();
    rmSync(directory, { recursive: true, force: true });
  });

  const api = (method: string, path: string, body?: unknown) =>
    callApi(keyway.url, ROOT_KEY, method, path, body);
  const callbackPrefix = () => `http://localhost:${new URL(keyway.url).port}/api/oauth/callback`;

  /** Authorizes a connection and plays the user at the server's pages. */
  async function consent(providerId: string, connectionId: string, scopes?: string[]) {
    const started = await api('POST', `/api/oauth/authorize/${providerId}`, {
      connection_id: connectionId,
      ...(scopes === undefined ? {} : { scopes }),
    });
    expect(started.status, JSON.stringify(started.body)).toBe(201);
    const back = await new Browser().consent(started.body.authorization_url, callbackPrefix());
    const page = await (await fetch(back)).text();
    expect(page).toContain('Connected');
    return new URL(started.body.authorization_url);
  }

  /** An MCP client of the official SDK whose token comes from Keyway's credentials API. */
  async function mcpClient(peer: Peer, connectionId: string): Promise<Client> {
    const client = new Client({ name: 'peers-test', version: '1' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(peer.resourceUrl), {
        fetch: connectionFetch({
          source: { keywayUrl: keyway.url, token: ROOT_KEY, connectionId },
        }),
      }),
    );
    return client;
  }

  async function echo(peer: Peer, connectionId: string): Promise<string> {
    const client = await mcpClient(peer, connectionId);
    try {
      const result = await client.callTool({ name: 'echo', arguments: { text: 'hello' } });
      return (result.content as { text: string }[])[0]?.text ?? '';
    } finally {
      await client.close();
    }
  }

  /**
   * The whole walk: the provider, authorization with consent, a tool call with the token,
   * a forced refresh that gives a new working token (or `409 refresh_unavailable`), and a
   * deletion whose revocation is recorded.
   */
  async function walk(peer: Peer): Promise<void> {
    const connectionId = `acme/alice/${peer.id}`;
    const created = await api('PUT', `/api/admin/providers/${peer.id}`, {
      template: 'mcp',
      configuration: { resource_url: peer.resourceUrl, ...peer.configuration },
      ...(peer.credentials === undefined ? {} : { credentials: peer.credentials }),
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    await consent(peer.id, connectionId);
    const view = await api('GET', `/api/oauth/connections/${connectionId}`);
    expect(view.body).toMatchObject({ status: 'active', refreshable: peer.refreshes, error: null });
    expect(await echo(peer, connectionId)).toBe(peer.echo);

    const before = await api('GET', `/api/oauth/credentials/${connectionId}`);
    const forced = await api('GET', `/api/oauth/credentials/${connectionId}?force_refresh=true`);
    if (peer.refreshes) {
      expect(forced.status, JSON.stringify(forced.body)).toBe(200);
      expect(forced.body.access_token).not.toBe(before.body.access_token);
      expect(await echo(peer, connectionId)).toBe(peer.echo);
    } else {
      expect(forced.status).toBe(409);
      expect(forced.body.error).toBe('refresh_unavailable');
    }

    expect((await api('DELETE', `/api/oauth/connections/${connectionId}`)).status).toBe(204);
    const audit = await api(
      'GET',
      `/api/admin/audit?type=connection.deleted&prefix=${encodeURIComponent(connectionId)}`,
    );
    expect(audit.body.items[0].data).toEqual({ revocation: peer.revocation });
  }

  /** An MCP server of the official SDK for an issuer's JWT access tokens. */
  async function mcpServerFor(issuer: string, options: Partial<Parameters<typeof serveMcp>[1]>) {
    const http = createServer();
    servers.push(http);
    const origin = await listen(http);
    const resourceUrl = `${origin}/mcp`;
    serveMcp(http, {
      issuer,
      resourceUrl,
      name: 'peer-mcp',
      version: '1.0.0',
      echo: (text) => text,
      ...options,
    });
    return resourceUrl;
  }

  /** oidc-provider on a loopback port, for the MCP server at `resourceUrl()`. */
  async function oidc(rotation: boolean) {
    const http = createServer();
    servers.push(http);
    const issuer = await listen(http);
    let resourceUrl = '';
    http.on('request', stockOidcProvider(issuer, () => resourceUrl, { rotation }).callback());
    resourceUrl = await mcpServerFor(issuer, { adminScope: 'mcp:admin' });
    return { issuer, resourceUrl };
  }

  it('oidc-provider in its default configuration: a refresh token through prompt=consent, a step-up for more scope', async () => {
    const { resourceUrl } = await oidc(false);
    const peer: Peer = {
      id: 'oidc-default',
      resourceUrl,
      refreshes: true,
      // Revocation is off by default in oidc-provider: nothing to ask.
      revocation: { attempted: false, reason: 'no_revocation_endpoint' },
      echo: 'hello',
    };
    await walk(peer);

    // Step-up: the MCP server asks for `mcp:admin`; a new consent for it, and the call works.
    const connectionId = 'acme/alice/oidc-step-up';
    const url = await consent(peer.id, connectionId);
    expect(url.searchParams.get('prompt')).toBe('consent');
    expect(url.searchParams.get('scope')).toBe('mcp:tools offline_access');
    const client = await mcpClient(peer, connectionId);
    const refused = await client
      .callTool({ name: 'admin', arguments: {} })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(InsufficientScopeError);
    expect((refused as InsufficientScopeError).scopes).toEqual(['mcp:admin']);
    await client.close();
    await consent(peer.id, connectionId, ['mcp:tools', 'mcp:admin', 'offline_access']);
    const stepped = await mcpClient(peer, connectionId);
    const granted = await stepped.callTool({ name: 'admin', arguments: {} });
    expect((granted.content as { text: string }[])[0]?.text).toBe('admin granted');
    await stepped.close();
  }, 60_000);

  it('oidc-provider with refresh-token rotation and revocation', async () => {
    const { resourceUrl } = await oidc(true);
    await walk({
      id: 'oidc-rotation',
      resourceUrl,
      refreshes: true,
      // oidc-provider revokes the refresh token, and refuses to revoke a JWT access token.
      revocation: {
        attempted: true,
        results: [
          { token: 'refresh_token', status: 200, error: null },
          { token: 'access_token', status: 400, error: 'unsupported_token_type' },
        ],
      },
      echo: 'hello',
    });
  }, 60_000);

  it('the MCP SDK’s demo authorization server', async () => {
    let resourceUrl = '';
    const demo = await startSdkDemoProvider(() => resourceUrl);
    servers.push(demo.server);
    resourceUrl = await mcpServerFor(demo.issuer, { verify: demo.verify });
    await walk({
      id: 'sdk-demo',
      resourceUrl,
      refreshes: false,
      revocation: { attempted: false, reason: 'no_revocation_endpoint' },
      echo: 'hello',
    });
  }, 60_000);

  it('Cloudflare’s workers-oauth-provider in workerd, hosting an MCP server of the SDK', async () => {
    const worker = await startWorker();
    closers.push(worker.close);
    await walk({
      id: 'workers',
      resourceUrl: `${worker.origin}/mcp`,
      refreshes: true,
      revocation: {
        attempted: true,
        results: [
          { token: 'refresh_token', status: 200, error: null },
          { token: 'access_token', status: 200, error: null },
        ],
      },
      echo: 'worker: hello',
    });
  }, 90_000);

  it('OpenAuth, which does S256 without advertising it, with pkce "assume_s256"', async () => {
    const openAuth = await startOpenAuth();
    servers.push(openAuth.server);
    // OpenAuth's access tokens are JWTs for the client (no RFC 8707 audience), signed with
    // the keys of its `jwks_uri`.
    const resourceUrl = await mcpServerFor(openAuth.issuer, {
      verify: jwtVerifier(openAuth.issuer, '', `${openAuth.issuer}/.well-known/jwks.json`, null),
      scopesSupported: [],
    });
    // Refused by default: the metadata says nothing of PKCE.
    const refused = await api('PUT', '/api/admin/providers/openauth', {
      template: 'mcp',
      configuration: { resource_url: resourceUrl },
      credentials: { mode: 'custom', client_id: 'keyway' },
    });
    expect(refused.status).toBe(422);
    expect(refused.body.error).toBe('unsupported_authorization_server');
    await walk({
      id: 'openauth',
      resourceUrl,
      configuration: { pkce: 'assume_s256' },
      credentials: { mode: 'custom', client_id: 'keyway' },
      refreshes: true,
      revocation: { attempted: false, reason: 'no_revocation_endpoint' },
      echo: 'hello',
    });
  }, 60_000);
});
