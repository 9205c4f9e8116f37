import type { KeywayEvent } from '@keyway/core';
import { memoryStorage } from '@keyway/store-memory';
import { createTestWorld, type TestWorld, type TestWorldOptions } from '@keyway/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { Harness, ROOT_KEY, START, storageFactories } from './harness.js';

// What real authorization servers do, each behaviour reproduced by a switch of the
// test kit (the same behaviours against the real servers are in packages/cli/test/peers-*).

const BASE = 'https://keyway.example.test';
const CONNECTION = 'acme/users/alice/linear';
const iso = (ms: number) => new Date(ms).toISOString();

describe.each(storageFactories)('servers in the wild ($name storage)', (factory) => {
  let h: Harness;
  let world: TestWorld;
  const events: KeywayEvent[] = [];

  async function setup(
    options: TestWorldOptions = {},
    provider: Record<string, unknown> = {},
    extra: Record<string, unknown> = {},
  ) {
    world = createTestWorld({ now: () => h.now, ...options });
    h = new Harness(await factory.create(), {
      fetch: world.fetch,
      baseUrl: BASE,
      providerManagement: true,
      onEvent: (event) => {
        events.push(event);
      },
      ...extra,
    });
    const created = await h.call('PUT', '/api/admin/providers/linear', {
      body: { template: 'mcp', configuration: { resource_url: world.resourceUrl, ...provider } },
    });
    return created;
  }

  async function authorize(body: Record<string, unknown> = {}) {
    const started = await h.call('POST', '/api/oauth/authorize/linear', {
      body: { connection_id: CONNECTION, ...body },
    });
    expect(started.status).toBe(201);
    return new URL(started.body.authorization_url);
  }

  async function connect() {
    const url = await authorize();
    const back = new URL(world.consent(url.href));
    const reply = await h.call('GET', `${back.pathname}${back.search}`, { token: null });
    expect(reply.status).toBe(200);
    return { url, reply };
  }

  const view = async () => (await h.call('GET', `/api/oauth/connections/${CONNECTION}`)).body;

  const storedTokens = () => h.storedTokens(CONNECTION);

  afterEach(async () => {
    expect(h.errors).toEqual([]);
    events.splice(0);
    await h.broker.close();
  });

  describe('1. refresh tokens from OpenID providers', () => {
    const openIdProvider: TestWorldOptions = {
      authorizationServerMetadata: 'openid-inserted',
      serverScopesSupported: ['openid', 'offline_access', 'read'],
      offlineAccessNeedsConsentPrompt: true,
    };

    it('asks an OpenID provider for prompt=consent with offline_access, and keeps the refresh token it then gives', async () => {
      await setup(openIdProvider);
      const { url } = await connect();
      expect(url.searchParams.get('scope')).toBe('offline_access');
      expect(url.searchParams.get('prompt')).toBe('consent');
      expect((await view()).refreshable).toBe(true);
      const before = await storedTokens();
      const refreshed = await h.call(
        'GET',
        `/api/oauth/credentials/${CONNECTION}?force_refresh=true`,
      );
      expect(refreshed.status).toBe(200);
      expect(refreshed.body.access_token).not.toBe(before.access_token);
      expect(world.stats.refreshes).toBe(1);
    });

    it('lets authorization_params set prompt itself; that provider then gives no refresh token, and the view says so', async () => {
      await setup(openIdProvider, { authorization_params: { prompt: 'login' } });
      const { url } = await connect();
      expect(url.searchParams.getAll('prompt')).toEqual(['login']);
      const shown = await view();
      expect(shown.refreshable).toBe(false);
      expect(shown.error).toBeNull();
      expect(events.find((event) => event.type === 'connection.authorized')?.data).toMatchObject({
        refreshable: false,
      });
    });

    it('sends no prompt to an OAuth server that is not an OpenID provider', async () => {
      await setup({ serverScopesSupported: ['offline_access', 'read'] });
      const { url } = await connect();
      expect(url.searchParams.get('scope')).toBe('offline_access');
      expect(url.searchParams.has('prompt')).toBe(false);
    });

    it('adds authorization_params to the consent URL and token_params to the code exchange and every refresh', async () => {
      const created = await setup(
        {},
        {
          authorization_params: { audience: 'https://api.example.test', access_type: 'offline' },
          token_params: { audience: 'https://api.example.test' },
        },
      );
      expect(created.body.configuration).toEqual({
        resource_url: world.resourceUrl,
        scopes: [],
        authorization_params: { audience: 'https://api.example.test', access_type: 'offline' },
        token_params: { audience: 'https://api.example.test' },
      });
      const { url } = await connect();
      expect(url.searchParams.get('audience')).toBe('https://api.example.test');
      expect(url.searchParams.get('access_type')).toBe('offline');
      await h.call('GET', `/api/oauth/credentials/${CONNECTION}?force_refresh=true`);
      expect(world.tokenRequests.map((request) => [request.grant_type, request.audience])).toEqual([
        ['authorization_code', 'https://api.example.test'],
        ['refresh_token', 'https://api.example.test'],
      ]);
    });

    it.each([
      ['authorization_params', 'client_id'],
      ['authorization_params', 'redirect_uri'],
      ['authorization_params', 'state'],
      ['authorization_params', 'scope'],
      ['authorization_params', 'resource'],
      ['authorization_params', 'response_type'],
      ['authorization_params', 'code_challenge'],
      ['authorization_params', 'code_challenge_method'],
      ['authorization_params', 'Client_ID'],
      ['token_params', 'grant_type'],
      ['token_params', 'code'],
      ['token_params', 'code_verifier'],
      ['token_params', 'refresh_token'],
      ['token_params', 'client_secret'],
      ['token_params', 'client_assertion'],
      ['token_params', 'client_assertion_type'],
      ['token_params', 'RESOURCE'],
    ])('refuses %s that set %s, naming it, and stores nothing', async (field, name) => {
      world = createTestWorld({ now: () => h.now });
      h = new Harness(await factory.create(), {
        fetch: world.fetch,
        baseUrl: BASE,
        providerManagement: true,
      });
      const reply = await h.call('PUT', '/api/admin/providers/linear', {
        body: {
          template: 'mcp',
          configuration: { resource_url: world.resourceUrl, [field]: { [name]: 'x' } },
        },
      });
      const message = `"configuration.${field}" cannot set ${JSON.stringify(name)}: Keyway sends that parameter itself`;
      expect(reply.status).toBe(400);
      expect(reply.body).toEqual({
        error: 'invalid_request',
        error_description: message,
        details: [{ path: `configuration.${field}.${name}`, message }],
      });
      expect(world.requests).toEqual([]);
      expect((await h.call('GET', '/api/admin/providers/linear')).status).toBe(404);
    });
  });

  describe('2. saying when a connection cannot refresh', () => {
    it('shows refreshable, answers force_refresh with 409 refresh_unavailable, and says a new consent is needed once the token expired', async () => {
      await setup({ issueRefreshTokens: false, accessTokenLifetime: 600 });
      await connect();
      const before = await storedTokens();
      expect(await view()).toMatchObject({
        status: 'active',
        refreshable: false,
        grant: 'authorization_code',
        error: null,
      });
      const forced = await h.call('GET', `/api/oauth/credentials/${CONNECTION}?force_refresh=true`);
      expect(forced.status).toBe(409);
      expect(forced.body).toEqual({
        error: 'refresh_unavailable',
        error_description: `connection "${CONNECTION}" holds no refresh token (the authorization server gave none), so it cannot be refreshed: authorize it again for a new token`,
      });
      expect(world.stats.refreshes).toBe(0);
      expect((await storedTokens()).access_token).toBe(before.access_token);
      // The token still works until it expires.
      expect((await h.call('GET', `/api/oauth/credentials/${CONNECTION}`)).status).toBe(200);
      h.now += 600_000;
      expect((await view()).error).toEqual({
        code: 'token_expired',
        description: `the access token expired at ${iso(START + 600_000)} and the authorization server gave no refresh token: a new consent is needed (authorize again)`,
      });
      const expired = await h.call('GET', `/api/oauth/credentials/${CONNECTION}`);
      expect(expired.status).toBe(409);
      expect(expired.body.error).toBe('reauthorization_required');
      expect((await view()).status).toBe('error');
    });

    it('shows refreshable: true for a connection with a refresh token, and false while pending', async () => {
      await setup();
      await authorize();
      expect((await view()).refreshable).toBe(false);
      const back = new URL(world.consent((await authorize()).href));
      await h.call('GET', `${back.pathname}${back.search}`, { token: null });
      expect((await view()).refreshable).toBe(true);
    });
  });

  describe('3. PKCE that a server does but does not advertise', () => {
    it('refuses such a server by default, and with pkce "assume_s256" sends S256 and says so', async () => {
      const refused = await setup({ codeChallengeMethods: null });
      expect(refused.status).toBe(422);
      expect(refused.body.error).toBe('unsupported_authorization_server');
      const assumed = await h.call('PUT', '/api/admin/providers/linear', {
        body: {
          template: 'mcp',
          configuration: { resource_url: world.resourceUrl, pkce: 'assume_s256' },
        },
      });
      expect(assumed.status).toBe(201);
      expect(assumed.body.configuration.pkce).toBe('assume_s256');
      const trace = await h.call('POST', '/api/admin/discover', {
        body: { resource_url: world.resourceUrl, pkce: 'assume_s256' },
      });
      expect(trace.body.ok).toBe(true);
      expect(trace.body.steps).toContainEqual({
        step: 'requirements',
        url: null,
        status: null,
        ok: true,
        note: 'warning: "code_challenge_methods_supported" is absent; PKCE S256 is assumed because the provider sets pkce "assume_s256"',
      });
      const { url } = await connect();
      expect(url.searchParams.get('code_challenge_method')).toBe('S256');
      expect((await view()).status).toBe('active');
    });
  });

  describe('4. revocation outcomes are recorded', () => {
    const deleted = () =>
      events.find((event) => event.type === 'connection.deleted')?.data as Record<string, unknown>;

    it('records each token the server revoked', async () => {
      await setup();
      await connect();
      expect((await h.call('DELETE', `/api/oauth/connections/${CONNECTION}`)).status).toBe(204);
      expect(deleted()).toEqual({
        revocation: {
          attempted: true,
          results: [
            { token: 'refresh_token', status: 200, error: null },
            { token: 'access_token', status: 200, error: null },
          ],
        },
      });
    });

    it('records unsupported_token_type for an access token, and a server error', async () => {
      await setup({ revocationRefusesAccessTokens: true });
      await connect();
      await h.call('DELETE', `/api/oauth/connections/${CONNECTION}`);
      expect(deleted()).toEqual({
        revocation: {
          attempted: true,
          results: [
            { token: 'refresh_token', status: 200, error: null },
            { token: 'access_token', status: 400, error: 'unsupported_token_type' },
          ],
        },
      });
      events.splice(0);
      world.set({ failures: { revocation: 'server_error' } });
      await connect();
      await h.call('DELETE', `/api/oauth/connections/${CONNECTION}`);
      expect(deleted()).toEqual({
        revocation: {
          attempted: true,
          results: [
            { token: 'refresh_token', status: 500, error: 'server_error' },
            { token: 'access_token', status: 500, error: 'server_error' },
          ],
        },
      });
    });

    it('records that nothing was attempted without a revocation endpoint, and never a token', async () => {
      await setup({ serverMetadataOverrides: { revocation_endpoint: undefined } });
      await connect();
      const tokens = await storedTokens();
      await h.call('DELETE', `/api/oauth/connections/${CONNECTION}`);
      expect(deleted()).toEqual({
        revocation: { attempted: false, reason: 'no_revocation_endpoint' },
      });
      expect(JSON.stringify(events)).not.toContain(tokens.access_token);
    });
  });

  describe('6. a client the server forgot', () => {
    it('re-registers on request when the server showed its own error page, and the connections need a new consent', async () => {
      await setup();
      await connect();
      const first = (await h.call('GET', '/api/admin/providers/linear')).body.credentials.client_id;
      world.forgetRegisteredClients();
      // The user sees the server's error page and never comes back to Keyway.
      const url = await authorize();
      expect(() => world.consent(url.href)).toThrow('unknown client_id');
      const registered = await h.call('POST', '/api/admin/providers/linear/register');
      expect(registered.status).toBe(200);
      expect(registered.body.credentials.client_id).not.toBe(first);
      expect(world.clients.has(registered.body.credentials.client_id)).toBe(true);
      expect(registered.body.last_party_change).toMatchObject({
        previous_client_id: first,
        connections_reauthorization_required: 1,
      });
      expect((await view()).error.code).toBe('reauthorization_required');
      await connect();
      expect(await view()).toMatchObject({ status: 'active', error: null });
    });

    it('marks the registration stale when the server redirects with error=invalid_client, and registers anew on the next authorization', async () => {
      await setup({ unknownClientAtConsent: 'redirect' });
      world.forgetRegisteredClients();
      const url = await authorize();
      const back = new URL(world.consent(url.href));
      expect(back.searchParams.get('error')).toBe('invalid_client');
      await h.call('GET', `${back.pathname}${back.search}`, { token: null });
      expect((await view()).error).toEqual({
        code: 'reauthorization_required',
        description:
          'the authorization server no longer knows the registered client (invalid_client): authorize again, a new client is registered first',
      });
      expect(world.stats.registrations).toBe(1);
      await connect();
      expect(world.stats.registrations).toBe(2);
      expect((await view()).status).toBe('active');
    });

    it('refuses to re-register a custom client (409), and an unknown provider (404)', async () => {
      world = createTestWorld({ now: () => h.now });
      h = new Harness(await factory.create(), {
        fetch: world.fetch,
        baseUrl: BASE,
        providerManagement: true,
      });
      await h.call('PUT', '/api/admin/providers/linear', {
        body: {
          template: 'mcp',
          configuration: { resource_url: world.resourceUrl },
          credentials: { mode: 'custom', client_id: 'operator-client' },
        },
      });
      const custom = await h.call('POST', '/api/admin/providers/linear/register');
      expect(custom.status).toBe(409);
      expect(custom.body.error).toBe('conflict');
      expect((await h.call('POST', '/api/admin/providers/nope/register')).status).toBe(404);
      // A POST to a provider itself is a known path with the wrong method.
      const post = await h.call('POST', '/api/admin/providers/linear');
      expect(post.status).toBe(405);
      expect(post.headers.get('allow')).toBe('GET, PUT, DELETE');
    });
  });

  describe('7. token responses as real servers write them', () => {
    it.each([
      ['no token_type', { tokenType: null }],
      ['token_type "bearer"', { tokenType: 'bearer' }],
      ['token_type "BEARER"', { tokenType: 'BEARER' }],
    ])('takes an answer with %s as a Bearer token', async (_what, tokenResponse) => {
      await setup({ tokenResponse });
      await connect();
      const credentials = await h.call('GET', `/api/oauth/credentials/${CONNECTION}`);
      expect(credentials.status).toBe(200);
      expect(credentials.body.token_type).toBe('Bearer');
      expect(world.isValidAccessToken(credentials.body.access_token)).toBe(true);
    });

    it.each([
      ['a string', 'string', iso(START + 3_600_000)],
      ['absent', 'absent', null],
      ['0', 'zero', null],
    ] as const)('reads expires_in given as %s', async (_what, expiresIn, expected) => {
      await setup({ tokenResponse: { expiresIn } });
      await connect();
      expect((await view()).token_expires_at).toBe(expected);
    });

    it.each([
      ['absent (granted = requested)', 'absent', ['read', 'write']],
      ['comma-separated', 'comma', ['read', 'write']],
      ['padded with spaces', 'padded', ['read', 'write']],
    ] as const)('reads scope %s', async (_what, scope, expected) => {
      await setup({ tokenResponse: { scope }, challengeScope: 'read write' });
      await connect();
      expect((await view()).scopes).toEqual(expected);
      expect((await h.call('GET', `/api/oauth/credentials/${CONNECTION}`)).body.scopes).toEqual(
        expected,
      );
    });

    it('keeps the refresh token when a refresh answer has none', async () => {
      await setup({ rotateRefreshTokens: false });
      await connect();
      const before = await storedTokens();
      await h.call('GET', `/api/oauth/credentials/${CONNECTION}?force_refresh=true`);
      const after = await storedTokens();
      expect(after.access_token).not.toBe(before.access_token);
      expect(after.refresh_token).toBe(before.refresh_token);
      expect((await view()).refreshable).toBe(true);
    });

    it('reads an error answered with status 200 as the error it is', async () => {
      await setup({ tokenResponse: { errorsWithStatus200: true } });
      await connect();
      world.revokeRefreshTokens();
      const refused = await h.call(
        'GET',
        `/api/oauth/credentials/${CONNECTION}?force_refresh=true`,
      );
      expect(refused.status).toBe(409);
      expect(refused.body.error).toBe('reauthorization_required');
      expect((await view()).error.code).toBe('invalid_grant');
    });

    it('keeps an id_token out of every answer and out of storage', async () => {
      await setup({ tokenResponse: { idToken: true } });
      const { reply } = await connect();
      expect(reply.text).toContain('Connected');
      const idToken = world.secrets().find((secret) => secret.endsWith('.'));
      expect(idToken).toMatch(/^ey/);
      const credentials = await h.call('GET', `/api/oauth/credentials/${CONNECTION}`);
      expect(JSON.stringify(credentials.body)).not.toContain(idToken);
      expect(JSON.stringify(await storedTokens())).not.toContain(idToken);
      expect(JSON.stringify(events)).not.toContain(idToken);
    });
  });

  describe('8. a rotation that another instance already stored', () => {
    it('answers invalid_grant for a replaced refresh token with the tokens in storage, not an error', async () => {
      await setup({ refreshTokenReuse: 'reject' });
      await connect();
      const stale = await storedTokens();
      let replaced = false;
      // The refresh of this instance reaches the server after another instance refreshed
      // with the same refresh token (past an expired lease) and stored the rotation.
      (h.extra as { fetch: unknown }).fetch = async (input: string, init: RequestInit) => {
        if (!replaced && String(init?.body ?? '').includes('grant_type=refresh_token')) {
          replaced = true;
          const other = await world.fetch(input, { ...init });
          const rotated = (await other.json()) as { access_token: string; refresh_token: string };
          const record = await h.storage.getConnection(CONNECTION);
          if (record === null) throw new Error('no connection');
          const sealed = await h.broker.vault.seal(
            { kind: 'connection_tokens', key: CONNECTION },
            JSON.stringify({
              ...stale,
              access_token: rotated.access_token,
              refresh_token: rotated.refresh_token,
            }),
          );
          await h.storage.compareAndSetConnection(
            { ...record, version: record.version + 1 },
            record.version,
            { put: [sealed] },
          );
        }
        return world.fetch(input, init);
      };
      h.rebuild(ROOT_KEY);
      const answer = await h.call('GET', `/api/oauth/credentials/${CONNECTION}?force_refresh=true`);
      expect(answer.status).toBe(200);
      const stored = await storedTokens();
      expect(answer.body.access_token).toBe(stored.access_token);
      expect(stored.refresh_token).not.toBe(stale.refresh_token);
      expect(world.stats.refreshTokenReuses).toBe(1);
      expect((await view()).status).toBe('active');
    });
  });

  describe('9. connection health: idle refresh', () => {
    it('refreshes refreshable connections nothing refreshed for refreshIdleAfter, once, and reports the outcome', async () => {
      await setup({ accessTokenLifetime: 3600 }, {}, { refreshIdleAfter: '7d' });
      await connect();
      const result = await h.broker.connections.refreshIdle();
      expect(result).toEqual({ due: 0, refreshed: 0, failed: 0 });
      h.now += 7 * 86_400_000;
      expect(await h.broker.connections.refreshIdle()).toEqual({
        due: 1,
        refreshed: 1,
        failed: 0,
      });
      expect(world.stats.refreshes).toBe(1);
      expect((await view()).last_refreshed_at).toBe(iso(h.now));
      expect(events.filter((event) => event.type === 'connection.refreshed')).toHaveLength(1);
      expect(await h.broker.connections.refreshIdle()).toEqual({
        due: 0,
        refreshed: 0,
        failed: 0,
      });
      h.now += 7 * 86_400_000;
      world.revokeRefreshTokens();
      expect(await h.broker.connections.refreshIdle()).toEqual({
        due: 1,
        refreshed: 0,
        failed: 1,
      });
      expect(events.at(-1)).toMatchObject({
        type: 'connection.reauthorization_required',
        resource: CONNECTION,
        data: { error: 'invalid_grant' },
      });
    });

    it('leaves connections without a refresh token alone, and does nothing when off', async () => {
      await setup({ issueRefreshTokens: false }, {}, { refreshIdleAfter: 60_000 });
      await connect();
      h.now += 3 * 60_000;
      expect(await h.broker.connections.refreshIdle()).toEqual({
        due: 0,
        refreshed: 0,
        failed: 0,
      });
      expect(world.stats.refreshes).toBe(0);
    });

    it('runs in the background when refreshIdleAfter is set', async () => {
      await setup({}, {}, { refreshIdleAfter: 1000 });
      await connect();
      h.now += 2000;
      // The server counts the refresh before the broker has written its answer: waited for
      // the connection to show it, then the server asked exactly once.
      await expect
        .poll(async () => (await view()).last_refreshed_at, { timeout: 10_000 })
        .toBe(new Date(h.now).toISOString());
      expect(world.stats.refreshes).toBe(1);
    });

    it('refuses a refreshIdleAfter that is not a duration of at least a second', async () => {
      world = createTestWorld();
      for (const [value, message] of [
        [
          'soon',
          'invalid broker configuration: "refreshIdleAfter": "soon" is not a duration: write a whole number and a unit (ms, s, m, h, d), like 90s, 12h or 7d',
        ],
        [
          500,
          'invalid broker configuration: "refreshIdleAfter" must be false, milliseconds (at least 1000) or a duration such as "7d"',
        ],
      ] as const) {
        expect(() => new Harness(memoryStorage(), { refreshIdleAfter: value })).toThrow(message);
      }
      h = new Harness(await factory.create(), { fetch: world.fetch });
    });
  });
});
