import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '@keyway/test-support/examples';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningServer, serve } from '../src/index.js';
import { callApi, close, listen, oidcProvider, serveMcp } from './peers.js';

const ROOT_KEY = 'inspector-root-key-0123456789abcdefghijk';
const VAULT_KEY = 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8';
const shots = fileURLToPath(new URL('../../../.test-results/inspector', import.meta.url));

/** The system's Chromium (Debian's package): never a downloaded browser. */
function chromiumPath(): string {
  return execFileSync('sh', ['-c', 'command -v chromium || command -v chromium-browser'])
    .toString()
    .trim();
}

describe('the inspector in a real browser: keyway serve, an MCP SDK server, oidc-provider', () => {
  let asServer: Server;
  let mcpServer: Server;
  let issuer: string;
  let resourceUrl: string;
  let keyway: RunningServer;
  let browser: Browser;
  let base: string;

  beforeAll(async () => {
    asServer = createServer();
    issuer = await listen(asServer);
    mcpServer = createServer();
    const mcpOrigin = await listen(mcpServer);
    resourceUrl = `${mcpOrigin}/mcp`;
    asServer.on(
      'request',
      oidcProvider(issuer, () => resourceUrl, {
        accessTokenTTL: 600,
        accessTokenFormat: 'jwt',
      }).callback(),
    );
    serveMcp(mcpServer, {
      issuer,
      resourceUrl,
      name: 'inspector-mcp',
      version: '3.1.4',
      echo: (text) => text,
    });
    // The inspector is opened at the broker's public base URL: the callback page reports to
    // that origin only.
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    keyway = await serve({
      port,
      baseUrl: base,
      rootKey: ROOT_KEY,
      database: ':memory:',
      vaultKeys: [VAULT_KEY],
      allowedHosts: ['127.0.0.1'],
      log: () => {},
      logLevel: 'silent',
    });
    browser = await chromium.launch({
      executablePath: chromiumPath(),
      args: ['--headless', '--no-sandbox'],
    });
    mkdirSync(shots, { recursive: true });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await keyway?.close();
    if (mcpServer) await close(mcpServer);
    if (asServer) await close(asServer);
  });

  /** A fresh page with its request log and console errors. */
  async function open(
    width: number,
  ): Promise<{ page: Page; hosts: Set<string>; errors: string[] }> {
    const context = await browser.newContext({ viewport: { width, height: 900 } });
    const page = await context.newPage();
    const hosts = new Set<string>();
    const errors: string[] = [];
    // What Keyway's pages (the inspector, the callback page in the popup) ask for; the
    // authorization server's own sign-in pages are its business.
    context.on('request', (request) => {
      const ours = request.isNavigationRequest()
        ? request.url().startsWith(base)
        : request.frame().url().startsWith(base);
      if (ours) {
        hosts.add(new URL(request.url()).hostname);
      }
    });
    page.on('console', (message) => {
      if (message.type() === 'error') errors.push(message.text());
    });
    page.on('pageerror', (error) => errors.push(error.message));
    await page.goto(`${base}/inspector`);
    return { page, hosts, errors };
  }

  it('walks the whole flow: discovery, provider, consent in a popup, active, probe, delete', async () => {
    const { page, hosts, errors } = await open(1440);
    await page.getByLabel('Root key or broker token').fill(ROOT_KEY);
    await page.getByRole('button', { name: 'Use it' }).click();
    await expect.poll(() => page.locator('#status').textContent()).toContain('Credential accepted');

    await page.getByLabel('MCP server URL').fill(resourceUrl);
    await page.getByRole('button', { name: 'Discover' }).click();
    await expect
      .poll(() => page.locator('#discover-result').textContent())
      .toContain(`Authorization server ${issuer}`);
    expect(await page.locator('#discover-result').textContent()).toContain(
      'See RFC 9728 §3 (protected-resource metadata).',
    );

    await page.getByLabel('Provider id').first().fill('inspect/demo');
    await page.getByRole('button', { name: 'Save provider' }).click();
    await expect
      .poll(() => page.locator('#provider-result').textContent())
      .toMatch(/Provider inspect\/demo: client \S+ \(dynamic/);

    await page.getByLabel('Connection id').fill('acme/users/alice/demo');
    // The consent window is opened without an opener, so it is a page of the context.
    const popupOpened = page.context().waitForEvent('page');
    await page.getByRole('button', { name: 'Authorize' }).click();
    const popup = await popupOpened;
    await popup.waitForLoadState();
    // Issue 22, Low 4 (reverse tabnabbing): the authorization server's page has no handle
    // on the inspector, so it cannot replace it with a look-alike.
    expect(new URL(popup.url()).origin).toBe(issuer);
    expect(await popup.evaluate(() => window.opener === null)).toBe(true);
    await popup.evaluate(() => {
      try {
        (window.opener as Window | null)?.location.replace('https://evil.example.test/inspector');
      } catch {
        // Refused either way.
      }
    });
    expect(page.url()).toBe(`${base}/inspector`);
    await popup.locator('input[name=login]').fill('alice');
    await popup.locator('input[name=password]').fill('any');
    await popup.locator('button[type=submit]').click();
    await popup.locator('button[type=submit]').click();
    await expect
      .poll(() => page.locator('#connection-result').textContent(), { timeout: 15_000 })
      .toContain('active');
    const shown = (await page.locator('#connection-result').textContent()) ?? '';
    expect(shown).toMatch(/Access token\S{4}…\S{4}/);
    // The callback page told the inspector over its BroadcastChannel, then closed itself.
    await expect.poll(() => popup.isClosed(), { timeout: 10_000 }).toBe(true);
    expect(page.url()).toBe(`${base}/inspector`);

    await page.getByRole('button', { name: 'Probe' }).click();
    await expect
      .poll(() => page.locator('#probe-result').textContent(), { timeout: 15_000 })
      .toContain('echo — Echoes its text');
    expect(await page.locator('#probe-result').textContent()).toContain(
      'Server inspector-mcp 3.1.4',
    );
    await page.screenshot({ path: join(shots, 'flow-1440.png'), fullPage: true });
    expect(await page.locator('#connection-result').textContent()).toContain(
      'Refresh tokenheld: the token is refreshed when due',
    );

    // Issue 23: Reconnect starts a new consent for the same connection.
    const again = page.context().waitForEvent('page');
    await page.getByRole('button', { name: 'Reconnect' }).click();
    const second = await again;
    await second.waitForLoadState();
    for (let step = 0; step < 5 && !second.isClosed(); step++) {
      const submit = second.locator('button[type=submit]');
      if ((await submit.count()) === 0) break;
      await submit.first().click();
      await second.waitForLoadState().catch(() => {});
    }
    await expect.poll(() => second.isClosed(), { timeout: 10_000 }).toBe(true);
    await expect
      .poll(() => page.locator('#status').textContent(), { timeout: 15_000 })
      .toBe('Connection acme/users/alice/demo is active.');

    await page.getByRole('button', { name: 'Delete' }).click();
    await expect.poll(() => page.locator('#connection-result').textContent()).toContain('deleted');
    expect([...hosts].sort()).toEqual(['127.0.0.1']);
    expect(errors).toEqual([]);
  }, 90_000);

  it('makes a classic API provider from a profile of the catalog, its parameters filled (#28)', async () => {
    const { page, hosts, errors } = await open(375);
    await page.getByLabel('Root key or broker token').fill(ROOT_KEY);
    await page.getByRole('button', { name: 'Use it' }).click();
    await expect.poll(() => page.locator('#status').textContent()).toContain('Credential accepted');
    await page.getByLabel('Provider id').first().fill('inspect/ms');
    await page.getByLabel('Kind').selectOption('oauth2');
    await page.getByLabel('Profile').selectOption('microsoft');
    await page.getByLabel('Parameter tenant').fill('contoso.onmicrosoft.com');
    await page.getByLabel('Scopes (space-separated)').fill('User.Read');
    await page.getByLabel('Client id (custom)').fill('ms-client');
    await page.getByLabel('Client secret (custom, write-only)').fill('ms-secret-0123456789');
    await page.getByRole('button', { name: 'Save provider' }).click();
    await expect
      .poll(() => page.locator('#provider-result').textContent())
      .toBe('Provider inspect/ms: client ms-client (manual, client_secret_post).');
    await page.screenshot({ path: join(shots, 'profile-375.png'), fullPage: true });
    const view = await callApi(keyway.url, ROOT_KEY, 'GET', '/api/admin/providers/inspect/ms');
    expect(view.body).toMatchObject({
      template: 'oauth2',
      profile: 'microsoft',
      configuration: { scopes: ['User.Read'], params: { tenant: 'contoso.onmicrosoft.com' } },
      authorization_server: {
        authorization_endpoint:
          'https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/authorize',
      },
    });
    expect([...hosts].sort()).toEqual(['127.0.0.1']);
    expect(errors).toEqual([]);
  }, 60_000);

  it('shows the failing discovery step and its reason, and refuses a wrong credential clearly', async () => {
    const { page, errors } = await open(375);
    await page.getByLabel('Root key or broker token').fill('kw1_wrong');
    await page.getByRole('button', { name: 'Use it' }).click();
    await expect
      .poll(() => page.locator('#credential-result').textContent())
      .toBe('The credential was refused: check the root key or broker token.');
    await page.getByLabel('Root key or broker token').fill(ROOT_KEY);
    await page.getByRole('button', { name: 'Use it' }).click();
    await page.getByLabel('MCP server URL').fill(`${resourceUrl.replace('/mcp', '/nothing')}`);
    await page.getByRole('button', { name: 'Discover' }).click();
    await expect.poll(() => page.locator('#discover-result .failed').count()).toBeGreaterThan(0);
    await page.screenshot({ path: join(shots, 'failure-375.png'), fullPage: true });
    expect(errors.filter((error) => !error.includes('401'))).toEqual([]);
  }, 60_000);
});
