import { createTestWorld } from '@keyway/testing';
import { describe, expect, it } from 'vitest';
import { Harness, harnessPerTest, ROOT_KEY, storageFactories } from './harness.js';

/*
 * The client credentials grant (docs/api.md §14; SEP-1046): a provider whose client gets
 * its own tokens, with a secret or a `private_key_jwt` assertion. Authorize answers the
 * active connection at once; a token due is obtained again the same way.
 */

const BASE = 'https://keyway.example.test';
const SECRET = 'service-secret-0123456789abcdef';
const JWT_BEARER = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

/** An ES256 key pair: the private key as PKCS #8 PEM, the public one as a JWK. */
async function keyPair(): Promise<{ pem: string; jwk: JsonWebKey }> {
  const pair = (await crypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, [
    'sign',
    'verify',
  ])) as CryptoKeyPair;
  const der = Buffer.from(await crypto.subtle.exportKey('pkcs8', pair.privateKey));
  const body = der.toString('base64').replace(/(.{64})/g, '$1\n');
  const pem = `-----BEGIN PRIVATE KEY-----\n${body.trim()}\n-----END PRIVATE KEY-----\n`;
  return { pem, jwk: await crypto.subtle.exportKey('jwk', pair.publicKey) };
}

const claimsOf = (assertion: string) =>
  JSON.parse(Buffer.from(assertion.split('.')[1] as string, 'base64url').toString('utf8'));

describe.each(storageFactories)('the client credentials grant ($name storage)', (factory) => {
  const slot = harnessPerTest();

  async function setUp() {
    const world = createTestWorld({
      now: () => (slot.h as Harness).now,
      dynamicRegistration: false,
    });
    const storage = await factory.create();
    const h = new Harness(storage, { fetch: world.fetch, baseUrl: BASE, providerManagement: true });
    slot.h = h;
    return { world, storage, h };
  }

  it('with a client secret: the connection is active at once, and a token due is obtained again', async () => {
    const { world, h } = await setUp();
    world.preregister({
      client_id: 'billing-service',
      client_secret: SECRET,
      token_endpoint_auth_method: 'client_secret_basic',
      grant_types: ['client_credentials'],
      redirect_uris: [],
    });
    const put = await h.call('PUT', '/api/admin/providers/acme/billing', {
      body: {
        template: 'mcp',
        configuration: { resource_url: world.resourceUrl, scopes: ['invoices:read'] },
        credentials: {
          mode: 'client_credentials',
          client_id: 'billing-service',
          client_secret: SECRET,
        },
      },
    });
    expect(put.status, put.text).toBe(201);
    expect(put.body.credentials).toMatchObject({
      mode: 'client_credentials',
      client_id: 'billing-service',
      registration: 'manual',
      token_endpoint_auth_method: 'client_secret_basic',
      client_secret_set: true,
    });
    expect(put.text).not.toContain(SECRET);

    const started = await h.call('POST', '/api/oauth/authorize/acme/billing', {
      body: { connection_id: 'acme/services/billing' },
    });
    expect(started.status, started.text).toBe(201);
    expect(started.body).toMatchObject({
      connection_id: 'acme/services/billing',
      provider_id: 'acme/billing',
      status: 'active',
      grant: 'client_credentials',
      refreshable: true,
      scopes: ['invoices:read'],
      error: null,
    });
    expect('authorization_url' in started.body).toBe(false);
    expect(world.stats.clientCredentialsGrants).toBe(1);
    expect(world.stats.authorizations).toBe(0);
    expect(world.tokenRequests[0]).toEqual({
      grant_type: 'client_credentials',
      scope: 'invoices:read',
      resource: world.resourceUrl,
    });

    const first = await h.call('GET', '/api/oauth/credentials/acme/services/billing');
    expect(first.status).toBe(200);
    expect(world.isValidAccessToken(first.body.access_token)).toBe(true);
    // Asked for a new one: obtained again, as the first was (no refresh token).
    const forced = await h.call(
      'GET',
      '/api/oauth/credentials/acme/services/billing?force_refresh=true',
    );
    expect(forced.status, forced.text).toBe(200);
    expect(forced.body.access_token).not.toBe(first.body.access_token);
    expect(world.stats.clientCredentialsGrants).toBe(2);
    expect(world.stats.refreshes).toBe(0);
    // Past its expiry, the next hand-out obtains one again.
    h.now += 3600 * 1000 + 1;
    const later = await h.call('GET', '/api/oauth/credentials/acme/services/billing');
    expect(later.status).toBe(200);
    expect(world.isValidAccessToken(later.body.access_token)).toBe(true);
    expect(world.stats.clientCredentialsGrants).toBe(3);
    const view = await h.call('GET', '/api/oauth/connections/acme/services/billing');
    expect(view.body).toMatchObject({
      status: 'active',
      refreshable: true,
      grant: 'client_credentials',
    });
  });

  it('with private_key_jwt: a fresh single-use assertion for this server each time; the key is never shown or stored in clear', async () => {
    const { world, storage, h } = await setUp();
    const { pem, jwk } = await keyPair();
    world.preregister({
      client_id: 'reports-service',
      token_endpoint_auth_method: 'private_key_jwt',
      public_jwk: jwk,
      grant_types: ['client_credentials'],
      redirect_uris: [],
    });
    const put = await h.call('PUT', '/api/admin/providers/acme/reports', {
      body: {
        template: 'mcp',
        configuration: { resource_url: world.resourceUrl },
        credentials: {
          mode: 'client_credentials',
          client_id: 'reports-service',
          private_key: pem,
          signing_algorithm: 'ES256',
        },
      },
    });
    expect(put.status, put.text).toBe(201);
    expect(put.body.credentials).toMatchObject({
      mode: 'client_credentials',
      token_endpoint_auth_method: 'private_key_jwt',
      client_secret_set: true,
    });
    const keyBody = pem.split('\n')[1] as string;
    expect(put.text).not.toContain(keyBody);
    const started = await h.call('POST', '/api/oauth/authorize/acme/reports', {
      body: { connection_id: 'acme/services/reports' },
    });
    expect(started.status, started.text).toBe(201);
    expect(started.body.status).toBe('active');
    const again = await h.call(
      'GET',
      '/api/oauth/credentials/acme/services/reports?force_refresh=true',
    );
    expect(again.status, again.text).toBe(200);

    const assertions = world.tokenRequests.map((form) => {
      expect(form.client_assertion_type).toBe(JWT_BEARER);
      expect(form.client_secret).toBeUndefined();
      return claimsOf(form.client_assertion as string);
    });
    expect(assertions).toHaveLength(2);
    for (const claims of assertions) {
      expect(claims).toMatchObject({
        iss: 'reports-service',
        sub: 'reports-service',
        aud: world.issuer,
      });
      expect(claims.exp - claims.iat).toBeLessThanOrEqual(60);
    }
    expect(assertions[0].jti).not.toBe(assertions[1].jti);
    // A replayed assertion is refused by the server: each one is good once.
    const replay = await world.fetch(`${world.issuer}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(world.tokenRequests[0]).toString(),
    });
    expect(replay.status).toBe(401);
    expect(await replay.json()).toMatchObject({ error: 'invalid_client' });

    const raw = await factory.rawText(storage);
    if (raw !== null) expect(raw).not.toContain(keyBody);
  });

  it('needs no authorization endpoint or PKCE at a server that only issues tokens to clients', async () => {
    const world = createTestWorld({
      now: () => (slot.h as Harness).now,
      dynamicRegistration: false,
      codeChallengeMethods: null,
      tokenEndpointAuthMethods: ['client_secret_post'],
      serverMetadataOverrides: { authorization_endpoint: undefined },
    });
    const h = new Harness(await factory.create(), {
      fetch: world.fetch,
      baseUrl: BASE,
      providerManagement: true,
    });
    slot.h = h;
    world.preregister({
      client_id: 'svc',
      client_secret: SECRET,
      token_endpoint_auth_method: 'client_secret_post',
      grant_types: ['client_credentials'],
      redirect_uris: [],
    });
    const body = (mode: string) => ({
      template: 'mcp',
      configuration: { resource_url: world.resourceUrl },
      credentials: { mode, client_id: 'svc', client_secret: SECRET },
    });
    // A client for users needs what this server lacks.
    const custom = await h.call('PUT', '/api/admin/providers/acme/users-svc', {
      body: body('custom'),
    });
    expect(custom.status).toBe(422);
    expect(custom.body.error).toBe('unsupported_authorization_server');
    const own = await h.call('PUT', '/api/admin/providers/acme/svc', {
      body: body('client_credentials'),
    });
    expect(own.status, own.text).toBe(201);
    const started = await h.call('POST', '/api/oauth/authorize/acme/svc', {
      body: { connection_id: 'acme/services/svc' },
    });
    expect(started.status, started.text).toBe(201);
    expect(started.body.status).toBe('active');
    expect(world.tokenRequests[0]).toMatchObject({
      grant_type: 'client_credentials',
      client_id: 'svc',
      client_secret: SECRET,
    });
  });

  it('refuses what cannot work, naming the field; a refused grant leaves the connection in error', async () => {
    const { world, h } = await setUp();
    world.preregister({
      client_id: 'svc',
      client_secret: SECRET,
      token_endpoint_auth_method: 'client_secret_basic',
      grant_types: ['client_credentials'],
      redirect_uris: [],
    });
    const provider = (credentials: Record<string, unknown>) =>
      h.call('PUT', '/api/admin/providers/acme/svc', {
        body: {
          template: 'mcp',
          configuration: { resource_url: world.resourceUrl },
          credentials: { mode: 'client_credentials', ...credentials },
        },
      });
    const cases: [Record<string, unknown>, string][] = [
      [{ client_secret: SECRET }, 'credentials.client_id'],
      [{ client_id: 'svc', client_secret: SECRET, private_key: 'x' }, 'credentials.private_key'],
      [{ client_id: 'svc', private_key: 'not a key' }, 'credentials.private_key'],
      [
        { client_id: 'svc', client_secret: SECRET, signing_algorithm: 'ES256' },
        'credentials.signing_algorithm',
      ],
      [{ client_id: 'svc', client_secret: SECRET, callback: 'per_server' }, 'credentials.callback'],
    ];
    for (const [credentials, path] of cases) {
      const reply = await provider(credentials);
      expect(reply.status, JSON.stringify(credentials)).toBe(400);
      expect(reply.body.error).toBe('invalid_request');
      expect(reply.body.details[0].path).toBe(path);
    }
    const custom = await h.call('PUT', '/api/admin/providers/acme/svc', {
      body: {
        template: 'mcp',
        configuration: { resource_url: world.resourceUrl },
        credentials: { mode: 'custom', client_id: 'svc', private_key: (await keyPair()).pem },
      },
    });
    expect(custom.status).toBe(400);
    expect(custom.body.details[0].path).toBe('credentials.private_key');

    expect(
      (await provider({ client_id: 'svc', client_secret: 'wrong-secret-000000' })).status,
    ).toBe(201);
    const browser = await h.call('POST', '/api/oauth/authorize/acme/svc', {
      body: { connection_id: 'acme/services/svc', redirect_to: 'https://app.example/done' },
    });
    expect(browser.status).toBe(400);
    expect(browser.body.details[0].path).toBe('redirect_to');
    const refused = await h.call('POST', '/api/oauth/authorize/acme/svc', {
      body: { connection_id: 'acme/services/svc' },
    });
    expect(refused.status).toBe(502);
    expect(refused.body.error).toBe('upstream_error');
    const view = await h.call('GET', '/api/oauth/connections/acme/services/svc');
    expect(view.body).toMatchObject({ status: 'error', error: { code: 'invalid_client' } });
    // No consent page to elicit through the gateway: it says to authorize again.
    const gateway = await h.call('POST', '/mcp/acme/services/svc', {
      body: { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} },
      headers: { accept: 'application/json, text/event-stream' },
    });
    expect(gateway.status, gateway.text).toBe(409);
    expect(gateway.body.error).toBe('reauthorization_required');
    expect(refused.text).not.toContain('wrong-secret');
    // The in-process authorize() has no consent URL to give for it.
    const root = await h.broker.authenticate(ROOT_KEY);
    await expect(
      h.broker.connections.authorize(root, 'acme/svc', { connection_id: 'acme/services/svc' }),
    ).rejects.toMatchObject({ code: 'invalid_request' });
  });
});
