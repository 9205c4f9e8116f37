import { type BrokerConfig, rootPrincipal } from '@keyway/core';
import { createTestWorld, type TestWorld, type TestWorldOptions } from '@keyway/testing';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  captureConsole,
  Harness,
  type Reply,
  ROOT_KEY,
  START,
  serverCallback,
  storageFactories,
  storedClientSecret,
} from './harness.js';

const BASE = 'https://keyway.example.test';
const CALLBACK = `${BASE}/api/oauth/callback`;
const iso = (ms: number) => new Date(ms).toISOString();

describe.each(storageFactories)('provider endpoints ($name storage)', (factory) => {
  let h: Harness;
  let world: TestWorld;
  const replies: Reply[] = [];
  const logged: string[] = [];

  beforeEach(() => {
    captureConsole(logged);
  });

  async function setup(worldOptions: TestWorldOptions = {}, extra: Partial<BrokerConfig> = {}) {
    world = createTestWorld({ now: () => h?.now ?? START, ...worldOptions });
    h = new Harness(await factory.create(), {
      fetch: world.fetch,
      baseUrl: BASE,
      providerManagement: true,
      ...extra,
    });
    const call = h.call.bind(h);
    h.call = async (...args) => {
      const reply = await call(...args);
      replies.push(reply);
      return reply;
    };
  }

  const put = (id: string, body: unknown) => h.call('PUT', `/api/admin/providers/${id}`, { body });
  const mcp = (credentials?: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
    template: 'mcp',
    configuration: { resource_url: world.resourceUrl, scopes: [] },
    ...(credentials ? { credentials } : {}),
    ...extra,
  });

  afterEach(async () => {
    expect(h.errors).toEqual([]);
    // No response ever carried a client secret or a registration access token.
    const secrets = [...world.clients.values()].flatMap((c) => [
      c.client_secret,
      c.registration_access_token,
    ]);
    const seen = [
      ...replies.splice(0).map((reply) => `${[...reply.headers].join('\n')}\n${reply.text}`),
      ...logged.splice(0),
    ];
    vi.restoreAllMocks();
    for (const text of seen) {
      for (const secret of secrets) if (secret) expect(text).not.toContain(secret);
      expect(text).not.toContain('custom-secret-value');
    }
    const raw = await factory.rawText(h.storage);
    if (raw !== null) {
      for (const secret of secrets) if (secret) expect(raw).not.toContain(secret);
      expect(raw).not.toContain('custom-secret-value');
    }
    await h.broker.close();
  });

  describe('mode register', () => {
    it('discovers, registers dynamically, stores, and answers 201 with the view', async () => {
      await setup();
      const reply = await put('linear', mcp(undefined, { label: 'Linear' }));
      expect(reply.status).toBe(201);
      const [client] = [...world.clients.values()];
      expect(client).toMatchObject({
        redirect_uris: [serverCallback(BASE, world.issuer)],
        grant_types: ['authorization_code', 'refresh_token'],
        application_type: 'web',
        token_endpoint_auth_method: 'client_secret_basic',
        via: 'dynamic',
      });
      expect(reply.body).toEqual({
        id: 'linear',
        template: 'mcp',
        profile: null,
        label: 'Linear',
        hand_out: true,
        dpop: false,
        configuration: { resource_url: 'https://mcp.example.test/mcp', scopes: [] },
        credentials: {
          mode: 'register',
          client_id: client?.client_id,
          registration: 'dynamic',
          token_endpoint_auth_method: 'client_secret_basic',
          client_secret_set: true,
          client_secret_expires_at: null,
          // The server's answer, its secrets masked (the inspector's debugger).
          registration_response: {
            application_type: 'web',
            client_id: client?.client_id,
            client_id_issued_at: Math.floor(START / 1000),
            client_secret: '(masked)',
            client_secret_expires_at: 0,
            grant_types: ['authorization_code', 'refresh_token'],
            redirect_uris: [serverCallback(BASE, world.issuer)],
            registration_access_token: '(masked)',
            registration_client_uri: `${world.issuer}/oauth/register/${client?.client_id}`,
            token_endpoint_auth_method: 'client_secret_basic',
          },
          redirect_uri: serverCallback(BASE, world.issuer),
        },
        resource: {
          resource: 'https://mcp.example.test/mcp',
          resource_metadata_url: 'https://mcp.example.test/keyway-test/resource-metadata/mcp',
          scopes_supported: null,
        },
        api_base_url: null,
        authorization_server: {
          issuer: 'https://auth.example.test',
          authorization_endpoint: 'https://auth.example.test/oauth/authorize',
          token_endpoint: 'https://auth.example.test/oauth/token',
          registration_endpoint: 'https://auth.example.test/oauth/register',
          revocation_endpoint: 'https://auth.example.test/oauth/revoke',
          scopes_supported: null,
        },
        last_party_change: null,
        created_at: iso(START),
        updated_at: iso(START),
      });
      expect((await h.call('GET', '/api/admin/providers/linear')).body).toEqual(reply.body);
      const secret = await storedClientSecret(h.broker, 'linear', 'https://auth.example.test');
      expect(secret).toBe(client?.client_secret);
    });

    it('reuses the registration on a PUT with the same resource URL and mode (200)', async () => {
      await setup();
      const first = await put('linear', mcp());
      h.now += 1000;
      const second = await put('linear', mcp(undefined, { label: 'Renamed' }));
      expect(second.status).toBe(200);
      expect(second.body.label).toBe('Renamed');
      expect(second.body.credentials.client_id).toBe(first.body.credentials.client_id);
      expect(second.body.created_at).toBe(iso(START));
      expect(second.body.updated_at).toBe(iso(START + 1000));
      expect(world.stats.registrations).toBe(1);
    });

    it('registers again once the client secret has expired', async () => {
      await setup({ clientSecretLifetime: 60 });
      const first = await put('linear', mcp());
      expect(first.body.credentials.client_secret_expires_at).toBe(
        iso(Math.floor(START / 1000) * 1000 + 60_000),
      );
      h.now += 61_000;
      const second = await put('linear', mcp());
      expect(world.stats.registrations).toBe(2);
      expect(second.body.credentials.client_id).not.toBe(first.body.credentials.client_id);
    });

    it('registers again when the resource moves to another authorization server, keeping both', async () => {
      await setup();
      const first = await put('linear', mcp());
      const moved = createTestWorld({ issuer: 'https://auth2.example.test' });
      const original = world;
      let current = original;
      // The same resource URL, now protected by another authorization server.
      (h.extra as { fetch: unknown }).fetch = (input: string, init: RequestInit) =>
        current.fetch(input, init);
      h.rebuild(ROOT_KEY);
      current = moved;
      const second = await put('linear', mcp());
      expect(second.status).toBe(200);
      expect(second.body.authorization_server.issuer).toBe('https://auth2.example.test');
      expect(moved.stats.registrations).toBe(1);
      expect(second.body.credentials.client_id).toBe([...moved.clients.keys()][0]);
      current = original;
      const back = await put('linear', mcp());
      expect(back.body.credentials.client_id).toBe(first.body.credentials.client_id);
      expect(original.stats.registrations).toBe(1);
      expect(await storedClientSecret(h.broker, 'linear', 'https://auth.example.test')).toBe(
        original.clients.get(first.body.credentials.client_id)?.client_secret,
      );
    });

    it.each([
      [['client_secret_post', 'none'], 'client_secret_post', true],
      [['none'], 'none', false],
      [['private_key_jwt', 'client_secret_basic'], 'client_secret_basic', true],
    ])('asks for the strongest of %j and uses %s', async (methods, expected, secret) => {
      await setup({ tokenEndpointAuthMethods: methods });
      const reply = await put('linear', mcp());
      expect(reply.body.credentials.token_endpoint_auth_method).toBe(expected);
      expect(reply.body.credentials.client_secret_set).toBe(secret);
    });

    it('uses the client-ID metadata document when the server supports it, registering nothing', async () => {
      await setup({ clientIdMetadataDocuments: true });
      const reply = await put('linear', mcp());
      expect(reply.status).toBe(201);
      expect(reply.body.credentials).toEqual({
        mode: 'register',
        client_id: `${BASE}/api/oauth/client-metadata.json`,
        registration: 'metadata_document',
        token_endpoint_auth_method: 'none',
        client_secret_set: false,
        client_secret_expires_at: null,
        registration_response: null,
        redirect_uri: CALLBACK,
      });
      expect(world.stats.registrations).toBe(0);
      const document = await h.call('GET', '/api/oauth/client-metadata.json', { token: null });
      expect(document.status).toBe(200);
      expect(document.body).toEqual({
        client_id: `${BASE}/api/oauth/client-metadata.json`,
        client_name: 'Keyway',
        redirect_uris: [CALLBACK],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
        application_type: 'web',
      });
    });

    it('registers with the client metadata the operator sets, in place of the defaults', async () => {
      await setup();
      const metadata = {
        client_name: 'Acme Agents',
        logo_uri: 'https://acme.example/logo.png',
        contacts: ['ops@acme.example'],
        application_type: 'native',
        token_endpoint_auth_method: 'client_secret_post',
      };
      const reply = await put('linear', mcp({ client_metadata: metadata }));
      expect(reply.status).toBe(201);
      expect(reply.body.credentials).toMatchObject({
        registration: 'dynamic',
        token_endpoint_auth_method: 'client_secret_post',
        client_metadata: metadata,
      });
      const client = world.clients.get(reply.body.credentials.client_id);
      expect([client?.client_name, client?.application_type, client?.redirect_uris]).toEqual([
        'Acme Agents',
        'native',
        [reply.body.credentials.redirect_uri],
      ]);
      // Left out again: Keyway's defaults, so a new client.
      const plain = await put('linear', mcp());
      expect(plain.body.credentials.client_id).not.toBe(reply.body.credentials.client_id);
      expect('client_metadata' in plain.body.credentials).toBe(false);
      expect(world.clients.get(plain.body.credentials.client_id)?.client_name).toBe('Keyway');
      expect(world.stats.registrations).toBe(2);
    });

    it.each([
      [{ client_uri: 'http://acme.example' }, 'credentials.client_metadata.client_uri'],
      [{ application_type: 'service' }, 'credentials.client_metadata.application_type'],
      [{ redirect_uris: ['https://evil.example'] }, 'credentials.client_metadata'],
      [
        { token_endpoint_auth_method: 'private_key_jwt' },
        'credentials.client_metadata.token_endpoint_auth_method',
      ],
    ])('refuses client metadata %j, naming %s', async (metadata, path) => {
      await setup();
      const reply = await put('linear', mcp({ client_metadata: metadata }));
      expect([reply.status, reply.body.error, reply.body.details?.[0]?.path]).toEqual([
        400,
        'invalid_request',
        path,
      ]);
      expect(world.requests).toEqual([]);
    });

    it('refuses with registration_unsupported when neither registration nor documents are possible', async () => {
      await setup({ dynamicRegistration: false });
      const reply = await put('linear', mcp());
      expect(reply.status).toBe(400);
      expect(reply.body.error).toBe('registration_unsupported');
      expect((await h.call('GET', '/api/admin/providers/linear')).status).toBe(404);
    });

    it('registers dynamically when documents are offered but the deployment is not https', async () => {
      await setup({ clientIdMetadataDocuments: true }, { baseUrl: 'http://localhost:8787' });
      const reply = await put('linear', mcp());
      expect(reply.body.credentials.registration).toBe('dynamic');
      expect([...world.clients.values()][0]?.application_type).toBe('native');
    });

    it.each(['server_error', 'malformed_json'] as const)(
      'answers 502 registration_failed when registration fails with %s, storing nothing',
      async (failure) => {
        await setup({ failures: { registration: failure } });
        const reply = await put('linear', mcp());
        expect(reply.status).toBe(502);
        expect(reply.body.error).toBe('registration_failed');
        expect((await h.call('GET', '/api/admin/providers/linear')).status).toBe(404);
      },
    );
  });

  describe('discovery failures', () => {
    it('answers 502 discovery_failed with the trace, registering and storing nothing', async () => {
      await setup({ metadataResource: 'https://evil.example.test/mcp' });
      const reply = await put('linear', mcp());
      expect(reply.status).toBe(502);
      expect(reply.body.error).toBe('discovery_failed');
      expect(reply.body.details.map((s: any) => `${s.step}:${s.ok}`)).toEqual([
        'probe:true',
        'resource_metadata:true',
        'resource_match:false',
      ]);
      expect(world.stats.registrations).toBe(0);
      expect((await h.call('GET', '/api/admin/providers/linear')).status).toBe(404);
    });

    it('answers 422 unsupported_authorization_server without S256', async () => {
      await setup({ codeChallengeMethods: ['plain'] });
      const reply = await put('linear', mcp());
      expect(reply.status).toBe(422);
      expect(reply.body.error).toBe('unsupported_authorization_server');
    });

    it('leaves an existing provider untouched when a new PUT fails', async () => {
      await setup();
      const first = await put('linear', mcp());
      world.set({ failures: { authorization_server_metadata: 'server_error' } });
      expect((await put('linear', mcp(undefined, { label: 'changed' }))).status).toBe(502);
      expect((await h.call('GET', '/api/admin/providers/linear')).body).toEqual(first.body);
    });
  });

  describe('mode custom', () => {
    it('uses the supplied client, keeps an omitted secret while the client id is unchanged', async () => {
      await setup();
      const created = await put(
        'linear',
        mcp({ mode: 'custom', client_id: 'my-app', client_secret: 'custom-secret-value' }),
      );
      expect(created.status).toBe(201);
      expect(created.body.credentials).toEqual({
        mode: 'custom',
        client_id: 'my-app',
        registration: 'manual',
        token_endpoint_auth_method: 'client_secret_basic',
        client_secret_set: true,
        client_secret_expires_at: null,
        registration_response: null,
        redirect_uri: CALLBACK,
      });
      expect(world.stats.registrations).toBe(0);
      const kept = await put('linear', mcp({ mode: 'custom', client_id: 'my-app' }));
      expect(kept.body.credentials.client_secret_set).toBe(true);
      expect(await storedClientSecret(h.broker, 'linear', world.issuer)).toBe(
        'custom-secret-value',
      );
      const other = await put('linear', mcp({ mode: 'custom', client_id: 'public-app' }));
      expect(other.body.credentials).toMatchObject({
        client_secret_set: false,
        token_endpoint_auth_method: 'none',
      });
      expect(await storedClientSecret(h.broker, 'linear', world.issuer)).toBeNull();
    });

    it('uses the method the operator sets whatever the server lists, and needs a secret for it', async () => {
      await setup();
      const reply = await put(
        'linear',
        mcp({
          mode: 'custom',
          client_id: 'a',
          client_secret: 'custom-secret-value',
          token_endpoint_auth_method: 'client_secret_post',
        }),
      );
      expect(reply.status).toBe(201);
      expect(reply.body.credentials.token_endpoint_auth_method).toBe('client_secret_post');
      const kept = await put(
        'linear',
        mcp({ mode: 'custom', client_id: 'a', token_endpoint_auth_method: 'client_secret_post' }),
      );
      expect(kept.body.credentials).toMatchObject({
        token_endpoint_auth_method: 'client_secret_post',
        client_secret_set: true,
      });
      const publicClient = await put(
        'linear',
        mcp({ mode: 'custom', client_id: 'b', token_endpoint_auth_method: 'client_secret_post' }),
      );
      expect([publicClient.status, publicClient.body.details]).toEqual([
        400,
        [
          {
            path: 'credentials.token_endpoint_auth_method',
            message:
              'client_secret_post needs a "client_secret": a client without one authenticates with none',
          },
        ],
      ]);
    });

    it('authenticates with client_secret_post when the server does not list basic', async () => {
      await setup({ tokenEndpointAuthMethods: ['client_secret_post'] });
      const reply = await put(
        'linear',
        mcp({ mode: 'custom', client_id: 'a', client_secret: 'custom-secret-value' }),
      );
      expect(reply.body.credentials.token_endpoint_auth_method).toBe('client_secret_post');
    });
  });

  describe('from an mcp profile of the catalog', () => {
    it('takes its endpoint and what works there: custom credentials, client_secret_post (HubSpot)', async () => {
      await setup({
        resourceUrl: 'https://mcp.hubspot.com',
        clientSecretPostOnly: true,
        dynamicRegistration: false,
      });
      const bare = await put('hubspot', { template: 'mcp', profile: 'hubspot-mcp' });
      expect([bare.status, bare.body.details]).toEqual([
        400,
        [
          {
            path: 'credentials.client_id',
            message:
              'profile "hubspot-mcp": its server registers no clients itself; register an application with it ' +
              '(https://developers.hubspot.com/docs/apps/developer-platform/build-apps/integrate-with-the-remote-hubspot-mcp-server) ' +
              'at Keyway\'s callback and give its "client_id" and "client_secret"',
          },
        ],
      ]);
      expect(world.requests).toEqual([]);
      const created = await put('hubspot', {
        template: 'mcp',
        profile: 'hubspot-mcp',
        credentials: { client_id: 'hs-app', client_secret: 'custom-secret-value' },
      });
      expect(created.status).toBe(201);
      expect([
        created.body.profile,
        created.body.configuration.resource_url,
        created.body.credentials.mode,
        created.body.credentials.token_endpoint_auth_method,
      ]).toEqual(['hubspot-mcp', 'https://mcp.hubspot.com/', 'custom', 'client_secret_post']);
      // The secret kept: the profile's method too.
      const kept = await put('hubspot', {
        template: 'mcp',
        profile: 'hubspot-mcp',
        credentials: { client_id: 'hs-app' },
      });
      expect(kept.body.credentials).toMatchObject({
        client_secret_set: true,
        token_endpoint_auth_method: 'client_secret_post',
      });
      const unknown = await put('hubspot', { template: 'mcp', profile: 'hubspot' });
      expect([unknown.status, unknown.body.details?.[0]?.path]).toEqual([400, 'profile']);
    });

    it('adds its authorization parameters under the operator’s own (Google)', async () => {
      await setup({
        resourceUrl: 'https://bigquery.googleapis.com/mcp',
        dynamicRegistration: false,
      });
      const created = await put('bigquery', {
        template: 'mcp',
        profile: 'google-bigquery-mcp',
        configuration: { authorization_params: { prompt: 'select_account consent' } },
        credentials: { client_id: 'g-app', client_secret: 'custom-secret-value' },
      });
      expect(created.status).toBe(201);
      expect(created.body.configuration.authorization_params).toEqual({
        access_type: 'offline',
        prompt: 'select_account consent',
      });
      expect(created.body.credentials.token_endpoint_auth_method).toBe('client_secret_basic');
    });
  });

  describe('validation, scopes and the management switch', () => {
    it.each([
      [
        { template: 'other', configuration: { resource_url: 'https://mcp.example.test/mcp' } },
        'invalid_request',
      ],
      [
        { template: 'mcp', configuration: { resource_url: 'http://mcp.example.test/mcp' } },
        'invalid_request',
      ],
      [
        { template: 'mcp', configuration: { resource_url: 'https://mcp.example.test/mcp#x' } },
        'invalid_request',
      ],
      [
        { template: 'mcp', configuration: { resource_url: 'https://u:p@mcp.example.test/mcp' } },
        'invalid_request',
      ],
      [{ template: 'mcp', configuration: { resource_url: 'mcp' } }, 'invalid_request'],
      [
        {
          template: 'mcp',
          configuration: { resource_url: 'https://mcp.example.test/mcp' },
          credentials: { mode: 'custom' },
        },
        'invalid_request',
      ],
      [
        {
          template: 'mcp',
          configuration: { resource_url: 'https://mcp.example.test/mcp' },
          credentials: { client_id: 'x' },
        },
        'invalid_request',
      ],
      [{ template: 'mcp', configuration: {} }, 'invalid_request'],
    ])('refuses %j with %s', async (body, code) => {
      await setup();
      const reply = await put('linear', body);
      expect(reply.status).toBe(400);
      expect(reply.body.error).toBe(code);
      expect(world.requests).toEqual([]);
    });

    it('refuses an invalid provider id with invalid_path', async () => {
      await setup();
      expect((await put('a%2Fb', mcp())).body.error).toBe('invalid_path');
    });

    it('takes ids named like members of every object (constructor, __proto__) for ordinary ids', async () => {
      await setup();
      for (const id of ['constructor', 'toString', 'hasOwnProperty', '__proto__', 'valueOf']) {
        const created = await put(id, mcp());
        expect(created.status, id).toBe(201);
        expect(created.body.id).toBe(id);
        const read = await h.call('GET', `/api/admin/providers/${id}`);
        expect(read.status, id).toBe(200);
        expect(read.body.id).toBe(id);
        expect((await h.storage.getProvider(id))?.state.declared).toBe(false);
        expect((await h.call('DELETE', `/api/admin/providers/${id}`)).status, id).toBe(204);
        expect((await h.call('GET', `/api/admin/providers/${id}`)).status, id).toBe(404);
      }
    });

    it('enforces scopes: a token on acme/** manages acme/linear, not other/linear', async () => {
      await setup();
      const token = await h.mint('acme', ['acme']);
      expect(
        (await h.call('PUT', '/api/admin/providers/acme/linear', { token, body: mcp() })).status,
      ).toBe(201);
      const other = await h.call('PUT', '/api/admin/providers/other/linear', {
        token,
        body: mcp(),
      });
      expect(other.status).toBe(403);
      expect(other.body.error).toBe('insufficient_scope');
      await put('other/linear', mcp());
      expect((await h.call('GET', '/api/admin/providers/other/linear', { token })).status).toBe(
        403,
      );
      expect((await h.call('DELETE', '/api/admin/providers/other/linear', { token })).status).toBe(
        403,
      );
      const list = await h.call('GET', '/api/admin/providers', { token });
      expect(list.body.items.map((p: any) => p.id)).toEqual(['acme/linear']);
    });

    it('answers 403 provider_management_disabled on every provider endpoint when off', async () => {
      await setup({}, { providerManagement: false });
      for (const [method, path, body] of [
        ['PUT', '/api/admin/providers/linear', mcp()],
        ['GET', '/api/admin/providers/linear', undefined],
        ['GET', '/api/admin/providers', undefined],
        ['DELETE', '/api/admin/providers/linear', undefined],
        ['POST', '/api/admin/discover', { resource_url: 'https://mcp.example.test/mcp' }],
      ] as const) {
        const reply = await h.call(method, path, body === undefined ? {} : { body });
        expect(reply.status, `${method} ${path}`).toBe(403);
        expect(reply.body.error).toBe('provider_management_disabled');
      }
      expect(world.requests).toEqual([]);
    });

    it('resolves providers declared in code with management off', async () => {
      world = createTestWorld();
      h = new Harness(await factory.create(), {
        fetch: world.fetch,
        baseUrl: BASE,
        providers: {
          linear: {
            template: 'mcp',
            label: 'Linear',
            configuration: { resource_url: world.resourceUrl },
          },
        },
      });
      await h.broker.connections.authorize(rootPrincipal(), 'linear', { connection_id: 'c/1' });
      const stored = await h.storage.getProvider('linear');
      expect(stored?.state).toMatchObject({ label: 'Linear', declared: true });
      expect(stored?.state.registrations).toMatchObject({
        [world.issuer]: { registration: 'dynamic' },
      });
      await h.broker.connections.authorize(rootPrincipal(), 'linear', { connection_id: 'c/2' });
      expect(world.stats.registrations).toBe(1);
      await expect(
        h.broker.connections.authorize(rootPrincipal(), 'unknown', { connection_id: 'c/3' }),
      ).rejects.toMatchObject({ code: 'not_found' });
    });
  });

  describe('DELETE and discover', () => {
    it('deletes a provider and its secrets (204), refusing while a connection uses it (409)', async () => {
      await setup();
      await put('linear', mcp());
      await h.storage.insertConnection({
        id: 'acme/alice',
        providerId: 'linear',
        status: 'pending',
        state: {},
        version: 1,
        createdAt: START,
        updatedAt: START,
      });
      const busy = await h.call('DELETE', '/api/admin/providers/linear');
      expect(busy.status).toBe(409);
      expect(busy.body.error).toBe('conflict');
      await h.storage.deleteConnection('acme/alice');
      expect((await h.call('DELETE', '/api/admin/providers/linear')).status).toBe(204);
      expect((await h.call('GET', '/api/admin/providers/linear')).status).toBe(404);
      expect(await h.storage.getVaultEntry('client_secret', `linear ${world.issuer}`)).toBeNull();
      expect((await h.call('DELETE', '/api/admin/providers/linear')).status).toBe(404);
    });

    it('reports what will work, with the catalog profile of the endpoint, registering nothing unasked', async () => {
      await setup({ resourceUrl: 'https://mcp.hubspot.com', clientSecretPostOnly: true });
      const reply = await h.call('POST', '/api/admin/discover', {
        body: { resource_url: 'https://mcp.hubspot.com' },
      });
      expect(reply.status).toBe(200);
      const profile = reply.body.report.profile;
      expect(reply.body.report).toEqual({
        ok: true,
        recommended: 'register',
        register: {
          works: null,
          how: 'dynamic',
          note: `the server offers dynamic registration at ${world.issuer}/oauth/register (not tried)`,
        },
        custom: {
          works: true,
          how: 'by_hand',
          note:
            `register an application with the server at the redirect URI ${CALLBACK} and give its client id and ` +
            'secret (credentials.mode "custom"; it authenticates with client_secret_post)',
        },
        callback_url: CALLBACK,
        resource: 'https://mcp.hubspot.com/',
        profile: {
          id: 'hubspot-mcp',
          label: 'HubSpot (MCP)',
          docs_url:
            'https://developers.hubspot.com/docs/apps/developer-platform/build-apps/integrate-with-the-remote-hubspot-mcp-server',
          checked: '2026-11-28',
          credentials: 'custom',
          notes: profile.notes,
        },
        findings: [
          `Authorization server ${world.issuer}: PKCE S256 advertised.`,
          'Keyway sends resource=https://mcp.hubspot.com/ exactly as the server publishes it.',
          'Scopes requested: (none).',
          `Register: the server offers dynamic registration at ${world.issuer}/oauth/register (not tried).`,
          'Catalog profile "hubspot-mcp" (HubSpot (MCP); facts from ' +
            'https://developers.hubspot.com/docs/apps/developer-platform/build-apps/integrate-with-the-remote-hubspot-mcp-server, ' +
            'read 2026-11-28):',
          ...profile.notes.map((note: string) => `  ${note}`),
          'Use credentials.mode "register" (or "profile": "hubspot-mcp").',
        ],
      });
      expect(profile.notes).toHaveLength(3);
      expect(world.stats.registrations).toBe(0);
      // Tried: it works, and the test client is deleted again.
      const tried = await h.call('POST', '/api/admin/discover', {
        body: { resource_url: 'https://mcp.hubspot.com', try_registration: true },
      });
      expect([tried.body.report.recommended, tried.body.report.register.works]).toEqual([
        'register',
        true,
      ]);
      expect([world.stats.registrations, world.stats.unregistrations, world.clients.size]).toEqual([
        1, 1, 0,
      ]);
    });

    it('sends a test client’s registration access token to its server only (no DELETE elsewhere)', async () => {
      await setup();
      const sent: string[] = [];
      // A server whose registration answer points its client's URI at another host.
      (h.extra as { fetch: unknown }).fetch = async (input: string, init?: RequestInit) => {
        sent.push(`${init?.method ?? 'GET'} ${input}`);
        const answer = await world.fetch(input, init);
        if (!String(input).endsWith('/oauth/register')) return answer;
        const body = (await answer.json()) as Record<string, unknown>;
        return new Response(
          JSON.stringify({
            ...body,
            registration_client_uri: 'https://collector.example/clients/x',
          }),
          { status: answer.status, headers: { 'content-type': 'application/json' } },
        );
      };
      h.rebuild(ROOT_KEY);
      const tried = await h.call('POST', '/api/admin/discover', {
        body: { resource_url: world.resourceUrl, try_registration: true },
      });
      expect(tried.body.report.register).toMatchObject({ works: true, how: 'dynamic' });
      expect(tried.body.report.register.note).toMatch(/the server offers no way to delete it\)$/);
      expect(sent.filter((line) => line.includes('collector.example'))).toEqual([]);
      expect(world.stats.unregistrations).toBe(0);
    });

    it('answers the discovery trace without storing anything', async () => {
      await setup({ challengeScope: 'read', serverScopesSupported: ['read', 'offline_access'] });
      const reply = await h.call('POST', '/api/admin/discover', {
        body: { resource_url: world.resourceUrl },
      });
      expect(reply.status).toBe(200);
      expect(reply.body).toMatchObject({
        ok: true,
        scopes: ['read', 'offline_access'],
        error: null,
      });
      expect(reply.body.steps).toHaveLength(5);
      // The documents read, as the servers sent them, on the steps that found them.
      const documents = reply.body.steps.map((step: { step: string; document?: unknown }) => [
        step.step,
        step.document === undefined,
      ]);
      expect(documents).toEqual([
        ['probe', true],
        ['resource_metadata', false],
        ['resource_match', true],
        ['authorization_server_metadata', false],
        ['requirements', true],
      ]);
      const [, metadata, , server] = reply.body.steps;
      expect(metadata.document.resource).toBe(world.resourceUrl);
      expect(metadata.document.authorization_servers).toEqual([world.issuer]);
      expect(server.document.issuer).toBe(world.issuer);
      expect(server.document.code_challenge_methods_supported).toEqual(['S256']);
      expect(world.stats.registrations).toBe(0);
      expect((await h.call('GET', '/api/admin/providers')).body.items).toEqual([]);
      world.set({ codeChallengeMethods: null });
      const failing = await h.call('POST', '/api/admin/discover', {
        body: { resource_url: world.resourceUrl },
      });
      expect(failing.body).toMatchObject({ ok: false, error: 'unsupported_authorization_server' });
      // A PUT that fails names the steps in its details, without the documents.
      const refused = await h.call('PUT', '/api/admin/providers/linear', {
        body: { template: 'mcp', configuration: { resource_url: world.resourceUrl } },
      });
      expect(refused.status).toBe(422);
      expect(refused.body.details).toHaveLength(5);
      expect(
        refused.body.details.filter((step: Record<string, unknown>) => 'document' in step),
      ).toEqual([]);
    });
  });
});
