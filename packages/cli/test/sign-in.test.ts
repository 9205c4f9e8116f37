import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { accessibilityFindings, launchChromium } from '@keyway/test-support/browser';
import { freePort } from '@keyway/test-support/examples';
import { createTestDatabase } from '@keyway/test-support/postgres';
import { startBrokerProcess } from '@keyway/test-support/processes';
import {
  type OAuthClientProvider,
  UnauthorizedError,
} from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js';
import Provider_ from 'oidc-provider';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { serve } from '../src/index.js';
import { callApi, close, listen, serveWorld } from './peers.js';

/*
 * Any MCP client connects by URL alone (docs/api.md §17): the official SDK's client with
 * its OAuth provider interface, against `keyway serve` with sign-in on, on SQLite and on
 * PostgreSQL: discovery from the first 401, the sign-in and consent pages played in Debian's
 * Chromium, `tools/call` through the gateway, a refresh when the access token is refused, and
 * the client's token refused at another connection's endpoint and at /api/*. Once with
 * dynamic registration, once with a client ID metadata document served over https.
 */

const ROOT_KEY = 'sign-in-e2e-root-key-0123456789-abcdefghij';
const VAULT_KEY = 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8';
// KEYWAY_UPDATE_DOCS=1 writes the consent page's screenshot docs/mcp-clients.md shows.
const shots = fileURLToPath(
  new URL(
    process.env.KEYWAY_UPDATE_DOCS === '1'
      ? '../../../docs/images'
      : '../../../.test-results/sign-in',
    import.meta.url,
  ),
);

/** Where the client's browser comes back to: a loopback server that keeps each code. */
async function callbackServer(): Promise<{
  url: string;
  next(): Promise<URL>;
  close(): Promise<void>;
}> {
  const waiting: ((url: URL) => void)[] = [];
  const arrived: URL[] = [];
  const server: Server = createHttpServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    res.writeHead(200, { 'content-type': 'text/plain' }).end('You can close this page.');
    // What the browser asks besides (its favicon) is no callback.
    if (url.pathname !== '/callback') return;
    const waiter = waiting.shift();
    if (waiter) waiter(url);
    else arrived.push(url);
  });
  const origin = await listen(server);
  return {
    url: `${origin}/callback`,
    next: () =>
      new Promise((resolve) => {
        const ready = arrived.shift();
        if (ready) resolve(ready);
        else waiting.push(resolve);
      }),
    close: () => close(server),
  };
}

/** The SDK's OAuth provider interface, as a client application implements it. */
class Provider implements OAuthClientProvider {
  information: OAuthClientInformationMixed | undefined;
  saved: OAuthTokens | undefined;
  verifier = '';
  /** Every authorization URL the SDK asked to open. */
  readonly opened: URL[] = [];

  constructor(
    readonly redirect: string,
    readonly open: (url: URL) => Promise<void>,
    readonly clientMetadataUrl?: string,
  ) {}

  get redirectUrl() {
    return this.redirect;
  }
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'Keyway E2E Client',
      redirect_uris: [this.redirect],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() {
    return this.information;
  }
  saveClientInformation(information: OAuthClientInformationMixed) {
    this.information = information;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  async redirectToAuthorization(url: URL) {
    this.opened.push(url);
    await this.open(url);
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
}

const engines = [
  {
    name: 'SQLite',
    database: () => join(mkdtempSync(join(tmpdir(), 'keyway-sign-in-')), 'k.sqlite'),
  },
  {
    name: 'PostgreSQL',
    database: async () => {
      const { url } = await createTestDatabase(inject('databaseUrl'));
      return url;
    },
  },
];

describe.each(engines)('MCP clients sign in to keyway serve by URL alone ($name)', (engine) => {
  let world: Awaited<ReturnType<typeof serveWorld>>;
  let browser: Browser;
  let callback: Awaited<ReturnType<typeof callbackServer>>;
  let keyway: { url: string; close(): Promise<void> };
  let alice: string;

  beforeAll(async () => {
    world = await serveWorld({});
    callback = await callbackServer();
    const port = await freePort();
    const running = await serve({
      port,
      baseUrl: `http://127.0.0.1:${port}`,
      rootKey: ROOT_KEY,
      database: await engine.database(),
      vaultKeys: [VAULT_KEY],
      allowedHosts: ['127.0.0.1'],
      signIn: { methods: ['token'] },
      log: () => {},
      logLevel: 'silent',
    });
    keyway = running;
    // Two connections to the world's MCP server, alice's and bob's.
    const put = await callApi(keyway.url, ROOT_KEY, 'PUT', '/api/admin/providers/linear', {
      template: 'mcp',
      configuration: { resource_url: world.world.resourceUrl },
    });
    expect(put.status).toBe(201);
    for (const id of ['acme/users/alice/linear', 'acme/users/bob/linear']) {
      const started = await callApi(keyway.url, ROOT_KEY, 'POST', '/api/oauth/authorize/linear', {
        connection_id: id,
      });
      expect(started.status).toBe(201);
      // The world's user consents in memory; the callback goes to keyway serve over HTTP.
      expect((await fetch(world.world.consent(started.body.authorization_url))).status).toBe(200);
    }
    alice = (
      await callApi(keyway.url, ROOT_KEY, 'POST', '/api/admin/tokens', {
        name: 'alice',
        scopes: ['acme/users/alice'],
      })
    ).body.access_token;
    browser = await launchChromium();
    mkdirSync(shots, { recursive: true });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await keyway?.close();
    await callback?.close();
    await world?.close();
  });

  /** The user at the pages: pastes the token, checks what the page says, allows. */
  async function playUser(
    url: URL,
    token: string,
    screenshot?: string,
    endpoint = 'acme/users/alice/linear',
  ): Promise<void> {
    const page = await (
      await browser.newContext({ viewport: { width: 800, height: 900 } })
    ).newPage();
    await page.goto(url.href);
    expect(await page.title()).toBe('Sign in to Keyway');
    expect(await accessibilityFindings(page)).toEqual([]);
    await page.getByLabel('Your broker token').fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('button', { name: 'Allow' }).waitFor();
    expect(await page.title()).toBe('Allow Keyway E2E Client?');
    expect(await page.locator('dl').textContent()).toContain(endpoint);
    expect(await accessibilityFindings(page)).toEqual([]);
    if (screenshot !== undefined)
      await page.screenshot({ path: join(shots, screenshot), fullPage: true });
    await page.getByRole('button', { name: 'Allow' }).click();
    await page.waitForURL((target) => target.href.startsWith(callback.url));
    await page.context().close();
  }

  /** Connects the SDK's client to an endpoint (`mcp/…` by default), signing in when it asks. */
  async function connect(provider: Provider, endpoint: string, kind = 'mcp'): Promise<Client> {
    const url = new URL(`${keyway.url}/${kind}/${endpoint}`);
    const attempt = async () => {
      const client = new Client({ name: 'sign-in-e2e', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(url, { authProvider: provider }));
      return client;
    };
    try {
      return await attempt();
    } catch (error) {
      if (!(error instanceof UnauthorizedError)) throw error;
      const code = (await callback.next()).searchParams.get('code') ?? '';
      const transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
      await transport.finishAuth(code);
      return attempt();
    }
  }

  it('with dynamic registration: discovers, signs in, calls a tool, refreshes, and is refused elsewhere', async () => {
    const provider = new Provider(callback.url, (url) =>
      playUser(url, alice, engine.name === 'SQLite' ? 'sign-in-consent.png' : undefined),
    );
    const client = await connect(provider, 'acme/users/alice/linear');
    // The SDK found Keyway from the endpoint's 401, registered, and sent the resource.
    const opened = provider.opened[0] as URL;
    expect(opened.origin + opened.pathname).toBe(`${keyway.url}/oauth/authorize`);
    expect(opened.searchParams.get('resource')).toBe(`${keyway.url}/mcp/acme/users/alice/linear`);
    expect(opened.searchParams.get('code_challenge_method')).toBe('S256');
    expect(provider.information?.client_id).toMatch(/^kwc-/);
    const answer = await client.callTool({ name: 'echo', arguments: { text: 'through Keyway' } });
    expect(answer.content).toEqual([{ type: 'text', text: '{"text":"through Keyway"}' }]);
    const tokens = provider.saved as OAuthTokens;
    expect(tokens.access_token).toMatch(/^kw1_/);
    expect(world.world.secrets().some((secret) => JSON.stringify(provider).includes(secret))).toBe(
      false,
    );

    // The same token at another connection's endpoint, and at the API: refused.
    for (const path of [
      '/mcp/acme/users/bob/linear',
      '/mcp/acme/users/alice/linear2',
      '/api/admin/tokens',
    ]) {
      const refused = await fetch(`${keyway.url}${path}`, {
        method: path.startsWith('/mcp') ? 'POST' : 'GET',
        headers: {
          authorization: `Bearer ${tokens.access_token}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: path.startsWith('/mcp') ? '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' : null,
      });
      expect(refused.status, path).toBe(401);
      expect(
        ((await refused.json()) as { error_description: string }).error_description,
        path,
      ).toBe('the token is for another resource');
    }

    // The access token is revoked (as if it expired): the SDK refreshes and carries on.
    const grants = await callApi(keyway.url, ROOT_KEY, 'GET', '/api/admin/grants');
    expect(grants.body.items).toHaveLength(1);
    const anchor = grants.body.items[0];
    expect(anchor).toMatchObject({
      client_name: 'Keyway E2E Client',
      user: 'alice',
      endpoint: 'mcp/acme/users/alice/linear',
    });
    const listed = await callApi(keyway.url, ROOT_KEY, 'GET', '/api/admin/tokens');
    const access = listed.body.items.find((token: { name: string }) => /\.a1$/.test(token.name));
    expect(
      (await callApi(keyway.url, ROOT_KEY, 'DELETE', `/api/admin/tokens/${access.name}`)).status,
    ).toBe(204);
    const again = await client.callTool({ name: 'echo', arguments: { text: 'after a refresh' } });
    expect(again.content).toEqual([{ type: 'text', text: '{"text":"after a refresh"}' }]);
    expect((provider.saved as OAuthTokens).refresh_token).not.toBe(tokens.refresh_token);
    expect(provider.opened).toHaveLength(1);
    await client.close();

    // The console's Grants view shows it, and revoking it there ends it: the client must
    // sign in again.
    const consolePage = await browser.newPage();
    await consolePage.goto(`${keyway.url}/inspector`);
    await consolePage.getByLabel('Root key or broker token').fill(ROOT_KEY);
    await consolePage.getByRole('button', { name: 'Use it' }).click();
    await consolePage
      .getByRole('navigation', { name: 'Views' })
      .getByRole('link', { name: 'Grants', exact: true })
      .click();
    const row = consolePage.locator('tr', { hasText: 'mcp/acme/users/alice/linear' });
    await row.waitFor();
    expect(await row.textContent()).toContain('Keyway E2E Client');
    expect(await row.textContent()).toContain('alice');
    expect(await accessibilityFindings(consolePage)).toEqual([]);
    await row.getByRole('button', { name: /^Revoke/ }).click();
    await row.getByRole('button', { name: /^Confirm: revoke/ }).click();
    await expect
      .poll(
        async () => (await callApi(keyway.url, ROOT_KEY, 'GET', '/api/admin/grants')).body.items,
      )
      .toEqual([]);
    await consolePage.close();
    const after = await fetch(`${keyway.url}/mcp/acme/users/alice/linear`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${(provider.saved as OAuthTokens).access_token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
    });
    expect(after.status).toBe(401);
    expect(after.headers.get('www-authenticate')).toBe(
      `Bearer realm="keyway", resource_metadata="${keyway.url}/.well-known/oauth-protected-resource/mcp/acme/users/alice/linear", error="invalid_token"`,
    );
  }, 120_000);
  it('adds the portal of its user’s path and signs in once: every connection there, its tools by alias', async () => {
    const provider = new Provider(callback.url, (url) =>
      playUser(url, alice, undefined, 'portal/acme/users/alice'),
    );
    const client = await connect(provider, 'acme/users/alice', 'portal');
    const opened = provider.opened[0] as URL;
    expect(opened.searchParams.get('resource')).toBe(`${keyway.url}/portal/acme/users/alice`);
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toContain('linear__echo');
    const answer = await client.callTool({
      name: 'linear__echo',
      arguments: { text: 'through the portal' },
    });
    expect(answer.content).toEqual([{ type: 'text', text: '{"text":"through the portal"}' }]);
    const token = (provider.saved as OAuthTokens).access_token;
    expect(world.world.secrets().some((secret) => JSON.stringify(provider).includes(secret))).toBe(
      false,
    );
    // Bob's connection is not in Alice's portal; her portal's token opens nothing else.
    expect(tools.map((tool) => tool.name).filter((name) => !name.startsWith('keyway__'))).toEqual(
      tools.map((tool) => tool.name).filter((name) => name.startsWith('linear__')),
    );
    for (const path of [
      '/mcp/acme/users/alice/linear',
      '/portal/acme/users',
      '/api/admin/tokens',
    ]) {
      const refused = await fetch(`${keyway.url}${path}`, {
        method: path.startsWith('/api') ? 'GET' : 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: path.startsWith('/api') ? null : '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
      });
      expect(refused.status, path).toBe(401);
    }
    const grants = await callApi(keyway.url, ROOT_KEY, 'GET', '/api/admin/grants');
    expect(
      grants.body.items.map((grant: { endpoint: string; user: string }) => [
        grant.endpoint,
        grant.user,
      ]),
    ).toContainEqual(['portal/acme/users/alice', 'alice']);
    await client.close();
  });
});

describe('an MCP client whose client_id is its metadata document, served over https', () => {
  it('signs in with the document’s URL as client_id, and Keyway reads it from there', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keyway-cimd-'));
    const key = join(dir, 'key.pem');
    const cert = join(dir, 'cert.pem');
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-keyout',
        key,
        '-out',
        cert,
        '-days',
        '1',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
      ],
      { stdio: 'ignore' },
    );
    const callback = await callbackServer();
    const documents = createHttpsServer({ key: readFileSync(key), cert: readFileSync(cert) });
    let documentUrl = '';
    let reads = 0;
    documents.on('request', (_req, res) => {
      reads++;
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          client_id: documentUrl,
          client_name: 'Metadata Document Client',
          redirect_uris: [callback.url],
          grant_types: ['authorization_code', 'refresh_token'],
          response_types: ['code'],
          token_endpoint_auth_method: 'none',
        }),
      );
    });
    await new Promise<void>((resolve) => documents.listen(0, '127.0.0.1', resolve));
    const address = documents.address() as { port: number };
    documentUrl = `https://127.0.0.1:${address.port}/client.json`;
    const world = await serveWorld({});
    const database = join(dir, 'keyway.sqlite');
    const port = await freePort();
    const keyway = await startBrokerProcess({
      PORT: String(port),
      KEYWAY_BASE_URL: `http://127.0.0.1:${port}`,
      KEYWAY_ROOT_KEY: ROOT_KEY,
      KEYWAY_DATABASE: database,
      KEYWAY_VAULT_KEYS: VAULT_KEY,
      KEYWAY_ALLOWED_HOSTS: '127.0.0.1',
      KEYWAY_SIGN_IN: 'token',
      KEYWAY_INSPECTOR: 'false',
      KEYWAY_LOG_LEVEL: 'silent',
      // The document's server has a certificate of its own: the broker's process trusts it.
      NODE_EXTRA_CA_CERTS: cert,
    });
    const browser = await launchChromium();
    try {
      const put = await callApi(keyway.url, ROOT_KEY, 'PUT', '/api/admin/providers/linear', {
        template: 'mcp',
        configuration: { resource_url: world.world.resourceUrl },
      });
      expect(put.status).toBe(201);
      const started = await callApi(keyway.url, ROOT_KEY, 'POST', '/api/oauth/authorize/linear', {
        connection_id: 'acme/users/alice/linear',
      });
      expect((await fetch(world.world.consent(started.body.authorization_url))).status).toBe(200);
      const alice = (
        await callApi(keyway.url, ROOT_KEY, 'POST', '/api/admin/tokens', {
          name: 'alice',
          scopes: ['acme/users/alice'],
        })
      ).body.access_token as string;
      const provider = new Provider(
        callback.url,
        async (url) => {
          const page = await browser.newPage();
          await page.goto(url.href);
          const details = await page.locator('dl').textContent();
          expect(details).toContain('Metadata Document Client');
          expect(details).toContain(
            `127.0.0.1:${address.port} (its metadata document is served there)`,
          );
          await page.getByLabel('Your broker token').fill(alice);
          await page.getByRole('button', { name: 'Sign in' }).click();
          await page.getByRole('button', { name: 'Allow' }).click();
          await page.waitForURL((target) => target.href.startsWith(callback.url));
          await page.close();
        },
        documentUrl,
      );
      const url = new URL(`${keyway.url}/mcp/acme/users/alice/linear`);
      const client = new Client({ name: 'cimd-e2e', version: '1.0.0' });
      await expect(
        client.connect(new StreamableHTTPClientTransport(url, { authProvider: provider })),
      ).rejects.toThrow('Unauthorized');
      expect(provider.opened[0]?.searchParams.get('client_id')).toBe(documentUrl);
      const code = (await callback.next()).searchParams.get('code') ?? '';
      await new StreamableHTTPClientTransport(url, { authProvider: provider }).finishAuth(code);
      const connected = new Client({ name: 'cimd-e2e', version: '1.0.0' });
      await connected.connect(new StreamableHTTPClientTransport(url, { authProvider: provider }));
      const answer = await connected.callTool({
        name: 'echo',
        arguments: { text: 'by its document' },
      });
      expect(answer.content).toEqual([{ type: 'text', text: '{"text":"by its document"}' }]);
      expect(reads).toBeGreaterThanOrEqual(1);
      await connected.close();
    } finally {
      await browser.close();
      await keyway.stop();
      await world.close();
      await callback.close();
      await close(documents);
    }
  }, 120_000);
});

describe('users who sign in through an OpenID provider: stock oidc-provider', () => {
  it('lands a user in the namespace the provider’s subject fills, and refuses an endpoint outside it', async () => {
    const callback = await callbackServer();
    const world = await serveWorld({});
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const idpServer = createHttpServer();
    const issuer = await listen(idpServer);
    // oidc-provider as it ships: only Keyway's client is configured.
    const idp = new Provider_(issuer, {
      clients: [
        {
          client_id: 'keyway',
          client_secret: 'keyway-at-the-idp-0123456789',
          redirect_uris: [`${base}/oauth/sign-in/callback`],
        },
      ],
    });
    idpServer.on('request', idp.callback());
    const keyway = await serve({
      port,
      baseUrl: base,
      rootKey: ROOT_KEY,
      database: ':memory:',
      vaultKeys: [VAULT_KEY],
      allowedHosts: ['127.0.0.1'],
      signIn: {
        methods: ['oidc'],
        oidc: {
          issuer,
          clientId: 'keyway',
          clientSecret: 'keyway-at-the-idp-0123456789',
          namespace: 'acme/users/{sub}',
        },
      },
      inspector: false,
      log: () => {},
      logLevel: 'silent',
    });
    const browser = await launchChromium();
    try {
      expect(
        (
          await callApi(keyway.url, ROOT_KEY, 'PUT', '/api/admin/providers/linear', {
            template: 'mcp',
            configuration: { resource_url: world.world.resourceUrl },
          })
        ).status,
      ).toBe(201);
      for (const id of ['acme/users/alice/linear', 'acme/users/bob/linear']) {
        const started = await callApi(keyway.url, ROOT_KEY, 'POST', '/api/oauth/authorize/linear', {
          connection_id: id,
        });
        expect((await fetch(world.world.consent(started.body.authorization_url))).status).toBe(200);
      }
      /** Alice at the pages: Keyway's, the provider's login and consent, Keyway's consent. */
      const asAlice = async (url: URL, outcome: 'allow' | 'refused') => {
        const page = await browser.newPage();
        await page.goto(url.href);
        await page.getByRole('button', { name: 'Sign in with your identity provider' }).click();
        await page.locator('input[name="login"]').fill('alice');
        await page.locator('input[name="password"]').fill('any');
        // The provider's own pages: its login, then its consent, each a form to submit.
        for (let step = 0; step < 3 && !page.url().startsWith(base); step++) {
          await Promise.all([
            page.waitForNavigation(),
            page.locator('button[type="submit"]').click(),
          ]);
        }
        await page.waitForURL((target) => target.href.startsWith(base));
        if (outcome === 'allow') {
          expect(await page.locator('main p').first().textContent()).toContain(
            'Signed in as alice',
          );
          await page.getByRole('button', { name: 'Allow' }).click();
          await page.waitForURL((target) => target.href.startsWith(callback.url));
        } else {
          await page.getByRole('alert').waitFor();
          expect(await page.getByRole('alert').textContent()).toBe(
            'your namespace is acme/users/alice, which does not hold acme/users/bob/linear',
          );
        }
        await page.close();
      };
      const provider = new Provider(callback.url, (url) => asAlice(url, 'allow'));
      const url = new URL(`${keyway.url}/mcp/acme/users/alice/linear`);
      await expect(
        new Client({ name: 'oidc-e2e', version: '1.0.0' }).connect(
          new StreamableHTTPClientTransport(url, { authProvider: provider }),
        ),
      ).rejects.toThrow('Unauthorized');
      await new StreamableHTTPClientTransport(url, { authProvider: provider }).finishAuth(
        (await callback.next()).searchParams.get('code') ?? '',
      );
      const client = new Client({ name: 'oidc-e2e', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(url, { authProvider: provider }));
      const answer = await client.callTool({
        name: 'echo',
        arguments: { text: 'via the provider' },
      });
      expect(answer.content).toEqual([{ type: 'text', text: '{"text":"via the provider"}' }]);
      const grants = await callApi(keyway.url, ROOT_KEY, 'GET', '/api/admin/grants');
      expect(grants.body.items).toMatchObject([
        { user: 'alice', endpoint: 'mcp/acme/users/alice/linear' },
      ]);
      await client.close();

      // Bob's endpoint is outside alice's namespace: the sign-in page says so.
      const outside = new Provider(callback.url, (target) => asAlice(target, 'refused'));
      await expect(
        new Client({ name: 'oidc-e2e', version: '1.0.0' }).connect(
          new StreamableHTTPClientTransport(new URL(`${keyway.url}/mcp/acme/users/bob/linear`), {
            authProvider: outside,
          }),
        ),
      ).rejects.toThrow('Unauthorized');
      expect(outside.opened).toHaveLength(1);
    } finally {
      await browser.close();
      await keyway.close();
      await close(idpServer);
      await world.close();
      await callback.close();
    }
  }, 120_000);
});
