import { createTestWorld, type TestWorldOptions } from '@keyway/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { connectThroughConsent, Harness, putProvider, storageFactories } from './harness.js';

// What real authorization servers send (docs/api.md §6 item 10), each behaviour a
// switch of @keyway/testing.

const BASE = 'https://keyway.example.test';

/** Every request that left the broker, with its form body and Authorization header. */
interface Seen {
  url: string;
  authorization: string | null;
  form: URLSearchParams;
}

describe.each(storageFactories)('what real servers send ($name storage)', (factory) => {
  let h: Harness;
  let seen: Seen[];

  async function setup(options: TestWorldOptions) {
    const world = createTestWorld({ now: () => h.now, ...options });
    seen = [];
    const fetch = async (input: string | URL | Request, init: RequestInit = {}) => {
      seen.push({
        url: String(input),
        authorization: new Headers(init.headers).get('authorization'),
        form:
          init.body instanceof URLSearchParams
            ? init.body
            : new URLSearchParams(typeof init.body === 'string' ? init.body : ''),
      });
      return world.fetch(input, init);
    };
    h = new Harness(await factory.create(), { fetch, baseUrl: BASE, providerManagement: true });
    return world;
  }

  afterEach(async () => {
    expect(h.errors).toEqual([]);
    await h.broker.close();
  });

  async function connectAndRefresh(world: ReturnType<typeof createTestWorld>) {
    const created = await putProvider(h, world);
    expect(created.status).toBe(201);
    const back = await connectThroughConsent(h, world, 'acme/alice/linear');
    expect(back.status).toBe(200);
    expect(back.text).toContain('The connection acme/alice/linear is active');
    const refreshed = await h.call(
      'GET',
      '/api/oauth/credentials/acme/alice/linear?force_refresh=true',
    );
    expect(refreshed.status).toBe(200);
    expect(world.isValidAccessToken(refreshed.body.access_token)).toBe(true);
    expect(world.stats.refreshes).toBe(1);
    return created;
  }

  it('accepts a registration answered with 200 instead of 201', async () => {
    const world = await setup({ registrationStatus: 200 });
    const created = await connectAndRefresh(world);
    expect(created.body.credentials.registration).toBe('dynamic');
    expect(created.body.credentials.client_secret_set).toBe(true);
  });

  it('takes a client_secret without client_secret_expires_at as a secret that never expires', async () => {
    const world = await setup({ omitSecretExpiry: true });
    const created = await connectAndRefresh(world);
    expect(created.body.credentials.client_secret_set).toBe(true);
    expect(created.body.credentials.client_secret_expires_at).toBeNull();
    h.now += 400 * 24 * 3600 * 1000;
    const later = await h.call(
      'GET',
      '/api/oauth/credentials/acme/alice/linear?force_refresh=true',
    );
    expect(later.status).toBe(200);
  });

  it.each([
    ['pre-registered-client', 'plain-secret_1.0~*'],
    ['id:with:colons', 'se:cr:et'],
    ['id%41%', 'sec%2Fret%'],
    ['id with space', 'secret with space+plus'],
    ['cliënt-ü', 'sécret-ß'],
  ])(
    'authenticates client %j with client_secret_basic, form-encoded before Basic',
    async (clientId, secret) => {
      const world = await setup({
        issuedClient: { client_id: clientId, client_secret: secret },
        tokenEndpointAuthMethods: ['client_secret_basic'],
      });
      await connectAndRefresh(world);
      const basic = seen.filter((request) => request.authorization?.startsWith('Basic '));
      expect(basic).toHaveLength(2);
      const encode = (value: string) => new URLSearchParams([['', value]]).toString().slice(1);
      for (const request of basic) {
        expect(request.authorization).toBe(
          `Basic ${btoa(`${encode(clientId)}:${encode(secret)}`)}`,
        );
      }
    },
  );

  it('sends an id of letters, digits and -._* unencoded, so a server that compares raw ids accepts it', async () => {
    const world = await setup({
      issuedClient: { client_id: 'pre-registered-client', client_secret: 'raw.secret_01*' },
      tokenEndpointAuthMethods: ['client_secret_basic'],
      basicCredentials: 'raw',
    });
    await connectAndRefresh(world);
    const basic = seen.find((request) => request.authorization?.startsWith('Basic '));
    expect(atob((basic?.authorization ?? '').slice(6))).toBe(
      'pre-registered-client:raw.secret_01*',
    );
  });

  it('sends resource exactly as the metadata publishes it, a pathless one without a trailing /', async () => {
    const world = await setup({ metadataResource: 'https://mcp.example.test' });
    await putProvider(h, world);
    const started = await h.call('POST', '/api/oauth/authorize/linear', {
      body: { connection_id: 'acme/alice/linear' },
    });
    expect(new URL(started.body.authorization_url).searchParams.get('resource')).toBe(
      'https://mcp.example.test',
    );
    const back = new URL(world.consent(started.body.authorization_url));
    const landed = await h.call('GET', `${back.pathname}${back.search}`, { token: null });
    expect(landed.text).toContain('The connection acme/alice/linear is active');
    const refreshed = await h.call(
      'GET',
      '/api/oauth/credentials/acme/alice/linear?force_refresh=true',
    );
    expect(refreshed.status).toBe(200);
    const tokenRequests = seen.filter((request) => request.form.has('grant_type'));
    expect(tokenRequests.map((request) => request.form.get('grant_type'))).toEqual([
      'authorization_code',
      'refresh_token',
    ]);
    for (const request of tokenRequests) {
      expect(request.form.getAll('resource')).toEqual(['https://mcp.example.test']);
    }
  });

  it('repeats resource on refresh, for a server that refuses a refresh without it', async () => {
    const world = await setup({ resourceOnRefresh: 'required' });
    await connectAndRefresh(world);
    const refresh = seen.find((request) => request.form.get('grant_type') === 'refresh_token');
    expect(refresh?.form.getAll('resource')).toEqual(['https://mcp.example.test/mcp']);
  });

  it('re-registers after the server forgot the client: invalid_client at refresh', async () => {
    const world = await setup({});
    await connectAndRefresh(world);
    const before = [...world.clients.keys()];
    world.forgetRegisteredClients();
    const refused = await h.call(
      'GET',
      '/api/oauth/credentials/acme/alice/linear?force_refresh=true',
    );
    expect(refused.status).toBe(409);
    expect(refused.body.error).toBe('reauthorization_required');
    const view = await h.call('GET', '/api/oauth/connections/acme/alice/linear');
    expect(view.body.status).toBe('error');
    expect(view.body.error.code).toBe('reauthorization_required');
    // The next authorization registers a new client first, and works.
    const started = await h.call('POST', '/api/oauth/authorize/linear', {
      body: { connection_id: 'acme/alice/linear' },
    });
    expect(world.stats.registrations).toBe(2);
    const clientId = new URL(started.body.authorization_url).searchParams.get('client_id');
    expect(before).not.toContain(clientId);
    expect(world.clients.has(clientId as string)).toBe(true);
    const back = new URL(world.consent(started.body.authorization_url));
    await h.call('GET', `${back.pathname}${back.search}`, { token: null });
    expect((await h.call('GET', '/api/oauth/connections/acme/alice/linear')).body.status).toBe(
      'active',
    );
    expect((await h.call('GET', '/api/admin/providers/linear')).body.credentials.client_id).toBe(
      clientId,
    );
  });

  it('re-registers after the server forgot the client: invalid_client at the code exchange', async () => {
    const world = await setup({});
    await putProvider(h, world);
    const started = await h.call('POST', '/api/oauth/authorize/linear', {
      body: { connection_id: 'acme/alice/linear' },
    });
    const back = new URL(world.consent(started.body.authorization_url));
    world.forgetRegisteredClients();
    const page = await h.call('GET', `${back.pathname}${back.search}`, { token: null });
    expect(page.text).toContain('Not connected');
    const view = await h.call('GET', '/api/oauth/connections/acme/alice/linear');
    expect(view.body.error.code).toBe('reauthorization_required');
    await connectThroughConsent(h, world, 'acme/alice/linear');
    expect(world.stats.registrations).toBe(2);
    expect((await h.call('GET', '/api/oauth/connections/acme/alice/linear')).body.status).toBe(
      'active',
    );
  });

  it('leaves a custom client alone when the server answers invalid_client', async () => {
    const world = await setup({});
    const client = world.preregister({
      client_id: 'operator-client',
      client_secret: 'operator-secret',
      redirect_uris: [`${BASE}/api/oauth/callback`],
    });
    await putProvider(h, world, 'linear', {
      mode: 'custom',
      client_id: client.client_id,
      client_secret: 'operator-secret',
    });
    await connectThroughConsent(h, world, 'acme/alice/linear');
    world.clients.delete('operator-client');
    const refused = await h.call(
      'GET',
      '/api/oauth/credentials/acme/alice/linear?force_refresh=true',
    );
    // Still valid: a transient answer keeps the current token; nothing is re-registered.
    expect(refused.status).toBe(200);
    await h.call('POST', '/api/oauth/authorize/linear', {
      body: { connection_id: 'acme/alice/linear' },
    });
    expect(world.stats.registrations).toBe(0);
  });

  it('never sends a refresh token twice, across two instances, to a server that revokes the family on reuse', async () => {
    const world = await setup({ refreshTokenReuse: 'revoke-family', accessTokenLifetime: 120 });
    await putProvider(h, world);
    await connectThroughConsent(h, world, 'acme/alice/linear');
    const second = new Harness(h.storage, {
      fetch: world.fetch,
      baseUrl: BASE,
      providerManagement: true,
    });
    try {
      for (let round = 1; round <= 5; round++) {
        // Past the token's expiry: no caller has a valid token to be served meanwhile, so
        // every one waits for the one refresh.
        h.now += 121_000;
        second.now = h.now;
        const answers = await Promise.all(
          [h, second, h, second, h, second].map((instance) =>
            instance.call('GET', '/api/oauth/credentials/acme/alice/linear'),
          ),
        );
        expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200, 200, 200, 200]);
        expect(new Set(answers.map((answer) => answer.body.access_token)).size).toBe(1);
        expect(world.isValidAccessToken(answers[0]?.body.access_token)).toBe(true);
        expect(world.stats.refreshes).toBe(round);
      }
      expect(world.stats.refreshTokenReuses).toBe(0);
      const presented = seen
        .filter((request) => request.form.get('grant_type') === 'refresh_token')
        .map((request) => request.form.get('refresh_token'));
      expect(new Set(presented).size).toBe(presented.length);
    } finally {
      // Not closed: closing a broker closes its storage, which the first one owns.
      expect(second.errors).toEqual([]);
    }
  });

  it.each(['metadata', 'defaults'] as const)(
    'connects to a 2025-03-26 server (%s): authorization at its origin, resource as configured',
    async (legacy) => {
      const world = await setup({ legacy });
      const created = await connectAndRefresh(world);
      expect(created.body.resource).toEqual({
        resource: 'https://mcp.example.test/mcp',
        resource_metadata_url: null,
        scopes_supported: null,
      });
      expect(created.body.authorization_server.issuer).toBe('https://mcp.example.test');
      const code = seen.find((request) => request.form.get('grant_type') === 'authorization_code');
      expect(code?.url).toBe(
        legacy === 'defaults'
          ? 'https://mcp.example.test/token'
          : 'https://mcp.example.test/oauth/token',
      );
      expect(code?.form.get('resource')).toBe('https://mcp.example.test/mcp');
    },
  );

  it('asks for the union on re-authorization without scopes (step-up), and exactly the given scopes with them', async () => {
    const world = await setup({ challengeScope: 'read', toolScope: 'write' });
    await putProvider(h, world);
    const scopeOf = async (body: Record<string, unknown>) => {
      const started = await h.call('POST', '/api/oauth/authorize/linear', {
        body: { connection_id: 'acme/alice/linear', ...body },
      });
      expect(started.status).toBe(201);
      return started.body.authorization_url as string;
    };
    const first = await scopeOf({ scopes: ['write'] });
    expect(new URL(first).searchParams.get('scope')).toBe('write');
    const back = new URL(world.consent(first));
    await h.call('GET', `${back.pathname}${back.search}`, { token: null });
    expect((await h.call('GET', '/api/oauth/connections/acme/alice/linear')).body.scopes).toEqual([
      'write',
    ]);
    // Without scopes: the provider's ("read", from the challenge) with the granted ones.
    expect(new URL(await scopeOf({})).searchParams.get('scope')).toBe('read write');
    // With scopes: exactly those.
    expect(new URL(await scopeOf({ scopes: ['other'] })).searchParams.get('scope')).toBe('other');
  });

  it.each([
    ['case', 'https://AUTH.example.test'],
    ['a default port', 'https://auth.example.test:443'],
    ['a trailing /', 'https://auth.example.test/'],
    ['encoding', 'https://auth.example.test/%2E'],
    ['being empty', ''],
  ])('refuses an iss that differs from the issuer by %s, before using the code', async (_, iss) => {
    const world = await setup({});
    await putProvider(h, world);
    const started = await h.call('POST', '/api/oauth/authorize/linear', {
      body: { connection_id: 'acme/alice/linear' },
    });
    const back = new URL(world.consent(started.body.authorization_url));
    back.searchParams.set('iss', iss);
    const page = await h.call('GET', `${back.pathname}${back.search}`, { token: null });
    expect(page.text).toContain('Not connected');
    const view = await h.call('GET', '/api/oauth/connections/acme/alice/linear');
    expect(view.body.status).toBe('error');
    expect(view.body.error).toEqual({
      code: 'invalid_response',
      description: `the authorization response's "iss" ${JSON.stringify(iss)} is not the issuer "https://auth.example.test" exactly (RFC 9207): refused`,
    });
    expect(world.stats.codeExchanges).toBe(0);
  });

  it('compares iss also when the server does not advertise it', async () => {
    const world = await setup({ issParameter: false });
    await putProvider(h, world);
    const started = await h.call('POST', '/api/oauth/authorize/linear', {
      body: { connection_id: 'acme/alice/linear' },
    });
    const back = new URL(world.consent(started.body.authorization_url));
    back.searchParams.set('iss', 'https://evil.example.test');
    await h.call('GET', `${back.pathname}${back.search}`, { token: null });
    expect((await h.call('GET', '/api/oauth/connections/acme/alice/linear')).body.error.code).toBe(
      'invalid_response',
    );
    expect(world.stats.codeExchanges).toBe(0);
  });

  describe('a resource that moves to another authorization server (SEP-2352)', () => {
    function twoServers() {
      const a = createTestWorld({ now: () => h.now, issuer: 'https://auth-a.example.test' });
      const b = createTestWorld({ now: () => h.now, issuer: 'https://auth-b.example.test' });
      const route = { current: a };
      seen = [];
      const fetch = async (input: string | URL | Request, init: RequestInit = {}) => {
        const url = new URL(input instanceof Request ? input.url : String(input));
        seen.push({
          url: url.href,
          authorization: new Headers(init.headers).get('authorization'),
          form: new URLSearchParams(
            typeof init.body === 'string' ? init.body : String(init.body ?? ''),
          ),
        });
        const world =
          url.host === 'auth-a.example.test'
            ? a
            : url.host === 'auth-b.example.test'
              ? b
              : route.current;
        return world.fetch(input, init);
      };
      return { a, b, route, fetch };
    }

    it('registers at the new server before the consent URL, and never sends it the old client', async () => {
      const { a, b, route, fetch } = twoServers();
      h = new Harness(await factory.create(), { fetch, baseUrl: BASE, providerManagement: true });
      expect((await putProvider(h, a)).status).toBe(201);
      await connectThroughConsent(h, a, 'acme/alice/linear');
      const oldClient = [...a.clients.keys()][0] as string;
      route.current = b;
      const started = await h.call('POST', '/api/oauth/authorize/linear', {
        body: { connection_id: 'acme/alice/linear' },
      });
      expect(started.status).toBe(201);
      const consent = new URL(started.body.authorization_url);
      expect(consent.origin + consent.pathname).toBe('https://auth-b.example.test/oauth/authorize');
      expect(b.stats.registrations).toBe(1);
      expect(consent.searchParams.get('client_id')).toBe([...b.clients.keys()][0]);
      // The connection's tokens are the old server's: it must be authorized again.
      const view = await h.call('GET', '/api/oauth/connections/acme/alice/linear');
      expect(view.body.status).toBe('error');
      expect(view.body.error.code).toBe('reauthorization_required');
      const provider = await h.call('GET', '/api/admin/providers/linear');
      expect(provider.body.authorization_server.issuer).toBe('https://auth-b.example.test');
      expect(provider.body.last_party_change).toMatchObject({
        previous_issuer: 'https://auth-a.example.test',
        previous_client_id: oldClient,
        connections_reauthorization_required: 1,
      });
      const back = new URL(b.consent(started.body.authorization_url));
      await h.call('GET', `${back.pathname}${back.search}`, { token: null });
      const refreshed = await h.call(
        'GET',
        '/api/oauth/credentials/acme/alice/linear?force_refresh=true',
      );
      expect(refreshed.status).toBe(200);
      expect(b.isValidAccessToken(refreshed.body.access_token)).toBe(true);
      const atB = seen.filter((request) => request.url.startsWith('https://auth-b.example.test'));
      expect(atB.length).toBeGreaterThan(0);
      for (const request of atB) {
        expect(request.form.get('client_id')).not.toBe(oldClient);
        const basic = request.authorization?.startsWith('Basic ')
          ? atob(request.authorization.slice(6)).split(':')[0]
          : null;
        expect(basic).not.toBe(oldClient);
      }
      // Back at the first server: its own registration is used again, none is made.
      route.current = a;
      const again = await h.call('POST', '/api/oauth/authorize/linear', {
        body: { connection_id: 'acme/alice/linear' },
      });
      expect(new URL(again.body.authorization_url).searchParams.get('client_id')).toBe(oldClient);
      expect(a.stats.registrations).toBe(1);
    });

    it('answers 409 for a custom client whose resource moved, sending nothing to the new server', async () => {
      const { a, b, route, fetch } = twoServers();
      h = new Harness(await factory.create(), { fetch, baseUrl: BASE, providerManagement: true });
      a.preregister({
        client_id: 'operator-client',
        redirect_uris: [`${BASE}/api/oauth/callback`],
      });
      await putProvider(h, a, 'linear', { mode: 'custom', client_id: 'operator-client' });
      route.current = b;
      const refused = await h.call('POST', '/api/oauth/authorize/linear', {
        body: { connection_id: 'acme/alice/linear' },
      });
      expect(refused.status).toBe(409);
      expect(refused.body.error).toBe('conflict');
      expect(refused.body.error_description).toContain('https://auth-b.example.test');
      expect(b.stats.registrations).toBe(0);
      expect(b.stats.authorizations).toBe(0);
    });

    it('stops when the metadata no longer names the resource, before any consent URL', async () => {
      const world = await setup({});
      await putProvider(h, world);
      world.set({ metadataResource: 'https://evil.example.test/mcp' });
      const refused = await h.call('POST', '/api/oauth/authorize/linear', {
        body: { connection_id: 'acme/alice/linear' },
      });
      expect(refused.status).toBe(502);
      expect(refused.body.error).toBe('discovery_failed');
      expect(await h.storage.getConnection('acme/alice/linear')).toBeNull();
    });

    it('keeps the stored server when the metadata is only unreachable', async () => {
      const world = await setup({});
      await putProvider(h, world);
      world.set({ failures: { resource_metadata: 'server_error' } });
      const started = await h.call('POST', '/api/oauth/authorize/linear', {
        body: { connection_id: 'acme/alice/linear' },
      });
      expect(started.status).toBe(201);
      expect(new URL(started.body.authorization_url).host).toBe('auth.example.test');
    });
  });
});
