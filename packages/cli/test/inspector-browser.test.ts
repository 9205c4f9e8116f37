import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { accessibilityFindings, launchChromium } from '@keyway/test-support/browser';
import { freePort } from '@keyway/test-support/examples';
import { startWebhookReceiver } from '@keyway/test-support/webhooks';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningServer, serve } from '../src/index.js';
import { consentInPopup, startAuthorizedMcp } from './browser-peers.js';
import { callApi } from './peers.js';

const ROOT_KEY = 'inspector-root-key-0123456789abcdefghijk';
const VAULT_KEY = 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8';
const WEBHOOK_SECRET = `whsec_${randomBytes(24).toString('base64')}`;
// KEYWAY_UPDATE_DOCS=1 writes the screenshots docs/inspector.md shows; otherwise they go to
// .test-results for a look.
const shots = fileURLToPath(
  new URL(
    process.env.KEYWAY_UPDATE_DOCS === '1'
      ? '../../../docs/images'
      : '../../../.test-results/inspector',
    import.meta.url,
  ),
);

describe('the inspector in a real browser: keyway serve, an MCP SDK server, oidc-provider', () => {
  let servers: Awaited<ReturnType<typeof startAuthorizedMcp>>;
  let sink: Awaited<ReturnType<typeof startWebhookReceiver>>;
  let keyway: RunningServer;
  let browser: Browser;
  let base: string;

  beforeAll(async () => {
    servers = await startAuthorizedMcp('inspector-mcp');
    // A webhook endpoint that keeps failing: its deliveries show in the Webhooks view.
    sink = await startWebhookReceiver({ secret: WEBHOOK_SECRET, status: () => 500 });
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
      webhooks: [{ url: sink.url, secret: WEBHOOK_SECRET, types: ['connection.authorized'] }],
      log: () => {},
      logLevel: 'silent',
    });
    browser = await launchChromium();
    mkdirSync(shots, { recursive: true });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await keyway?.close();
    await sink?.close();
    await servers?.close();
  });

  /** A fresh page with its request log and console errors. */
  async function open(
    width: number,
    scheme: 'light' | 'dark' = 'light',
  ): Promise<{ page: Page; hosts: Set<string>; errors: string[] }> {
    const context = await browser.newContext({
      viewport: { width, height: 900 },
      colorScheme: scheme,
    });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
    const page = await context.newPage();
    const hosts = new Set<string>();
    const errors: string[] = [];
    // What Keyway's pages (the inspector, the callback page in the popup) ask for; the
    // authorization server's own sign-in pages are its business.
    context.on('request', (request) => {
      const ours = request.isNavigationRequest()
        ? request.url().startsWith(base)
        : request.frame().url().startsWith(base);
      if (ours) hosts.add(new URL(request.url()).hostname);
    });
    page.on('console', (message) => {
      if (message.type() === 'error') errors.push(message.text());
    });
    page.on('pageerror', (error) => errors.push(error.message));
    await page.goto(`${base}/inspector`);
    return { page, hosts, errors };
  }

  async function signIn(page: Page, credential: string): Promise<void> {
    await page.getByLabel('Root key or broker token').fill(credential);
    await page.getByRole('button', { name: 'Use it' }).click();
    await expect.poll(() => page.locator('#status').textContent()).toContain('Credential accepted');
  }

  /** Opens a view from the navigation and waits for its heading. */
  async function go(page: Page, view: string): Promise<void> {
    await page
      .getByRole('navigation', { name: 'Views' })
      .getByRole('link', { name: view, exact: true })
      .click();
    await expect
      .poll(() => page.getByRole('heading', { level: 2, name: view, exact: true }).isVisible())
      .toBe(true);
    expect(await page.locator('nav a[aria-current="page"]').textContent()).toBe(view);
  }

  /** A full-page screenshot from the top (the navigation sticks to the top of the view). */
  async function shot(page: Page, name: string): Promise<void> {
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: join(shots, name), fullPage: true });
  }

  /** Whether the page is no wider than the window (nothing forces a sideways scroll). */
  const fits = (page: Page) =>
    page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth);

  /** Signs in and consents in the oidc-provider popup. */
  const consent = (page: Page, start: () => Promise<void>) => consentInPopup(page, start);

  const panel = (page: Page, id: string) => page.getByRole('region', { name: `Connection ${id}` });

  it('walks the whole flow at 1440 px with the OAuth debugger: documents, registration, token response, gateway URL', async () => {
    const { page, hosts, errors } = await open(1440);
    await signIn(page, ROOT_KEY);
    expect(await page.locator('.who').textContent()).toContain('Root key · scopes **');

    await page.getByLabel('MCP server URL').fill(servers.resourceUrl);
    await page.getByRole('button', { name: 'Discover' }).click();
    await expect
      .poll(() => page.locator('#discover-result').textContent())
      .toContain(`Authorization server ${servers.issuer}`);
    const discovered = page.locator('#discover-result');
    expect(await discovered.textContent()).toContain(
      'See RFC 9728 §3 (protected-resource metadata).',
    );
    // The report in plain words, as keyway doctor prints it (registration not tried here).
    const report = page.getByRole('region', { name: /^What will work/ });
    expect(await report.getByRole('heading').textContent()).toBe(
      'What will work: credentials mode register',
    );
    expect(await report.getByRole('listitem').allTextContents()).toContain(
      `Keyway sends resource=${servers.resourceUrl} exactly as the server publishes it.`,
    );
    // The raw documents, collapsible: the resource metadata names the server.
    await discovered.getByText('The document (resource_metadata)').click();
    const metadata = JSON.parse(
      (await discovered.locator('details[open] pre').first().textContent()) ?? '{}',
    );
    expect(metadata).toMatchObject({
      resource: servers.resourceUrl,
      authorization_servers: [servers.issuer],
    });
    await discovered.getByText('The document (authorization_server_metadata)').click();
    expect(await discovered.locator('details[open] pre').nth(1).textContent()).toContain(
      `"issuer": "${servers.issuer}"`,
    );

    await page.getByLabel('Provider id').fill('inspect/demo');
    await page.getByRole('button', { name: 'Save provider' }).click();
    const saved = page.locator('#provider-result');
    await expect
      .poll(() => saved.textContent())
      .toMatch(/Provider inspect\/demo: client \S+ \(dynamic/);
    // The registration answer, its secrets masked and never on the page.
    await saved.getByText('Registration answer (secrets masked)').click();
    const registration = JSON.parse((await saved.locator('pre').textContent()) ?? '{}');
    expect(registration.client_secret).toBe('(masked)');
    expect(registration.redirect_uris).toHaveLength(1);
    expect(registration.client_id).toBe(
      (await callApi(keyway.url, ROOT_KEY, 'GET', '/api/admin/providers/inspect/demo')).body
        .credentials.client_id,
    );

    await page.getByLabel('Connection id').fill('acme/users/alice/demo');
    await consent(page, async () => {
      await page.getByRole('button', { name: 'Authorize' }).click();
    });
    const connection = panel(page, 'acme/users/alice/demo');
    await expect
      .poll(() => connection.textContent(), { timeout: 15_000 })
      .toContain('Statusactive');
    // The token is handed out (an audited read) only when asked, masked.
    expect(await connection.textContent()).not.toContain('Access token');
    await connection.getByRole('button', { name: 'Show the token (masked)' }).click();
    await expect.poll(() => connection.textContent()).toMatch(/Access token\S{4}…\S{4}/);
    expect(await connection.textContent()).toContain(
      'Refresh tokenheld: the token is refreshed when due',
    );
    expect(page.url()).toBe(`${base}/inspector`);

    // The token response, its tokens withheld.
    await connection.getByText('Token response (tokens withheld)').click();
    const answer = JSON.parse(
      (await connection.locator('details[open] pre').textContent()) ?? '{}',
    );
    expect(answer).toMatchObject({
      grant_type: 'authorization_code',
      refresh_token: 'present',
      token_type: 'bearer',
    });
    expect(answer.fields).toContain('access_token');
    expect(JSON.stringify(answer)).not.toMatch(/"access_token":/);

    // The gateway URL, copied.
    const copy = connection.getByRole('button', { name: /MCP gateway URL$/ });
    expect(await copy.textContent()).toBe('Copy MCP gateway URL');
    await copy.click();
    await expect.poll(() => copy.textContent()).toBe('Copied MCP gateway URL');
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(
      `${base}/mcp/acme/users/alice/demo`,
    );

    await connection.getByRole('button', { name: 'Probe' }).click();
    await expect
      .poll(() => connection.textContent(), { timeout: 15_000 })
      .toContain('echo — Echoes its text');
    expect(await connection.textContent()).toContain('Server inspector-mcp 3.1.4');

    // What the portal reads of it: an alias and a tool policy, saved with PATCH.
    const settings = page.getByRole('form', { name: 'Portal settings of acme/users/alice/demo' });
    expect(await settings.getByRole('button', { name: /^Copy Portal URL/ }).textContent()).toBe(
      'Copy Portal URL (every MCP connection of its parent path)',
    );
    await settings.getByLabel(/^Alias/).fill('demo-server');
    await settings.getByLabel(/^Deny these tools/).fill('admin delete_*');
    await settings.getByLabel(/^Read-only/).check();
    await settings.getByRole('button', { name: 'Save portal settings' }).click();
    await expect
      .poll(() => page.locator('#status').textContent())
      .toBe('Connection acme/users/alice/demo is active.');
    const updated = await callApi(
      keyway.url,
      ROOT_KEY,
      'GET',
      '/api/oauth/connections/acme/users/alice/demo',
    );
    expect([updated.body.alias, updated.body.tools]).toEqual([
      'demo-server',
      { deny: ['admin', 'delete_*'], read_only: true },
    ]);
    // An alias the API refuses is said next to the form, naming the field.
    await settings.getByLabel(/^Alias/).fill('has__two');
    await settings.getByRole('button', { name: 'Save portal settings' }).click();
    await expect.poll(() => settings.locator('.error').first().textContent()).toContain('alias');
    // The browser logs the refused request: that one, and only that one, is expected.
    const refusal =
      'Failed to load resource: the server responded with a status of 400 (Bad Request)';
    expect(errors).toEqual([refusal]);
    errors.length = 0;
    await settings.getByLabel(/^Alias/).fill('');
    await settings.getByLabel(/^Deny these tools/).fill('');
    await settings.getByLabel(/^Read-only/).uncheck();
    await settings.getByRole('button', { name: 'Save portal settings' }).click();
    await expect
      .poll(async () => {
        const read = await callApi(
          keyway.url,
          ROOT_KEY,
          'GET',
          '/api/oauth/connections/acme/users/alice/demo',
        );
        return [read.body.alias, read.body.tools];
      })
      .toEqual([null, null]);
    expect(await accessibilityFindings(page)).toEqual([]);

    await connection.getByRole('button', { name: 'Refresh now' }).click();
    await expect
      .poll(() => connection.locator('.note').textContent())
      .toMatch(/^Token refreshed; it now expires /);
    // Still open from before, it now describes the refresh.
    await expect
      .poll(() => connection.locator('details[open] pre').textContent())
      .toContain('"grant_type": "refresh_token"');
    expect(await accessibilityFindings(page)).toEqual([]);
    // The discovery's documents folded again, as a reader first sees them.
    for (const step of ['resource_metadata', 'authorization_server_metadata'])
      await discovered.getByText(`The document (${step})`).click();
    await shot(page, 'inspector-connect-1440.png');

    // Reconnect starts a new consent for the same connection.
    await consent(page, async () => {
      await connection.getByRole('button', { name: 'Reconnect' }).click();
    });
    await expect
      .poll(() => page.locator('#status').textContent(), { timeout: 15_000 })
      .toBe('Connection acme/users/alice/demo is active.');
    expect([...hosts].sort()).toEqual(['127.0.0.1']);
    expect(errors).toEqual([]);
  }, 120_000);

  for (const width of [1440, 375]) {
    it(`shows every view at ${width} px: connections, providers, tokens, audit, webhooks`, async () => {
      const { page, hosts, errors } = await open(width, width === 375 ? 'dark' : 'light');
      await signIn(page, ROOT_KEY);
      const suffix = `${width}${width === 375 ? '-dark' : ''}`;

      await go(page, 'Connections');
      const row = page.getByRole('row').filter({ hasText: 'acme/users/alice/demo' });
      await expect.poll(() => row.textContent()).toContain('active');
      await page.getByRole('button', { name: 'Open acme/users/alice/demo' }).click();
      await expect
        .poll(() => panel(page, 'acme/users/alice/demo').textContent())
        .toContain('Grantauthorization_code');
      expect(await accessibilityFindings(page)).toEqual([]);
      expect(await fits(page)).toBe(true);
      await shot(page, `inspector-connections-${suffix}.png`);
      await page.getByLabel('Status').selectOption('error');
      await page.getByRole('button', { name: 'List', exact: true }).click();
      await expect.poll(() => page.locator('caption').textContent()).toBe('0 connections');

      await go(page, 'Providers');
      if (width === 1440) {
        // A value that would be markup, were it parsed as HTML, is shown as text.
        const hostile = '<img src=x onerror="window.__pwned=1">';
        const put = await callApi(
          keyway.url,
          ROOT_KEY,
          'PUT',
          '/api/admin/providers/inspect/hostile',
          {
            template: 'mcp',
            label: hostile,
            configuration: { resource_url: servers.resourceUrl },
          },
        );
        expect(put.status).toBe(201);
        await page.getByRole('button', { name: 'List', exact: true }).click();
        await page.getByRole('button', { name: 'Open inspect/hostile' }).click();
        await expect
          .poll(() =>
            page
              .getByRole('region', { name: 'Provider inspect/hostile' })
              .locator('h3')
              .textContent(),
          )
          .toBe(`${hostile} (inspect/hostile)`);
        expect(await page.locator('.panel img').count()).toBe(0);
        expect(
          await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned),
        ).toBeUndefined();
      }
      await page.getByRole('button', { name: 'Open inspect/demo' }).click();
      const provider = page.getByRole('region', { name: 'Provider inspect/demo' });
      await expect.poll(() => provider.textContent()).toContain('Registrationdynamic');
      await provider.getByText('Registration answer (secrets masked)').click();
      await expect
        .poll(() => provider.locator('details[open] pre').textContent())
        .toContain('"client_secret": "(masked)"');
      await expect
        .poll(() => provider.getByRole('button', { name: 'Re-register' }).isVisible())
        .toBe(true);
      expect(await accessibilityFindings(page)).toEqual([]);
      expect(await fits(page)).toBe(true);
      await shot(page, `inspector-providers-${suffix}.png`);

      await go(page, 'Tokens');
      const name = `ci${width}`;
      await page.getByLabel('Name').fill(name);
      await page
        .getByLabel('Scopes (space-separated resource paths)')
        .fill('acme/users acme/teams');
      await page.getByRole('button', { name: 'Mint' }).click();
      await expect.poll(() => page.locator('.minted code').textContent()).toMatch(/^kw1_/);
      const minted = (await page.locator('.minted code').textContent()) ?? '';
      // The token works, and only as minted.
      const self = await callApi(keyway.url, minted, 'GET', `/api/admin/tokens/${name}`);
      expect(self.body).toMatchObject({ name, scopes: ['acme/teams/**', 'acme/users/**'] });
      await page.getByRole('button', { name: `Narrow ${name}` }).click();
      await page.getByLabel(`New scopes of ${name}`).fill('acme/users');
      await page.getByRole('button', { name: 'Save' }).click();
      await expect
        .poll(() => page.getByRole('row').filter({ hasText: name }).textContent())
        .toContain('acme/users/**');
      await expect
        .poll(() => page.getByRole('row').filter({ hasText: name }).textContent())
        .not.toContain('acme/teams');
      expect(await accessibilityFindings(page)).toEqual([]);
      expect(await fits(page)).toBe(true);
      await shot(page, `inspector-tokens-${suffix}.png`);
      await page.getByRole('button', { name: `Revoke ${name}` }).click();
      await page.getByRole('button', { name: `Confirm: revoke the tree of ${name}` }).click();
      await expect.poll(() => page.getByRole('row').filter({ hasText: name }).count()).toBe(0);
      expect((await callApi(keyway.url, minted, 'GET', `/api/admin/tokens/${name}`)).status).toBe(
        401,
      );

      await go(page, 'Audit');
      const first = page.getByRole('row').nth(1);
      // Newest first: the revocation just made.
      await expect.poll(() => first.textContent()).toContain('token.deleted');
      await page.getByLabel('Type').selectOption('connection.authorized');
      await page.getByRole('button', { name: 'Filter' }).click();
      await expect
        .poll(() => page.getByRole('row').nth(1).textContent())
        .toContain('connection.authorized');
      const types = await page.locator('tbody tr td:nth-child(2)').allTextContents();
      expect(new Set(types)).toEqual(new Set(['connection.authorized']));
      expect(await accessibilityFindings(page)).toEqual([]);
      expect(await fits(page)).toBe(true);
      await shot(page, `inspector-audit-${suffix}.png`);

      await go(page, 'Webhooks');
      await page.getByLabel('Deliveries').selectOption('pending');
      // The failing endpoint's answers show, as the outbox retries.
      await expect
        .poll(
          async () => {
            await page.getByRole('button', { name: 'List', exact: true }).click();
            return page.locator('tbody').textContent();
          },
          { timeout: 20_000 },
        )
        .toContain('HTTP 500');
      await expect
        .poll(() => page.locator('tbody tr').first().textContent())
        .toContain('connection.authorized');
      expect(await accessibilityFindings(page)).toEqual([]);
      expect(await fits(page)).toBe(true);
      await shot(page, `inspector-webhooks-${suffix}.png`);
      expect([...hosts].sort()).toEqual(['127.0.0.1']);
      expect(errors).toEqual([]);
    }, 90_000);
  }

  it('shows a broker token only what its scopes allow, and keeps a long client id within 375 px', async () => {
    const minted = await callApi(keyway.url, ROOT_KEY, 'POST', '/api/admin/tokens', {
      name: 'team',
      scopes: ['acme', 'inspect'],
    });
    const { page, errors } = await open(375);
    await signIn(page, minted.body.access_token);
    expect(await page.locator('.who').textContent()).toContain(
      'Token team · scopes acme/** inspect/**',
    );
    const links = await page
      .getByRole('navigation', { name: 'Views' })
      .getByRole('link')
      .allTextContents();
    // Deliveries are the root key's: no Webhooks view.
    expect(links).toEqual([
      'Connect',
      'Connections',
      'Providers',
      'Tokens',
      'Connect sessions',
      'Audit',
    ]);
    await go(page, 'Tokens');
    await expect
      .poll(() => page.locator('form .hint').first().textContent())
      .toContain('As team you mint only names below yours (team.…)');
    await expect.poll(() => page.getByLabel('Name').inputValue()).toBe('team.');

    await go(page, 'Connect');
    const longId = `client-${'x'.repeat(180)}`;
    await page.getByLabel('MCP server URL').fill(servers.resourceUrl);
    await page.getByLabel('Provider id').fill('inspect/custom');
    await page.getByLabel('Client', { exact: true }).selectOption('custom');
    await page.getByLabel('Client id').fill(longId);
    await page.getByLabel('Client secret (write-only)').fill('custom-secret-0123456789');
    await page.getByRole('button', { name: 'Save provider' }).click();
    await expect
      .poll(() => page.locator('#provider-result').textContent())
      .toContain(`client ${longId} (manual`);
    // The secret field is emptied as it is sent.
    expect(await page.getByLabel('Client secret (write-only)').inputValue()).toBe('');
    expect(await fits(page)).toBe(true);
    expect(await accessibilityFindings(page)).toEqual([]);
    await shot(page, 'inspector-scoped-375.png');
    expect(errors).toEqual([]);
  }, 60_000);

  it('offers the credential modes and the catalog profiles, each sent as the API takes it', async () => {
    const { page, errors } = await open(1440);
    await signIn(page, ROOT_KEY);
    await page.getByLabel('Provider id').fill('inspect/ms');
    await page.getByLabel('Kind').selectOption('oauth2');
    // Classic APIs only: the mcp profiles describe MCP servers, not oauth2 providers.
    const offered = await page
      .getByLabel('Profile')
      .locator('option')
      .evaluateAll((options) => options.map((option) => (option as HTMLOptionElement).value));
    expect([offered.includes('github'), offered.includes('hubspot-mcp')]).toEqual([true, false]);
    await page.getByLabel('Profile').selectOption('microsoft');
    await page.getByLabel('Parameter tenant').fill('contoso.onmicrosoft.com');
    await page.getByLabel('Scopes (space-separated)').fill('User.Read');
    await page.getByLabel('Client id').fill('ms-client');
    await page.getByLabel('Client secret (write-only)').fill('ms-secret-0123456789');
    await page.getByRole('button', { name: 'Save provider' }).click();
    await expect
      .poll(() => page.locator('#provider-result').textContent())
      .toContain('Provider inspect/ms: client ms-client (manual, client_secret_post).');
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

    // The extension modes show their own fields; enterprise asks for the IdP and, at
    // authorize, the user's ID token.
    await page.getByLabel('Kind').selectOption('mcp');
    const mode = page.getByLabel('Client', { exact: true });
    const options = await mode
      .locator('option')
      .evaluateAll((all) => all.map((o) => (o as HTMLOptionElement).value));
    expect(options).toEqual([
      'register',
      'custom',
      'client_credentials',
      'jwt_bearer',
      'enterprise',
    ]);
    await mode.selectOption('client_credentials');
    await expect
      .poll(() =>
        page.getByLabel('Or a private key, PKCS #8 PEM (write-only; private_key_jwt)').isVisible(),
      )
      .toBe(true);
    await expect.poll(() => page.getByLabel('Signing algorithm').inputValue()).toBe('ES256');
    await mode.selectOption('jwt_bearer');
    await expect
      .poll(() => page.getByLabel('Assertion source (configured by the operator)').isVisible())
      .toBe(true);
    await page.getByLabel('MCP server URL').fill(servers.resourceUrl);
    await page.getByLabel('Provider id').fill('inspect/wif');
    await page.getByLabel('Client id').fill('workload');
    await page.getByLabel('Assertion source (configured by the operator)').fill('nowhere');
    await page.getByRole('button', { name: 'Save provider' }).click();
    // This broker has no such source: the field is named.
    await expect
      .poll(() => page.locator('#provider-result').textContent())
      .toContain('invalid_request');
    await expect
      .poll(() => page.locator('#provider-result code').textContent())
      .toBe('credentials.assertion_source');
    // DPoP, for a server that requires it without listing it: sent as `dpop: true`.
    await mode.selectOption('register');
    await page.getByLabel('Provider id').fill('inspect/dpop');
    await page.getByLabel(/^DPoP: tokens bound to a key/).check();
    await page.getByRole('button', { name: 'Save provider' }).click();
    await expect
      .poll(() => page.locator('#provider-result').textContent())
      .toContain('Provider inspect/dpop: client');
    const bound = await callApi(keyway.url, ROOT_KEY, 'GET', '/api/admin/providers/inspect/dpop');
    expect(bound.body).toMatchObject({ dpop: true, hand_out: false });
    await mode.selectOption('enterprise');
    await expect.poll(() => page.getByLabel('IdP token endpoint').isVisible()).toBe(true);
    expect(await accessibilityFindings(page)).toEqual([]);
    expect(errors.filter((error) => !/40[0-9]/.test(error))).toEqual([]);
  }, 60_000);

  it('mends the old faults: a refused key cleared by a good one, the cause of a failed discovery, a refresh that changed nothing', async () => {
    const { page, errors } = await open(375);
    await page.getByLabel('Root key or broker token').fill('kw1_wrong');
    await page.getByRole('button', { name: 'Use it' }).click();
    await expect
      .poll(() => page.locator('#credential-result').textContent())
      .toBe('The credential was refused: check the root key or broker token.');
    await signIn(page, ROOT_KEY);
    await expect.poll(() => page.locator('#credential-result').count()).toBe(0);

    // Nothing listens there: the trace says so, not just "the request failed".
    const closed = await freePort();
    await page.getByLabel('MCP server URL').fill(`http://127.0.0.1:${closed}/mcp`);
    await page.getByRole('button', { name: 'Discover' }).click();
    await expect
      .poll(() => page.locator('#discover-result .error').textContent())
      .toContain('the request failed: the connection was refused (ECONNREFUSED)');
    expect(await fits(page)).toBe(true);
    await shot(page, 'inspector-failure-375.png');

    // A refresh the authorization server does not answer keeps the valid token: said so.
    const gone = await startAuthorizedMcp('short-lived');
    await page.getByLabel('MCP server URL').fill(gone.resourceUrl);
    await page.getByLabel('Provider id').fill('inspect/gone');
    await page.getByRole('button', { name: 'Save provider' }).click();
    await expect
      .poll(() => page.locator('#provider-result').textContent())
      .toContain('Provider inspect/gone');
    await page.getByLabel('Connection id').fill('acme/users/bob/gone');
    await consent(page, async () => {
      await page.getByRole('button', { name: 'Authorize' }).click();
    });
    const connection = panel(page, 'acme/users/bob/gone');
    await expect
      .poll(() => connection.textContent(), { timeout: 15_000 })
      .toContain('Statusactive');
    await gone.close();
    await connection.getByRole('button', { name: 'Refresh now' }).click();
    await expect
      .poll(() => connection.locator('.note').textContent())
      .toBe(
        'Nothing changed: the refresh did not complete, and the current token stays in use (the Audit view has the failure).',
      );
    expect(errors.filter((error) => !error.includes('401'))).toEqual([]);
  }, 90_000);

  it('works from the keyboard alone, follows the audit cursor, and registers a client again', async () => {
    for (let n = 0; n < 30; n++) {
      const minted = await callApi(keyway.url, ROOT_KEY, 'POST', '/api/admin/tokens', {
        name: `bulk.t${n}`,
        scopes: ['acme/bulk'],
      });
      expect(minted.status).toBe(201);
    }
    const { page, errors } = await open(1440);
    // Sign in and move between views with Tab and Enter only.
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('credential');
    await page.keyboard.type(ROOT_KEY);
    await page.keyboard.press('Enter');
    await expect.poll(() => page.locator('#status').textContent()).toContain('Credential accepted');
    // The focus moves to the first view's link once the form is gone.
    await expect
      .poll(() => page.evaluate(() => document.activeElement?.textContent))
      .toBe('Connect');
    let reached = '';
    for (let step = 0; step < 12 && reached !== 'Audit'; step++) {
      await page.keyboard.press('Tab');
      reached = await page.evaluate(() => document.activeElement?.textContent ?? '');
    }
    expect(reached).toBe('Audit');
    await page.keyboard.press('Enter');
    await expect
      .poll(() => page.getByRole('heading', { level: 2, name: 'Audit', exact: true }).isVisible())
      .toBe(true);

    // The 30 newest token.created events: a page of 25, then the older ones by the cursor.
    await page.getByLabel('Type').selectOption('token.created');
    await page.getByRole('button', { name: 'Filter' }).click();
    await expect.poll(() => page.locator('tbody tr').count()).toBe(25);
    const resources = () => page.locator('tbody tr td:nth-child(4)').allTextContents();
    expect((await resources())[0]).toBe('bulk.t29');
    await page.getByRole('button', { name: 'Older' }).click();
    await expect.poll(async () => (await resources()).length).toBeGreaterThan(25);
    expect((await resources()).slice(0, 30)).toEqual(
      Array.from({ length: 30 }, (_, n) => `bulk.t${29 - n}`),
    );

    // Re-register: a new client, and the provider's connections wait for a new consent.
    const before = await callApi(keyway.url, ROOT_KEY, 'GET', '/api/admin/providers/inspect/demo');
    await go(page, 'Providers');
    await page.getByRole('button', { name: 'Open inspect/demo' }).click();
    const provider = page.getByRole('region', { name: 'Provider inspect/demo' });
    await provider.getByRole('button', { name: 'Re-register' }).click();
    await provider.getByRole('button', { name: 'Confirm: register a new client' }).click();
    await expect
      .poll(() => provider.locator('.note').textContent())
      .toMatch(/^Registered again: client /);
    const after = await callApi(keyway.url, ROOT_KEY, 'GET', '/api/admin/providers/inspect/demo');
    expect(after.body.credentials.client_id).not.toBe(before.body.credentials.client_id);
    expect(await provider.locator('.note').textContent()).toBe(
      `Registered again: client ${after.body.credentials.client_id}. Its connections need a new consent.`,
    );
    await go(page, 'Connections');
    await expect
      .poll(() => page.getByRole('row').filter({ hasText: 'acme/users/alice/demo' }).textContent())
      .toContain('error');
    expect(errors).toEqual([]);
  }, 90_000);
});
