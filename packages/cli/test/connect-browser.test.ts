import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { toWebRequest, writeWebResponse } from '@keyway/http/node';
import { accessibilityFindings, launchChromium } from '@keyway/test-support/browser';
import { freePort } from '@keyway/test-support/examples';
import { startWebhookReceiver } from '@keyway/test-support/webhooks';
import { createTestWorld, type TestWorld } from '@keyway/testing';
import { build } from 'esbuild';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningServer, serve } from '../src/index.js';
import { consentInPopup, fillConsent, startAuthorizedMcp } from './browser-peers.js';
import { callApi, close, listen } from './peers.js';

/*
 * The hosted connect page (docs/api.md §19) end to end in Debian's Chromium: `keyway serve`,
 * a stock oidc-provider, an MCP SDK server behind it, and an application of its own origin
 * whose backend creates connect sessions and whose page opens them with @keyway/connect.
 */

const ROOT_KEY = 'connect-page-root-key-0123456789abcdefghij';
const VAULT_KEY = 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8';
const WEBHOOK_SECRET = `whsec_${randomBytes(24).toString('base64')}`;
// KEYWAY_UPDATE_DOCS=1 writes the screenshots docs/connect.md shows.
const shots = fileURLToPath(
  new URL(
    process.env.KEYWAY_UPDATE_DOCS === '1'
      ? '../../../docs/images'
      : '../../../.test-results/connect',
    import.meta.url,
  ),
);

/** The application: a page with a Connect button, and a backend that creates sessions. */
async function startApp(keyway: () => string, appToken: () => string) {
  const bundle = await build({
    stdin: {
      contents: `import { openConnect } from '@keyway/connect';
        document.getElementById('connect').addEventListener('click', async () => {
          const answer = await (await fetch('/session', { method: 'POST' })).json();
          const result = await openConnect({ url: answer.url });
          document.getElementById('result').textContent = JSON.stringify(result);
        });`,
      resolveDir: fileURLToPath(new URL('.', import.meta.url)),
    },
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'browser',
    conditions: ['@keyway/source'],
  });
  const script = bundle.outputFiles[0]?.text ?? '';
  const server: Server = createServer(async (request, response) => {
    const url = new URL(request.url ?? '/', 'http://app');
    if (url.pathname === '/session' && request.method === 'POST') {
      // The app's backend: a session for its signed-in user, Bob.
      const created = await callApi(keyway(), appToken(), 'POST', '/api/admin/connect-sessions', {
        namespace: 'tenants/bob',
        providers: ['demo'],
        end_user: { id: 'bob-1', name: 'Bob' },
        branding: { name: 'Acme Notes', accent: '#6b21a8' },
      });
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ url: created.body.url }));
      return;
    }
    if (url.pathname === '/app.js') {
      response.writeHead(200, { 'content-type': 'text/javascript' });
      response.end(script);
      return;
    }
    response.writeHead(200, { 'content-type': 'text/html' });
    response.end(
      `<!doctype html><html lang="en"><title>Acme Notes</title><body><main>` +
        `<h1>Acme Notes</h1><p id="back">${url.pathname === '/done' ? url.search : ''}</p>` +
        `<button id="connect" type="button">Connect your accounts</button>` +
        `<pre id="result"></pre></main><script type="module" src="/app.js"></script></body></html>`,
    );
  });
  const origin = await listen(server);
  return { origin, close: () => close(server) };
}

/**
 * The test kit's servers over loopback, with a consent page that approves at once, and a
 * token endpoint that fails (`server_error`) while `failing.on` is set.
 */
async function startFlakyServer() {
  const failing = { on: true };
  let world: TestWorld | null = null;
  const server = createServer((request, response) => {
    const current = world as TestWorld;
    const url = new URL(request.url ?? '/', current.issuer);
    if (url.pathname === '/as/oauth/authorize') {
      response.writeHead(302, { location: current.consent(url.href) });
      response.end();
      return;
    }
    if (url.pathname === '/as/oauth/token' && failing.on) {
      response.writeHead(503, { 'content-type': 'application/json' });
      response.end(
        JSON.stringify({
          error: 'temporarily_unavailable',
          error_description: 'the token service is down for maintenance',
        }),
      );
      return;
    }
    void current.fetch(toWebRequest(request)).then((answer) => writeWebResponse(response, answer));
  });
  const origin = await listen(server);
  world = createTestWorld({ resourceUrl: `${origin}/mcp`, issuer: `${origin}/as` });
  return { world, failing, close: () => close(server) };
}

describe('the hosted connect page in a real browser: keyway serve, oidc-provider, an MCP SDK server, an app', () => {
  let servers: Awaited<ReturnType<typeof startAuthorizedMcp>>;
  let flaky: Awaited<ReturnType<typeof startFlakyServer>>;
  let sink: Awaited<ReturnType<typeof startWebhookReceiver>>;
  let app: Awaited<ReturnType<typeof startApp>>;
  let keyway: RunningServer;
  let browser: Browser;
  let base: string;
  let appToken: string;

  beforeAll(async () => {
    servers = await startAuthorizedMcp('connect-mcp');
    flaky = await startFlakyServer();
    sink = await startWebhookReceiver({ secret: WEBHOOK_SECRET, status: () => 204 });
    app = await startApp(
      () => base,
      () => appToken,
    );
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    keyway = await serve({
      port,
      baseUrl: base,
      rootKey: ROOT_KEY,
      database: ':memory:',
      vaultKeys: [VAULT_KEY],
      allowedHosts: ['127.0.0.1'],
      allowedRedirects: [app.origin],
      webhooks: [{ url: sink.url, secret: WEBHOOK_SECRET, types: ['connect_session.completed'] }],
      log: () => {},
      logLevel: 'silent',
    });
    const provider = await callApi(base, ROOT_KEY, 'PUT', '/api/admin/providers/demo', {
      template: 'mcp',
      configuration: { resource_url: servers.resourceUrl },
    });
    expect(provider.status).toBe(201);
    const second = await callApi(base, ROOT_KEY, 'PUT', '/api/admin/providers/flaky', {
      template: 'mcp',
      configuration: { resource_url: flaky.world.resourceUrl },
    });
    expect(second.status).toBe(201);
    const minted = await callApi(base, ROOT_KEY, 'POST', '/api/admin/tokens', {
      name: 'acme-notes',
      scopes: ['tenants', 'demo', 'flaky'],
    });
    appToken = minted.body.access_token;
    browser = await launchChromium();
    mkdirSync(shots, { recursive: true });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await keyway?.close();
    await app?.close();
    await sink?.close();
    await servers?.close();
    await flaky?.close();
  });

  async function newPage(width: number): Promise<{ page: Page; errors: string[] }> {
    const context = await browser.newContext({ viewport: { width, height: 800 } });
    const page = await context.newPage();
    const errors: string[] = [];
    context.on('page', (opened) => {
      opened.on('pageerror', (error) => errors.push(error.message));
    });
    page.on('pageerror', (error) => errors.push(error.message));
    return { page, errors };
  }

  /** A session for the end user of `namespace`, created as the app's backend would. */
  async function session(namespace: string, extra: Record<string, unknown> = {}) {
    const created = await callApi(base, appToken, 'POST', '/api/admin/connect-sessions', {
      namespace,
      providers: ['demo'],
      end_user: { id: `${namespace}-id`, name: 'Bob' },
      branding: { name: 'Acme Notes', accent: '#6b21a8' },
      ...extra,
    });
    expect(created.status).toBe(201);
    return created.body as { id: string; url: string };
  }

  const fits = (page: Page) =>
    page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth);

  it('connects from the app with @keyway/connect: the popup page, the consent, the outcome and the webhook', async () => {
    const { page, errors } = await newPage(1280);
    await page.goto(app.origin);
    const opened = page.context().waitForEvent('page');
    await page.getByRole('button', { name: 'Connect your accounts' }).click();
    const connect = await opened;
    await connect.waitForLoadState();
    await expect
      .poll(() => connect.getByRole('heading', { level: 3, name: 'demo' }).isVisible())
      .toBe(true);
    // The secret left the address bar: it lives in this tab's storage only.
    expect(new URL(connect.url()).hash).toBe('');
    expect(await connect.locator('h1').textContent()).toBe('Connect your accounts');
    expect(await connect.locator('.subtitle').textContent()).toBe('to Acme Notes');
    expect(await connect.locator('.provider .status').textContent()).toBe('Not connected');
    expect(await connect.locator('.provider .hint').first().textContent()).toBe(
      `You sign in at ${new URL(servers.issuer).host}`,
    );
    expect(await accessibilityFindings(connect)).toEqual([]);
    // The page is itself a 480 px popup of the app: the consent opens in a popup of its own
    // (leaving for another origin would cut the page off from the app).
    expect(await connect.evaluate(() => window.innerWidth)).toBe(480);
    await consentInPopup(connect, () =>
      connect.getByRole('button', { name: 'Connect demo' }).click(),
    );
    // The page told the app, which closed it; openConnect resolved.
    await expect.poll(() => page.locator('#result').textContent()).not.toBe('');
    expect(JSON.parse((await page.locator('#result').textContent()) ?? '')).toEqual({
      outcome: 'connected',
      provider_id: 'demo',
      connection_id: 'tenants/bob/demo',
    });
    await expect.poll(() => connect.isClosed()).toBe(true);
    const connection = await callApi(
      base,
      appToken,
      'GET',
      '/api/oauth/connections/tenants/bob/demo',
    );
    expect(connection.body.status).toBe('active');
    await expect.poll(() => sink.received.length).toBe(1);
    expect(sink.received[0]?.verified).toBe(true);
    expect(sink.received[0]?.event).toMatchObject({
      type: 'connect_session.completed',
      resource: 'tenants/bob/demo',
      data: { provider_id: 'demo', end_user_id: 'bob-1' },
    });
    expect(errors).toEqual([]);
  });

  it('at 375 px consents in the same tab and returns to the app’s redirect_uri', async () => {
    const created = await session('tenants/carol', { redirect_uri: `${app.origin}/done` });
    const { page, errors } = await newPage(375);
    await page.goto(created.url);
    await expect
      .poll(() => page.getByRole('button', { name: 'Connect demo' }).isVisible())
      .toBe(true);
    expect(await fits(page)).toBe(true);
    expect(await accessibilityFindings(page)).toEqual([]);
    await page.screenshot({ path: join(shots, 'connect-mobile.png'), fullPage: true });
    await page.getByRole('button', { name: 'Connect demo' }).click();
    // The consent takes this tab (no popup on a narrow screen), then comes back.
    await page.waitForURL((url) => url.href.startsWith(servers.issuer));
    await fillConsent(page);
    await page.waitForURL((url) => url.href.startsWith(`${app.origin}/done`));
    const back = new URL(page.url());
    expect(Object.fromEntries(back.searchParams)).toEqual({
      connection_id: 'tenants/carol/demo',
      status: 'active',
    });
    expect(errors).toEqual([]);
  });

  it('tells the app of a declined reconnect, and the connection stays active', async () => {
    const { page, errors } = await newPage(1280);
    await page.goto(app.origin);
    // Bob's connection is active from the first test: a declined reconnect leaves it so.
    const opened = page.context().waitForEvent('page');
    await page.getByRole('button', { name: 'Connect your accounts' }).click();
    const connect = await opened;
    await expect
      .poll(() => connect.getByRole('button', { name: 'Reconnect demo' }).isVisible())
      .toBe(true);
    expect(await connect.locator('.provider .status').textContent()).toBe('Connected');
    await consentInPopup(
      connect,
      () => connect.getByRole('button', { name: 'Reconnect demo' }).click(),
      { decline: true },
    );
    await expect.poll(() => page.locator('#result').textContent()).not.toBe('');
    expect(JSON.parse((await page.locator('#result').textContent()) ?? '')).toEqual({
      outcome: 'declined',
      provider_id: 'demo',
      connection_id: 'tenants/bob/demo',
      error: 'access_denied',
    });
    const kept = await callApi(base, appToken, 'GET', '/api/oauth/connections/tenants/bob/demo');
    expect([kept.body.status, kept.body.error?.code]).toEqual(['active', 'access_denied']);
    expect(errors).toEqual([]);
  });

  it('at 1280 px consents in a popup: a declined one said plainly with a retry, then an ended session', async () => {
    const created = await session('tenants/dave');
    const { page, errors } = await newPage(1280);
    await page.goto(created.url);
    await expect
      .poll(() => page.getByRole('button', { name: 'Connect demo' }).isVisible())
      .toBe(true);
    expect(await accessibilityFindings(page)).toEqual([]);
    await page.screenshot({ path: join(shots, 'connect-desktop.png'), fullPage: true });
    // A wide window: the consent opens in a popup, which reports back and closes.
    await consentInPopup(page, () => page.getByRole('button', { name: 'Connect demo' }).click(), {
      decline: true,
    });
    await expect
      .poll(() => page.getByRole('status').textContent())
      .toBe('You declined the connection to demo. Nothing was connected.Try again');
    expect(await page.getByRole('button', { name: 'Try again' }).isVisible()).toBe(true);
    expect(await accessibilityFindings(page)).toEqual([]);

    // The app ends the session: the page's next call is refused, and it says so.
    const ended = await callApi(
      base,
      appToken,
      'DELETE',
      `/api/admin/connect-sessions/${created.id}`,
    );
    expect(ended.status).toBe(200);
    await page.getByRole('button', { name: 'Try again' }).click();
    await expect
      .poll(() => page.getByRole('alert').textContent())
      .toBe('This connect link has expired or was ended. Ask Acme Notes for a new one.');
    // The secret opens nothing else.
    const secret = new URL(created.url).hash.slice(1);
    for (const path of ['/api/admin/tokens', '/api/oauth/connections/tenants/dave/demo']) {
      const refused = await callApi(base, secret, 'GET', path);
      expect([path, refused.status]).toEqual([path, 401]);
    }
    expect(errors).toEqual([]);
  });

  it('says the server’s error with its words, and connects on Try again once the server is back', async () => {
    const created = await session('tenants/erin', { providers: ['flaky'] });
    const { page, errors } = await newPage(1280);
    await page.goto(created.url);
    await expect
      .poll(() => page.getByRole('button', { name: 'Connect flaky' }).isVisible())
      .toBe(true);
    await consentInPopup(page, () => page.getByRole('button', { name: 'Connect flaky' }).click());
    await expect
      .poll(() => page.getByRole('status').textContent())
      .toBe('flaky could not be connected: the authorization server answered HTTP 503Try again');
    expect(await page.locator('.provider .status').textContent()).toMatch(/^Needs attention: /);
    expect(await accessibilityFindings(page)).toEqual([]);
    flaky.failing.on = false;
    await consentInPopup(page, () => page.getByRole('button', { name: 'Try again' }).click());
    await expect.poll(() => page.getByRole('status').textContent()).toBe('flaky is connected.');
    expect(await page.locator('.provider .status').textContent()).toBe('Connected');
    expect(errors).toEqual([]);
  });

  it('lists the sessions in the console: active, ended, what each completed; ends one', async () => {
    const { page, errors } = await newPage(1280);
    await page.goto(`${base}/inspector#connect-sessions`);
    await page.getByLabel('Root key or broker token').fill(appToken);
    await page.getByRole('button', { name: 'Use it' }).click();
    await page
      .getByRole('navigation', { name: 'Views' })
      .getByRole('link', { name: 'Connect sessions', exact: true })
      .click();
    const table = page.getByRole('table');
    await expect.poll(() => table.locator('tbody tr').count()).toBeGreaterThanOrEqual(4);
    const rows = await table
      .locator('tbody tr')
      .evaluateAll((found) =>
        found.map((row) =>
          [...row.querySelectorAll('td')].slice(1, 5).map((cell) => cell.textContent),
        ),
      );
    // Newest first: dave's (ended), carol's, the two bob's sessions opened from the app.
    expect(rows).toContainEqual(['tenants/dave', 'demo', 'revoked', 'none']);
    expect(rows).toContainEqual(['tenants/carol', 'demo', 'active', 'tenants/carol/demo']);
    expect(rows).toContainEqual(['tenants/bob', 'demo', 'active', 'tenants/bob/demo']);
    expect(await accessibilityFindings(page)).toEqual([]);

    const carol = page.getByRole('row').filter({ hasText: 'tenants/carol' });
    await carol.getByRole('button', { name: /^End connect session/ }).click();
    await carol.getByRole('button', { name: /^Confirm: end/ }).click();
    await expect
      .poll(() => page.getByRole('status').first().textContent())
      .toMatch(/^Connect session .+ is ended: its page no longer works\.$/);
    await expect
      .poll(() =>
        page
          .getByRole('row')
          .filter({ hasText: 'tenants/carol' })
          .locator('td')
          .nth(3)
          .textContent(),
      )
      .toBe('revoked');
    expect(errors).toEqual([]);
  });
});
