import { createServer } from 'node:http';
import { createTestDatabase } from '@keyway/test-support/postgres';
import { type BrokerProcess, startBrokerProcess } from '@keyway/test-support/processes';
import type { TestWorld, TestWorldOptions } from '@keyway/testing';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { callApi, close, listen, serveWorld } from './peers.js';

/*
 * The quirks of the servers people use — their refresh behaviours, their refusal to register
 * clients — as the test kit's switches (each named after its behaviour and documented with
 * the server it is known from), against three `keyway serve` processes on one PostgreSQL
 * database: what Keyway does with each.
 */

const ROOT_KEY = 'server-quirks-root-key-0123456789abcdefghij';
const VAULT_KEY = 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8';
const SECRET = 'whsec_fBq2m8c0ZkT1wN7yH3rLp5Qx9sVd4Jg6';
const INSTANCES = 3;
const ROUNDS = 3;

/** A call of the API with the root key. */
const call = (base: string, method: string, path: string, body?: unknown) =>
  callApi(base, ROOT_KEY, method, path, body);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe(`the quirks of servers people use, against ${INSTANCES} keyway serve processes on one PostgreSQL`, () => {
  let brokers: BrokerProcess[] = [];
  let drop: () => Promise<void> = async () => {};
  let env: Record<string, string> = {};
  const received: { type: string; resource: string; data: Record<string, unknown> }[] = [];
  const hook = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8').on('data', (chunk: string) => {
      body += chunk;
    });
    request.on('end', () => {
      received.push(JSON.parse(body));
      response.writeHead(204).end();
    });
  });
  const on = (i: number) => (brokers[i % brokers.length] as BrokerProcess).url;

  beforeAll(async () => {
    const db = await createTestDatabase(inject('databaseUrl'));
    drop = db.drop;
    const hookOrigin = await listen(hook);
    env = {
      KEYWAY_ROOT_KEY: ROOT_KEY,
      KEYWAY_DATABASE: db.url,
      KEYWAY_VAULT_KEYS: VAULT_KEY,
      KEYWAY_ALLOWED_HOSTS: '127.0.0.1',
      KEYWAY_BASE_URL: 'http://localhost:8787',
      KEYWAY_WEBHOOK_URL: `${hookOrigin}/hooks`,
      KEYWAY_WEBHOOK_SECRET: SECRET,
      KEYWAY_WEBHOOK_TYPES: 'connection.reauthorization_required',
    };
    brokers = await Promise.all(Array.from({ length: INSTANCES }, () => startBrokerProcess(env)));
  }, 120_000);

  afterAll(async () => {
    await Promise.all(brokers.map((broker) => broker.stop()));
    await close(hook);
    await drop();
  });

  /** A provider on a served world with `quirks`, and one connection of it, authorized. */
  async function connected(name: string, quirks: TestWorldOptions) {
    const served = await serveWorld({ rotateRefreshTokens: true, ...quirks });
    const { world } = served;
    const provider = await call(on(0), 'PUT', `/api/admin/providers/${name}`, {
      template: 'mcp',
      configuration: { resource_url: world.resourceUrl },
    });
    expect(provider.status).toBe(201);
    return { served, world, connection: (await authorized(name, world)).connection };
  }

  /**
   * Alice's connection of provider `name`: started on one instance, back on another (or
   * both on `at`); the consent URL it went to and the redirect back, for a test to read.
   */
  async function authorized(
    name: string,
    world: TestWorld,
    at?: string,
  ): Promise<{ connection: string; consent: URL; back: URL }> {
    const connection = `acme/users/alice/${name}`;
    const started = await call(at ?? on(1), 'POST', `/api/oauth/authorize/${name}`, {
      connection_id: connection,
    });
    const consent = new URL(started.body.authorization_url);
    const back = new URL(world.consent(consent.href));
    const landed = await fetch(`${at ?? on(2)}${back.pathname}${back.search}`);
    expect(landed.status).toBe(200);
    await landed.text();
    return { connection, consent, back };
  }

  /** Thirty callers on every instance at once, the access token expired: their answers. */
  async function storm(connection: string) {
    return Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        call(on(i), 'GET', `/api/oauth/credentials/${connection}`),
      ),
    );
  }

  for (const [server, quirks] of [
    [
      'Notion (reuse revokes the family)',
      { refreshTokenReuse: 'revoke-family', invalidGrantDescription: 'OAuth grant revoked' },
    ],
    [
      'Linear (rotation with a grace window)',
      { refreshTokenReuseGraceSeconds: 30, invalidGrantDescription: 'Grant not found' },
    ],
  ] as const) {
    it(`keeps a connection of ${server} alive through refresh storms: one refresh per expiry, no reuse`, async () => {
      const name = server.split(' ')[0]?.toLowerCase() ?? 'server';
      const { served, world, connection } = await connected(name, quirks);
      try {
        for (let round = 0; round < ROUNDS; round++) {
          // A token of one second, then the callers once it expired: outside the refresh
          // margin once refreshed, so one refresh serves them all.
          world.set({ accessTokenLifetime: 1 });
          const short = await call(
            on(round),
            'GET',
            `/api/oauth/credentials/${connection}?force_refresh=true`,
          );
          expect(short.status).toBe(200);
          world.set({ accessTokenLifetime: 3600 });
          await sleep(1_100);
          const before = world.stats.refreshes;
          const answers = await storm(connection);
          expect(answers.map((answer) => answer.status)).toEqual(Array(30).fill(200));
          expect(world.stats.refreshes - before).toBe(1);
          expect(new Set(answers.map((answer) => answer.body.access_token)).size).toBe(1);
        }
        // No refresh token was ever presented twice: the family lives.
        expect(world.stats.refreshTokenReuses).toBe(0);
        const view = await call(on(0), 'GET', `/api/oauth/connections/${connection}`);
        expect([view.body.status, view.body.error]).toEqual(['active', null]);
        const last = await call(
          on(1),
          'GET',
          `/api/oauth/credentials/${connection}?force_refresh=true`,
        );
        expect(last.status).toBe(200);
      } finally {
        await served.close();
      }
    }, 60_000);
  }

  for (const [server, refusal] of [
    ['GitHub', { status: 422, error: 'unprocessable_entity', description: 'Validation Failed' }],
    ['Figma', { status: 403, error: 'access_denied', description: 'Forbidden' }],
  ] as const) {
    it(`says what to do when ${server}'s server refuses registration (${refusal.status}), then connects with a registered application`, async () => {
      const name = server.toLowerCase();
      const served = await serveWorld({ registrationRefused: refusal });
      const { world } = served;
      try {
        const refused = await call(on(0), 'PUT', `/api/admin/providers/${name}`, {
          template: 'mcp',
          configuration: { resource_url: world.resourceUrl },
        });
        expect(refused.status).toBe(502);
        expect(refused.body.error).toBe('registration_failed');
        const callback = /redirect URI (\S+)\)/.exec(refused.body.error_description)?.[1] ?? '';
        expect(refused.body.error_description).toBe(
          `dynamic client registration failed: the server refused: ${refusal.error} (${refusal.description}). ` +
            `Register an application with it (redirect URI ${callback}) and give its client id and secret ` +
            `(credentials.mode "custom")`,
        );
        expect(callback).toBe('http://localhost:8787/api/oauth/callback');
        // Nothing was stored.
        expect((await call(on(1), 'GET', `/api/admin/providers/${name}`)).status).toBe(404);
        // The operator registers an application at that redirect URI, as the error says.
        const client = world.preregister({
          redirect_uris: [callback],
          token_endpoint_auth_method: 'client_secret_basic',
          client_secret: `${name}-secret`,
        });
        const put = await call(on(1), 'PUT', `/api/admin/providers/${name}`, {
          template: 'mcp',
          configuration: { resource_url: world.resourceUrl },
          credentials: {
            mode: 'custom',
            client_id: client.client_id,
            client_secret: `${name}-secret`,
          },
        });
        expect(put.status).toBe(201);
        const { connection } = await authorized(name, world);
        const view = await call(on(1), 'GET', `/api/oauth/connections/${connection}`);
        expect(view.body.status).toBe('active');
      } finally {
        await served.close();
      }
    }, 60_000);
  }

  it("registers under the client metadata an operator sets when Figma's server takes only the clients it lists", async () => {
    const served = await serveWorld({ registrationClientNames: ['Approved Client'] });
    const { world } = served;
    try {
      const refused = await call(on(0), 'PUT', '/api/admin/providers/figma-listed', {
        template: 'mcp',
        configuration: { resource_url: world.resourceUrl },
      });
      expect([refused.status, refused.body.error]).toEqual([502, 'registration_failed']);
      expect(refused.body.error_description).toBe(
        'dynamic client registration failed: the server refused: access_denied (Forbidden). Register an ' +
          'application with it (redirect URI http://localhost:8787/api/oauth/callback) and give its client id ' +
          'and secret (credentials.mode "custom")',
      );
      // client_metadata belongs to registration: refused, by name, in any other mode.
      const misplaced = await call(on(1), 'PUT', '/api/admin/providers/figma-listed', {
        template: 'mcp',
        configuration: { resource_url: world.resourceUrl },
        credentials: {
          mode: 'custom',
          client_id: 'x',
          client_metadata: { client_name: 'Approved Client' },
        },
      });
      expect([misplaced.status, misplaced.body.details]).toEqual([
        400,
        [
          {
            path: 'credentials.client_metadata',
            message:
              '"client_metadata" is what dynamic registration sends: it is for mode "register"',
          },
        ],
      ]);
      const metadata = { client_name: 'Approved Client', client_uri: 'https://app.example.test' };
      const put = await call(on(1), 'PUT', '/api/admin/providers/figma-listed', {
        template: 'mcp',
        configuration: { resource_url: world.resourceUrl },
        credentials: { client_metadata: metadata },
      });
      expect(put.status).toBe(201);
      expect([put.body.credentials.registration, put.body.credentials.client_metadata]).toEqual([
        'dynamic',
        metadata,
      ]);
      expect(world.clients.get(put.body.credentials.client_id)?.client_name).toBe(
        'Approved Client',
      );
      // The same metadata again keeps the client; another registers a new one.
      const again = await call(on(2), 'PUT', '/api/admin/providers/figma-listed', {
        template: 'mcp',
        configuration: { resource_url: world.resourceUrl },
        credentials: { client_metadata: metadata },
      });
      expect(again.body.credentials.client_id).toBe(put.body.credentials.client_id);
      const renamed = await call(on(2), 'PUT', '/api/admin/providers/figma-listed', {
        template: 'mcp',
        configuration: { resource_url: world.resourceUrl },
        credentials: { client_metadata: { client_name: 'Keyway' } },
      });
      expect([renamed.status, renamed.body.error]).toEqual([502, 'registration_failed']);
      expect(world.stats.registrations).toBe(3);
      const { connection } = await authorized('figma-listed', world);
      const view = await call(on(0), 'GET', `/api/oauth/connections/${connection}`);
      expect(view.body.status).toBe('active');
    } finally {
      await served.close();
    }
  }, 60_000);

  it("says an https base URL is needed when AppSignal's server refuses http redirect URIs, and connects from one", async () => {
    const served = await serveWorld({ registrationHttpsOnly: true });
    const { world } = served;
    let https: BrokerProcess | null = null;
    try {
      const refused = await call(on(0), 'PUT', '/api/admin/providers/appsignal', {
        template: 'mcp',
        configuration: { resource_url: world.resourceUrl },
      });
      expect([refused.status, refused.body.error]).toEqual([502, 'registration_failed']);
      expect(refused.body.error_description).toMatch(
        new RegExp(
          '^dynamic client registration failed: the server refused: invalid_redirect_uri \\(redirect URIs ' +
            'must use https\\)\\. Its redirect URI was http://localhost:8787/api/oauth/callback/[A-Za-z0-9_-]{22}: ' +
            'a server may take https redirect URIs only; run Keyway at an https base URL \\(baseUrl; ' +
            'KEYWAY_BASE_URL for keyway serve\\)$',
        ),
      );
      // A deployment at an https base URL (behind its TLS proxy) registers and connects.
      https = await startBrokerProcess({ ...env, KEYWAY_BASE_URL: 'https://keyway.example.test' });
      const put = await call(https.url, 'PUT', '/api/admin/providers/appsignal', {
        template: 'mcp',
        configuration: { resource_url: world.resourceUrl },
      });
      expect(put.status).toBe(201);
      expect(put.body.credentials.redirect_uri).toMatch(
        /^https:\/\/keyway\.example\.test\/api\/oauth\/callback\/[A-Za-z0-9_-]{22}$/,
      );
      expect(world.clients.get(put.body.credentials.client_id)?.redirect_uris).toEqual([
        put.body.credentials.redirect_uri,
      ]);
      const { back } = await authorized('appsignal', world, https.url);
      expect(back.origin).toBe('https://keyway.example.test');
      const view = await call(on(1), 'GET', '/api/oauth/connections/acme/users/alice/appsignal');
      expect(view.body.status).toBe('active');
    } finally {
      await https?.stop();
      await served.close();
    }
  }, 90_000);

  const AADSTS =
    "AADSTS9010010: The resource parameter provided in the request doesn't match with the requested scopes.";
  for (const [form, published, accepted, path] of [
    ['an origin without a slash (Microsoft Entra)', (o: string) => o, (o: string) => [o], '/mcp'],
    ['an origin with its slash', (o: string) => `${o}/`, (o: string) => [`${o}/`], '/mcp'],
    [
      'the MCP path, where the origin is also taken (Sentry)',
      (o: string) => `${o}/mcp`,
      (o: string) => [o, `${o}/mcp`],
      '/mcp',
    ],
    [
      'the /v2 of a /v2/mcp endpoint (Asana)',
      (o: string) => `${o}/v2`,
      (o: string) => [`${o}/v2`],
      '/v2/mcp',
    ],
  ] as const) {
    it(`sends resource as published, ${form}: at consent, code exchange and refresh`, async () => {
      let resource = '';
      const served = await serveWorld((origin) => {
        resource = published(origin);
        return {
          resourceUrl: `${origin}${path}`,
          metadataResource: resource,
          acceptedResources: accepted(origin),
          invalidTargetDescription: AADSTS,
          resourceOnRefresh: 'required',
        };
      });
      const { world } = served;
      const name = `resource-${path === '/mcp' ? published('o').length : 'v2'}`;
      try {
        const put = await call(on(0), 'PUT', `/api/admin/providers/${name}`, {
          template: 'mcp',
          configuration: { resource_url: world.resourceUrl },
        });
        expect(put.status).toBe(201);
        expect(put.body.resource.resource).toBe(resource);
        const { consent, back } = await authorized(name, world);
        expect(consent.searchParams.get('resource')).toBe(resource);
        expect(back.searchParams.get('error')).toBeNull();
        const refreshed = await call(
          on(0),
          'GET',
          `/api/oauth/credentials/acme/users/alice/${name}?force_refresh=true`,
        );
        expect(refreshed.status).toBe(200);
        expect(
          world.tokenRequests.map((request) => [request.grant_type, request.resource]),
        ).toEqual([
          ['authorization_code', resource],
          ['refresh_token', resource],
        ]);
      } finally {
        await served.close();
      }
    }, 60_000);
  }

  it("names the other authentication method when HubSpot's token endpoint refuses Basic, then connects with client_secret_post", async () => {
    const served = await serveWorld({ clientSecretPostOnly: true, dynamicRegistration: false });
    const { world } = served;
    try {
      const client = world.preregister({
        redirect_uris: ['http://localhost:8787/api/oauth/callback'],
        client_secret: 'hubspot-secret',
      });
      const body = {
        template: 'mcp',
        configuration: { resource_url: world.resourceUrl },
        credentials: {
          mode: 'custom',
          client_id: client.client_id,
          client_secret: 'hubspot-secret',
        },
      };
      const put = await call(on(0), 'PUT', '/api/admin/providers/hubspot', body);
      expect(put.status).toBe(201);
      // The metadata lists no method: RFC 8414 §2 reads that as client_secret_basic.
      expect(put.body.credentials.token_endpoint_auth_method).toBe('client_secret_basic');
      const { connection } = await authorized('hubspot', world);
      const failed = await call(on(1), 'GET', `/api/oauth/connections/${connection}`);
      expect([failed.body.status, failed.body.error]).toEqual([
        'error',
        {
          code: 'invalid_client',
          description:
            'client authentication failed: the token endpoint refused the client, which authenticated with ' +
            'client_secret_basic. Check its client id and secret; if they are right, the server may take the ' +
            'secret another way: set credentials.token_endpoint_auth_method to "client_secret_post"',
        },
      ]);
      // The setting belongs to an operator's client: refused, by name, for registration.
      const misplaced = await call(on(2), 'PUT', '/api/admin/providers/hubspot-register', {
        template: 'mcp',
        configuration: { resource_url: world.resourceUrl },
        credentials: { token_endpoint_auth_method: 'client_secret_post' },
      });
      expect([misplaced.status, misplaced.body.details?.[0]?.path]).toEqual([
        400,
        'credentials.token_endpoint_auth_method',
      ]);
      // As the error says; the stored secret is kept for the same client id.
      const fixed = await call(on(2), 'PUT', '/api/admin/providers/hubspot', {
        ...body,
        credentials: {
          mode: 'custom',
          client_id: client.client_id,
          token_endpoint_auth_method: 'client_secret_post',
        },
      });
      expect([fixed.status, fixed.body.credentials.token_endpoint_auth_method]).toEqual([
        200,
        'client_secret_post',
      ]);
      await authorized('hubspot', world);
      const view = await call(on(0), 'GET', `/api/oauth/connections/${connection}`);
      expect([view.body.status, view.body.error]).toEqual(['active', null]);
      const refreshed = await call(
        on(1),
        'GET',
        `/api/oauth/credentials/${connection}?force_refresh=true`,
      );
      expect(refreshed.status).toBe(200);
      const last = world.tokenRequests.at(-1);
      expect([last?.grant_type, last?.client_secret]).toEqual(['refresh_token', 'hubspot-secret']);
    } finally {
      await served.close();
    }
  }, 60_000);

  it("reads Slack's answer shape — the user token under authed_user, scopes with commas — for a provider that names it", async () => {
    const served = await serveWorld((origin) => ({
      issuer: `${origin}/slack`,
      dynamicRegistration: false,
      issParameter: false,
      tokenResponse: { tokenType: 'user' },
      classic: {
        endpoints: {
          authorize: `${origin}/slack/oauth/v2/authorize`,
          token: `${origin}/slack/api/oauth.v2.access`,
        },
        scopeSeparator: ',',
        scopeParam: 'user_scope',
        okField: true,
        nestTokensUnder: 'authed_user',
        answerExtra: { team: { id: 'T0KEYWAY' } },
      },
    }));
    const { world } = served;
    const origin = new URL(world.resourceUrl).origin;
    try {
      const client = world.preregister({
        redirect_uris: ['http://localhost:8787/api/oauth/callback'],
        client_secret: 'slack-secret',
        token_endpoint_auth_method: 'client_secret_post',
      });
      const put = await call(on(0), 'PUT', '/api/admin/providers/slack-user', {
        template: 'oauth2',
        configuration: {
          authorization_endpoint: `${origin}/slack/oauth/v2/authorize`,
          token_endpoint: `${origin}/slack/api/oauth.v2.access`,
          scope_separator: ',',
          scope_param: 'user_scope',
          token_endpoint_auth_method: 'client_secret_post',
          scopes: ['search:read', 'users:read'],
          token_response: {
            ok_field: 'ok',
            bearer: true,
            access_token: 'authed_user.access_token',
            refresh_token: 'authed_user.refresh_token',
            expires_in: 'authed_user.expires_in',
            scope: 'authed_user.scope',
            extra: { team_id: 'team.id' },
          },
        },
        credentials: { client_id: client.client_id, client_secret: 'slack-secret' },
      });
      expect(put.status).toBe(201);
      const { consent } = await authorized('slack-user', world);
      expect([consent.searchParams.get('user_scope'), consent.searchParams.get('scope')]).toEqual([
        'search:read,users:read',
        null,
      ]);
      const view = await call(on(0), 'GET', '/api/oauth/connections/acme/users/alice/slack-user');
      expect([view.body.status, view.body.scopes, view.body.metadata]).toEqual([
        'active',
        ['search:read', 'users:read'],
        { team_id: 'T0KEYWAY' },
      ]);
      // The user's token, not the bot token at the top of the answer, and used as Bearer.
      const first = await call(on(1), 'GET', '/api/oauth/credentials/acme/users/alice/slack-user');
      expect([first.status, first.body.token_type]).toEqual([200, 'Bearer']);
      expect(first.body.access_token).toMatch(/^at_/);
      expect(world.isValidAccessToken(first.body.access_token)).toBe(true);
      const refreshed = await call(
        on(2),
        'GET',
        '/api/oauth/credentials/acme/users/alice/slack-user?force_refresh=true',
      );
      expect(refreshed.status).toBe(200);
      expect(refreshed.body.access_token).not.toBe(first.body.access_token);
      expect(world.isValidAccessToken(refreshed.body.access_token)).toBe(true);
      expect(world.stats.refreshes).toBe(1);
    } finally {
      await served.close();
    }
  }, 60_000);

  it('fails a refresh token refused at its first use (Miro) once: the cause, the fix, one event', async () => {
    const { served, world, connection } = await connected('miro', {
      refreshTokenUnusedLifetimeSeconds: 2,
      accessTokenLifetime: 1,
    });
    try {
      await sleep(2_100);
      const before = world.stats.refreshes;
      const answers = await storm(connection);
      // One request for the refused refresh token, whoever asked; every caller told why.
      expect(world.stats.refreshes - before).toBe(1);
      expect(world.stats.refreshTokensExpiredUnused).toBe(1);
      expect(new Set(answers.map((answer) => answer.status))).toEqual(new Set([409]));
      // The caller whose refresh was refused, and those that waited on it, hear why (docs/api.md
      // §1.2 `reauthorization_required`); a caller that came after reads a connection in
      // `error` (`connection_not_active`), whose view keeps the cause.
      const inError = {
        error: 'connection_not_active',
        error_description: 'connection "acme/users/alice/miro" is error: authorize it first',
      };
      const told = [
        {
          error: 'reauthorization_required',
          error_description:
            'connection "acme/users/alice/miro" needs authorizing again: invalid_grant (unknown or revoked refresh token)',
        },
        {
          error: 'reauthorization_required',
          error_description: 'the authorization server rejected the refresh token: authorize again',
        },
        inError,
      ].map((body) => JSON.stringify(body));
      for (const answer of answers) expect(told).toContain(JSON.stringify(answer.body));
      const view = await call(on(0), 'GET', `/api/oauth/connections/${connection}`);
      expect([view.body.status, view.body.error]).toEqual([
        'error',
        { code: 'invalid_grant', description: 'unknown or revoked refresh token' },
      ]);
      // Asked again later: still no second request with that token.
      const again = await call(on(1), 'GET', `/api/oauth/credentials/${connection}`);
      expect([again.status, again.body]).toEqual([409, inError]);
      expect(world.stats.refreshes - before).toBe(1);
      await expect
        .poll(() => received.filter((event) => event.resource === connection).length, {
          timeout: 15_000,
        })
        .toBe(1);
      expect(received.find((event) => event.resource === connection)?.type).toBe(
        'connection.reauthorization_required',
      );
    } finally {
      await served.close();
    }
  }, 60_000);
});
