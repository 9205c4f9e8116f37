import { createTestWorld, type TestWorldOptions } from '@keyway/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { connectThroughConsent, Harness, putProvider, storageFactories } from './harness.js';

// What real authorization servers send (issue 9, API.md §6 item 10), each behaviour a
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
});
