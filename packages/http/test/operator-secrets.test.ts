import { memoryStorage } from '@keyway/store-memory';
import { es256Signer } from '@keyway/test-support/jwt-signer';
import { createTestWorld, type TestWorld } from '@keyway/testing';
import { describe, expect, it } from 'vitest';
import { Harness, harnessPerTest, ROOT_KEY, storageFactories } from './harness.js';

/*
 * A stored client secret goes only to the endpoints it was given for (docs/security.md,
 * "provider managers"): whoever may PUT a provider may re-point it, but a change of any
 * endpoint the secret is sent to (token, revocation, refresh, an identity provider's token
 * endpoint) without the secret in the same body is refused, naming the field. Each attack
 * below was written first, and answered 200 with the operator's secret kept before the fix.
 */

const BASE = 'https://keyway.example.test';
const CALLBACK = `${BASE}/api/oauth/callback`;
const HONEST = 'https://api.example.test';
const EVIL = 'https://evil.example.test';
const CLIENT = { client_id: 'app-client-id', client_secret: 'operator-secret-0123456789' };

const EXPLICIT = {
  authorization_endpoint: `${HONEST}/oauth/authorize`,
  token_endpoint: `${HONEST}/oauth/token`,
  revocation_endpoint: `${HONEST}/oauth/revoke`,
  api_base_url: `${HONEST}/v1`,
};

/** The honest API and an attacker's token endpoint behind one fetch; what reached the attacker. */
function worlds(now: () => number) {
  const world = createTestWorld({
    now,
    issuer: HONEST,
    issParameter: false,
    dynamicRegistration: false,
  });
  world.preregister({ ...CLIENT, redirect_uris: [CALLBACK] });
  const stolen: string[] = [];
  const fetch = async (input: string | URL | Request, init?: RequestInit) => {
    const request = new Request(input, init);
    if (request.url.startsWith(EVIL)) {
      stolen.push(`${request.headers.get('authorization') ?? ''} ${await request.text()}`);
      return Response.json({ access_token: 'attacker', token_type: 'Bearer' });
    }
    return world.fetch(request);
  };
  return { world, stolen, fetch };
}

/** PUT an `oauth2` provider as `token` (root by default). */
const put = (h: Harness, body: Record<string, unknown>, token: string = ROOT_KEY) =>
  h.call('PUT', '/api/admin/providers/api', { token, body: { template: 'oauth2', ...body } });

/** One consent through the provider, as the next tenant would give it. */
async function consent(h: Harness, world: TestWorld, connectionId: string) {
  const started = await h.call('POST', '/api/oauth/authorize/api', {
    body: { connection_id: connectionId },
  });
  expect(started.status, started.text).toBe(201);
  const back = new URL(world.consent(started.body.authorization_url));
  return h.call('GET', `${back.pathname}${back.search}`, { token: null });
}

describe.each(storageFactories)(
  'a stored client secret is bound to its endpoints ($name storage)',
  (factory) => {
    const slot = harnessPerTest();

    async function setUp(body: Record<string, unknown>) {
      const h = new Harness(await factory.create(), {
        baseUrl: BASE,
        providerManagement: true,
        fetch: (input, init) => env.fetch(input, init),
      });
      slot.h = h;
      const env = worlds(() => h.now);
      const created = await put(h, { ...body, credentials: CLIENT });
      expect(created.status, created.text).toBe(201);
      // A manager of this provider only: it may change it, never learn the secret.
      const manager = await h.mint('manager', ['api']);
      return { h, manager, ...env };
    }

    it.each([
      ['token_endpoint', `${EVIL}/token`],
      ['revocation_endpoint', `${EVIL}/revoke`],
    ])(
      'refuses a re-pointed %s without the secret, and sends the next consent nowhere else',
      async (field, evil) => {
        const { h, manager, world, stolen } = await setUp({ configuration: EXPLICIT });
        const moved = await put(
          h,
          {
            configuration: { ...EXPLICIT, [field]: evil },
            credentials: { client_id: CLIENT.client_id },
          },
          manager,
        );
        expect(moved.status).toBe(400);
        expect(moved.body.error).toBe('invalid_request');
        expect(moved.body.details).toEqual([
          {
            path: `configuration.${field}`,
            message: `"${field}" changed from "${EXPLICIT[field as keyof typeof EXPLICIT]}" to "${evil}": a stored client secret is sent only to the endpoints it was given for, so give "credentials.client_secret" again with the new endpoint`,
          },
        ]);
        expect(moved.text).not.toContain(CLIENT.client_secret);
        // Nothing changed: the next tenant's consent goes to the honest server only.
        const view = await h.call('GET', '/api/admin/providers/api');
        expect(view.body.authorization_server[field]).toBe(
          EXPLICIT[field as keyof typeof EXPLICIT],
        );
        expect((await consent(h, world, 'tenants/bob/api')).status).toBe(200);
        expect(stolen).toEqual([]);
      },
    );

    it('refuses a catalog profile switched to endpoints of the caller’s own without the secret', async () => {
      const github = {
        profile: 'github',
        configuration: { scopes: ['repo'] },
      };
      const { h, manager } = await setUp(github);
      const own = {
        authorization_endpoint: 'https://github.com/login/oauth/authorize',
        token_endpoint: `${EVIL}/login/oauth/access_token`,
      };
      const moved = await put(
        h,
        { configuration: own, credentials: { client_id: CLIENT.client_id } },
        manager,
      );
      expect(moved.status).toBe(400);
      expect(moved.body.details).toEqual([
        {
          path: 'configuration.token_endpoint',
          message: `"token_endpoint" changed from "https://github.com/login/oauth/access_token" to "${EVIL}/login/oauth/access_token": a stored client secret is sent only to the endpoints it was given for, so give "credentials.client_secret" again with the new endpoint`,
        },
      ]);
      const view = await h.call('GET', '/api/admin/providers/api');
      expect(view.body).toMatchObject({
        profile: 'github',
        credentials: { client_secret_set: true },
      });
    });

    it('lets a change that brings its own secret through, and binds that secret to the new endpoints', async () => {
      const { h, manager, world, stolen } = await setUp({ configuration: EXPLICIT });
      const own = { ...EXPLICIT, token_endpoint: `${EVIL}/token` };
      const replaced = await put(
        h,
        { configuration: own, credentials: { client_id: CLIENT.client_id, client_secret: 'mine' } },
        manager,
      );
      expect(replaced.status, replaced.text).toBe(200);
      expect(replaced.body.credentials.client_secret_set).toBe(true);
      // Back to the honest endpoint without a secret: the stored one ("mine") is bound to the
      // attacker's endpoint, so this is refused too.
      const back = await put(
        h,
        { configuration: EXPLICIT, credentials: { client_id: CLIENT.client_id } },
        ROOT_KEY,
      );
      expect(back.status).toBe(400);
      expect(back.body.details[0].path).toBe('configuration.token_endpoint');
      // What reached the attacker is the attacker's own secret, never the operator's.
      await consent(h, world, 'tenants/eve/api');
      const basic = (secret: string) => `Basic ${btoa(`${CLIENT.client_id}:${secret}`)}`;
      expect(stolen).toHaveLength(1);
      expect(stolen[0]).toContain(basic('mine'));
      expect(stolen.join('\n')).not.toContain(CLIENT.client_secret);
      expect(stolen.join('\n')).not.toContain(basic(CLIENT.client_secret));
    });

    it('keeps the secret when no endpoint it goes to changed (a label, scopes, the API base)', async () => {
      const { h, manager } = await setUp({ configuration: EXPLICIT });
      const relabelled = await put(
        h,
        {
          label: 'Renamed',
          configuration: { ...EXPLICIT, scopes: ['read'] },
          credentials: { client_id: CLIENT.client_id },
        },
        manager,
      );
      expect(relabelled.status, relabelled.text).toBe(200);
      expect(relabelled.body.credentials.client_secret_set).toBe(true);
    });
  },
);

describe('an enterprise identity provider’s secret is bound to its token endpoint', () => {
  const slot = harnessPerTest();
  const IDP = 'https://idp.example.test';
  const SECRET = 'idp-secret-0123456789';

  /**
   * An MCP server and its authorization server, an identity provider that publishes
   * metadata or not, and an attacker's endpoint, behind one fetch.
   */
  async function setUp(publishes: boolean) {
    const signer = await es256Signer();
    const world = createTestWorld({
      now: () => Date.now(),
      dynamicRegistration: false,
      jwtBearer: { issuer: IDP, publicJwk: signer.publicJwk },
    });
    world.preregister({
      client_id: 'xaa-client',
      client_secret: 'xaa-secret',
      token_endpoint_auth_method: 'client_secret_basic',
      grant_types: ['urn:ietf:params:oauth:grant-type:jwt-bearer'],
      redirect_uris: [],
    });
    const stolen: string[] = [];
    const h = new Harness(memoryStorage(), {
      baseUrl: BASE,
      providerManagement: true,
      now: () => Date.now(),
      fetch: async (input, init) => {
        const request = new Request(input, init);
        if (request.url.startsWith(EVIL)) {
          stolen.push(await request.text());
          return Response.json({ error: 'invalid_grant' }, { status: 400 });
        }
        if (request.url === `${IDP}/.well-known/oauth-authorization-server`) {
          return publishes
            ? Response.json({
                issuer: IDP,
                token_endpoint: `${IDP}/published/token`,
                authorization_endpoint: `${IDP}/authorize`,
              })
            : new Response('not found', { status: 404 });
        }
        if (request.url.startsWith(IDP)) return new Response('not found', { status: 404 });
        return world.fetch(request);
      },
    });
    slot.h = h;
    const body = (identity: Record<string, unknown>) => ({
      template: 'mcp',
      configuration: { resource_url: world.resourceUrl },
      credentials: {
        mode: 'enterprise',
        client_id: 'xaa-client',
        client_secret: 'xaa-secret',
        identity_provider: { issuer: IDP, client_id: 'keyway-at-idp', ...identity },
      },
    });
    const manager = await h.mint('manager', ['acme/crm']);
    return { h, world, stolen, body, manager };
  }

  const putAs = (h: Harness, token: string, body: object) =>
    h.call('PUT', '/api/admin/providers/acme/crm', { token, body });

  it('refuses a new token endpoint at the same issuer and client without the secret', async () => {
    const { h, body, manager, stolen } = await setUp(false);
    const created = await putAs(
      h,
      ROOT_KEY,
      body({ token_endpoint: `${IDP}/oauth2/token`, client_secret: SECRET }),
    );
    expect(created.status, created.text).toBe(201);
    const moved = await putAs(h, manager, body({ token_endpoint: `${EVIL}/token` }));
    expect(moved.status).toBe(400);
    expect(moved.body.details).toEqual([
      {
        path: 'credentials.identity_provider.token_endpoint',
        message: `"token_endpoint" changed from "${IDP}/oauth2/token" to "${EVIL}/token": a stored client secret is sent only to the endpoints it was given for, so give "credentials.identity_provider.client_secret" again with the new endpoint`,
      },
    ]);
    const view = await h.call('GET', '/api/admin/providers/acme/crm');
    expect(view.body.credentials.identity_provider).toEqual({
      issuer: IDP,
      token_endpoint: `${IDP}/oauth2/token`,
      client_id: 'keyway-at-idp',
      client_secret_set: true,
    });
    expect(stolen).toEqual([]);
  });

  it('takes the token endpoint from the issuer’s metadata where it publishes one', async () => {
    const { h, body } = await setUp(true);
    const created = await putAs(h, ROOT_KEY, body({ client_secret: SECRET }));
    expect(created.status, created.text).toBe(201);
    expect(created.body.credentials.identity_provider.token_endpoint).toBe(
      `${IDP}/published/token`,
    );
    // A body that names another one than the issuer publishes is refused, naming both.
    const other = await putAs(
      h,
      ROOT_KEY,
      body({ token_endpoint: `${EVIL}/token`, client_secret: SECRET }),
    );
    expect(other.status).toBe(400);
    expect(other.body.details).toEqual([
      {
        path: 'credentials.identity_provider.token_endpoint',
        message: `the identity provider ${IDP} publishes its token endpoint "${IDP}/published/token" in its metadata; leave "token_endpoint" out or give that one`,
      },
    ]);
  });

  it('needs a token endpoint from the body when the issuer publishes no metadata', async () => {
    const { h, body } = await setUp(false);
    const missing = await putAs(h, ROOT_KEY, body({ client_secret: SECRET }));
    expect(missing.status).toBe(400);
    expect(missing.body.details).toEqual([
      {
        path: 'credentials.identity_provider.token_endpoint',
        message: `the identity provider ${IDP} publishes no authorization server metadata: name its "token_endpoint"`,
      },
    ]);
  });
});
