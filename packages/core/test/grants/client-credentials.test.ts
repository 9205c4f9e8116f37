import { storageFactories } from '@keyway/test-storages';
import { createTestWorld } from '@keyway/testing';
import { describe, expect, it } from 'vitest';
import type { Broker } from '../../src/broker/broker.js';
import type { ProviderInput } from '../../src/contract/schemas.js';
import { BASE, brokerPerTest, ROOT, refusal } from '../support/spec.js';

/*
 * The client credentials grant (docs/api.md §14; SEP-1046): a provider whose client gets
 * its own tokens, with a secret or a `private_key_jwt` assertion. Authorize answers the
 * active connection at once; a token due is obtained again the same way.
 */

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
  const spec = brokerPerTest();

  async function setUp() {
    const world = createTestWorld({ now: () => spec.now, dynamicRegistration: false });
    const storage = await factory.create();
    const broker = spec.open(storage, { fetch: world.fetch });
    return { world, storage, broker };
  }

  /** A connection through the gateway: `tools/list`, as an MCP client sends it. */
  const listTools = (broker: Broker, id: string) =>
    broker.gateway.mcp(
      ROOT,
      id,
      new Request(`${BASE}/mcp/${id}`, {
        method: 'POST',
        headers: {
          accept: 'application/json, text/event-stream',
          'content-type': 'application/json',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
      }),
    );

  it('with a client secret: the connection is active at once, and a token due is obtained again', async () => {
    const { world, broker } = await setUp();
    world.preregister({
      client_id: 'billing-service',
      client_secret: SECRET,
      token_endpoint_auth_method: 'client_secret_basic',
      grant_types: ['client_credentials'],
      redirect_uris: [],
    });
    const put = await broker.providers.put(ROOT, 'acme/billing', {
      template: 'mcp',
      configuration: { resource_url: world.resourceUrl, scopes: ['invoices:read'] },
      credentials: {
        mode: 'client_credentials',
        client_id: 'billing-service',
        client_secret: SECRET,
      },
    });
    expect(put.created).toBe(true);
    expect(put.provider.credentials).toMatchObject({
      mode: 'client_credentials',
      client_id: 'billing-service',
      registration: 'manual',
      token_endpoint_auth_method: 'client_secret_basic',
      client_secret_set: true,
    });
    expect(JSON.stringify(put)).not.toContain(SECRET);

    const started = await broker.connections.start(ROOT, 'acme/billing', {
      connection_id: 'acme/services/billing',
    });
    expect(started.connection_id).toBe('acme/services/billing');
    expect(started).toMatchObject({
      connection_id: 'acme/services/billing',
      provider_id: 'acme/billing',
      status: 'active',
      grant: 'client_credentials',
      refreshable: true,
      scopes: ['invoices:read'],
      error: null,
    });
    expect('authorization_url' in started).toBe(false);
    expect(world.stats.clientCredentialsGrants).toBe(1);
    expect(world.stats.authorizations).toBe(0);
    expect(world.tokenRequests[0]).toEqual({
      grant_type: 'client_credentials',
      scope: 'invoices:read',
      resource: world.resourceUrl,
    });

    const first = await broker.connections.credentials(ROOT, 'acme/services/billing');
    expect(first.connection_id).toBe('acme/services/billing');
    expect(world.isValidAccessToken(first.access_token)).toBe(true);
    // Asked for a new one: obtained again, as the first was (no refresh token).
    const forced = await broker.connections.credentials(ROOT, 'acme/services/billing', {
      force_refresh: true,
    });
    expect(forced.connection_id).toBe('acme/services/billing');
    expect(forced.access_token).not.toBe(first.access_token);
    expect(world.stats.clientCredentialsGrants).toBe(2);
    expect(world.stats.refreshes).toBe(0);
    // Past its expiry, the next hand-out obtains one again.
    spec.now += 3600 * 1000 + 1;
    const later = await broker.connections.credentials(ROOT, 'acme/services/billing');
    expect(later.connection_id).toBe('acme/services/billing');
    expect(world.isValidAccessToken(later.access_token)).toBe(true);
    expect(world.stats.clientCredentialsGrants).toBe(3);
    const view = await broker.connections.get(ROOT, 'acme/services/billing');
    expect(view).toMatchObject({
      status: 'active',
      refreshable: true,
      grant: 'client_credentials',
    });
  });

  it('with private_key_jwt: a fresh single-use assertion for this server each time; the key is never shown or stored in clear', async () => {
    const { world, storage, broker } = await setUp();
    const { pem, jwk } = await keyPair();
    world.preregister({
      client_id: 'reports-service',
      token_endpoint_auth_method: 'private_key_jwt',
      public_jwk: jwk,
      grant_types: ['client_credentials'],
      redirect_uris: [],
    });
    const put = await broker.providers.put(ROOT, 'acme/reports', {
      template: 'mcp',
      configuration: { resource_url: world.resourceUrl },
      credentials: {
        mode: 'client_credentials',
        client_id: 'reports-service',
        private_key: pem,
        signing_algorithm: 'ES256',
      },
    });
    expect(put.created).toBe(true);
    expect(put.provider.credentials).toMatchObject({
      mode: 'client_credentials',
      token_endpoint_auth_method: 'private_key_jwt',
      client_secret_set: true,
    });
    const keyBody = pem.split('\n')[1] as string;
    expect(JSON.stringify(put)).not.toContain(keyBody);
    const started = await broker.connections.start(ROOT, 'acme/reports', {
      connection_id: 'acme/services/reports',
    });
    expect(started.connection_id).toBe('acme/services/reports');
    expect('status' in started && started.status).toBe('active');
    const again = await broker.connections.credentials(ROOT, 'acme/services/reports', {
      force_refresh: true,
    });
    expect(again.connection_id).toBe('acme/services/reports');

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
      now: () => spec.now,
      dynamicRegistration: false,
      codeChallengeMethods: null,
      tokenEndpointAuthMethods: ['client_secret_post'],
      serverMetadataOverrides: { authorization_endpoint: undefined },
    });
    const broker = spec.open(await factory.create(), { fetch: world.fetch });
    world.preregister({
      client_id: 'svc',
      client_secret: SECRET,
      token_endpoint_auth_method: 'client_secret_post',
      grant_types: ['client_credentials'],
      redirect_uris: [],
    });
    const body = (mode: 'custom' | 'client_credentials'): ProviderInput => ({
      template: 'mcp',
      configuration: { resource_url: world.resourceUrl },
      credentials: { mode, client_id: 'svc', client_secret: SECRET },
    });
    // A client for users needs what this server lacks.
    const custom = await refusal(broker.providers.put(ROOT, 'acme/users-svc', body('custom')));
    expect(custom.status).toBe(422);
    expect(custom.code).toBe('unsupported_authorization_server');
    const own = await broker.providers.put(ROOT, 'acme/svc', body('client_credentials'));
    expect(own.created).toBe(true);
    const started = await broker.connections.start(ROOT, 'acme/svc', {
      connection_id: 'acme/services/svc',
    });
    expect(started.connection_id).toBe('acme/services/svc');
    expect('status' in started && started.status).toBe('active');
    expect(world.tokenRequests[0]).toMatchObject({
      grant_type: 'client_credentials',
      client_id: 'svc',
      client_secret: SECRET,
    });
  });

  it('refuses what cannot work, naming the field; a refused grant leaves the connection in error', async () => {
    const { world, broker } = await setUp();
    world.preregister({
      client_id: 'svc',
      client_secret: SECRET,
      token_endpoint_auth_method: 'client_secret_basic',
      grant_types: ['client_credentials'],
      redirect_uris: [],
    });
    // What a caller sends, checked by the broker: not always a valid provider.
    const provider = (credentials: Record<string, unknown>) =>
      broker.providers.put(ROOT, 'acme/svc', {
        template: 'mcp',
        configuration: { resource_url: world.resourceUrl },
        credentials: { mode: 'client_credentials', ...credentials },
      } as ProviderInput);
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
      const reply = await refusal(provider(credentials));
      expect(reply.status, JSON.stringify(credentials)).toBe(400);
      expect(reply.code).toBe('invalid_request');
      expect(reply.details?.[0]?.path).toBe(path);
    }
    const custom = await refusal(
      broker.providers.put(ROOT, 'acme/svc', {
        template: 'mcp',
        configuration: { resource_url: world.resourceUrl },
        credentials: { mode: 'custom', client_id: 'svc', private_key: (await keyPair()).pem },
      } as ProviderInput),
    );
    expect(custom.status).toBe(400);
    expect(custom.details?.[0]?.path).toBe('credentials.private_key');

    expect(
      (await provider({ client_id: 'svc', client_secret: 'wrong-secret-000000' })).created,
    ).toBe(true);
    const browser = await refusal(
      broker.connections.start(ROOT, 'acme/svc', {
        connection_id: 'acme/services/svc',
        redirect_to: 'https://app.example/done',
      }),
    );
    expect(browser.status).toBe(400);
    expect(browser.details?.[0]?.path).toBe('redirect_to');
    const refused = await refusal(
      broker.connections.start(ROOT, 'acme/svc', { connection_id: 'acme/services/svc' }),
    );
    expect(refused.status).toBe(502);
    expect(refused.code).toBe('upstream_error');
    const view = await broker.connections.get(ROOT, 'acme/services/svc');
    expect(view).toMatchObject({ status: 'error', error: { code: 'invalid_client' } });
    // No consent page to elicit through the gateway: it says to authorize again.
    const gateway = await refusal(listTools(broker, 'acme/services/svc'));
    expect(gateway.status).toBe(409);
    expect(gateway.code).toBe('reauthorization_required');
    expect(JSON.stringify(refused.toJSON())).not.toContain('wrong-secret');
    // The in-process authorize() has no consent URL to give for it.
    await expect(
      broker.connections.authorize(ROOT, 'acme/svc', { connection_id: 'acme/services/svc' }),
    ).rejects.toMatchObject({ code: 'invalid_request' });
  });
});
