import { storageFactories } from '@keyway/test-storages';
import { es256Signer } from '@keyway/test-support/jwt-signer';
import { createTestWorld } from '@keyway/testing';
import { describe, expect, it } from 'vitest';
import type { Broker } from '../../src/broker/broker.js';
import type { KeywayEvent } from '../../src/index.js';
import { brokerPerTest, ROOT, refusal } from '../support/spec.js';

/*
 * Enterprise-managed authorization (docs/api.md §14; SEP-990): the user's ID token from the
 * enterprise identity provider is exchanged there for an ID-JAG (RFC 8693), checked, then
 * exchanged at the MCP server's authorization server (RFC 7523). The identity provider here
 * is a small one of this test; the authorization server is @keyway/testing's.
 */

const IDP = 'https://idp.example.test';
const SECRET = 'xaa-client-secret-0123456789';
const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';

/** An identity provider that answers token exchanges with an ID-JAG, as `shape` says. */
async function identityProvider() {
  const signer = await es256Signer();
  const exchanges: Record<string, string>[] = [];
  /** What to change in the ID-JAG, its header and the answer (an attack, or a broken IdP). */
  const shape: { claims?: object; header?: object; answer?: object } = {};
  const fetch = async (request: Request): Promise<Response> => {
    // It publishes no metadata: the provider names its token endpoint.
    if (request.method === 'GET') return new Response('not found', { status: 404 });
    const form = Object.fromEntries(new URLSearchParams(await request.text()));
    exchanges.push(form);
    if (form.grant_type !== TOKEN_EXCHANGE || form.subject_token !== 'alice-id-token')
      return Response.json({ error: 'invalid_grant' }, { status: 400 });
    const now = Math.floor(Date.now() / 1000);
    const jag = await signer.sign(
      {
        iss: IDP,
        sub: 'alice@example.com',
        aud: form.audience,
        client_id: 'xaa-client',
        resource: form.resource,
        iat: now,
        exp: now + 300,
        jti: crypto.randomUUID(),
        ...shape.claims,
      },
      { alg: 'ES256', typ: 'oauth-id-jag+jwt', ...shape.header },
    );
    return Response.json({
      access_token: jag,
      issued_token_type: 'urn:ietf:params:oauth:token-type:id-jag',
      token_type: 'N_A',
      expires_in: 300,
      ...shape.answer,
    });
  };
  return {
    publicJwk: signer.publicJwk,
    fetch,
    exchanges,
    shape,
  };
}

describe.each(storageFactories)('enterprise-managed authorization ($name storage)', (factory) => {
  const spec = brokerPerTest();

  async function setUp() {
    const idp = await identityProvider();
    const world = createTestWorld({
      now: () => Date.now(),
      dynamicRegistration: false,
      jwtBearer: { issuer: IDP, publicJwk: idp.publicJwk },
    });
    world.preregister({
      client_id: 'xaa-client',
      client_secret: SECRET,
      token_endpoint_auth_method: 'client_secret_basic',
      grant_types: ['urn:ietf:params:oauth:grant-type:jwt-bearer'],
      redirect_uris: [],
    });
    const storage = await factory.create();
    const events: KeywayEvent[] = [];
    const broker = spec.open(storage, {
      now: () => Date.now(),
      fetch: async (input, init) => {
        const request = new Request(input, init);
        return request.url.startsWith(IDP) ? idp.fetch(request) : world.fetch(request);
      },
      onEvent: (event) => {
        events.push(event);
      },
    });
    const put = await broker.providers.put(ROOT, 'acme/crm', {
      template: 'mcp',
      configuration: { resource_url: world.resourceUrl, scopes: ['crm:read'] },
      credentials: {
        mode: 'enterprise',
        client_id: 'xaa-client',
        client_secret: SECRET,
        identity_provider: {
          issuer: IDP,
          token_endpoint: `${IDP}/oauth2/token`,
          client_id: 'keyway-at-idp',
          client_secret: 'idp-secret-0123456789',
        },
      },
    });
    expect(put.created).toBe(true);
    return { idp, world, storage, broker, put, events };
  }

  const authorize = (broker: Broker, extra: object = {}) =>
    broker.connections.start(ROOT, 'acme/crm', {
      connection_id: 'acme/users/alice/crm',
      subject_token: 'alice-id-token',
      ...extra,
    });

  it('exchanges the user’s ID token at the identity provider, then the ID-JAG at the server; keeps neither', async () => {
    const { idp, world, storage, broker, put, events } = await setUp();
    expect(put.provider.credentials).toEqual(
      expect.objectContaining({
        mode: 'enterprise',
        client_id: 'xaa-client',
        token_endpoint_auth_method: 'client_secret_basic',
        identity_provider: {
          issuer: IDP,
          token_endpoint: `${IDP}/oauth2/token`,
          client_id: 'keyway-at-idp',
          client_secret_set: true,
        },
      }),
    );
    expect(JSON.stringify(put)).not.toContain('idp-secret-0123456789');
    const started = await authorize(broker);
    expect('authorization_url' in started).toBe(false);
    expect(started).toMatchObject({
      connection_id: 'acme/users/alice/crm',
      status: 'active',
      grant: 'enterprise',
      scopes: ['crm:read'],
      refreshable: false,
    });
    expect(idp.exchanges).toEqual([
      {
        grant_type: TOKEN_EXCHANGE,
        subject_token: 'alice-id-token',
        subject_token_type: 'urn:ietf:params:oauth:token-type:id_token',
        requested_token_type: 'urn:ietf:params:oauth:token-type:id-jag',
        audience: world.issuer,
        resource: world.resourceUrl,
        scope: 'crm:read',
        client_id: 'keyway-at-idp',
        client_secret: 'idp-secret-0123456789',
      },
    ]);
    expect(world.tokenRequests).toHaveLength(1);
    expect(world.tokenRequests[0]).toMatchObject({
      grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer',
      resource: world.resourceUrl,
      scope: 'crm:read',
    });
    const credentials = await broker.connections.credentials(ROOT, 'acme/users/alice/crm');
    expect(world.isValidAccessToken(credentials.access_token)).toBe(true);
    const raw = await factory.rawText(storage);
    if (raw !== null) {
      expect(raw).not.toContain('alice-id-token');
      expect(raw).not.toContain(world.tokenRequests[0]?.assertion);
    }
    expect(JSON.stringify(events)).not.toContain('alice-id-token');
    // Without the user's ID token there is nothing to exchange; with it, for another mode, no.
    const missing = await refusal(
      broker.connections.start(ROOT, 'acme/crm', { connection_id: 'acme/users/bob/crm' }),
    );
    expect(missing.status).toBe(400);
    expect(missing.details?.[0]?.path).toBe('subject_token');
  });

  it.each([
    ['another audience', { claims: { aud: 'https://other-as.example' } }, '"aud"'],
    [
      'another issuer',
      { claims: { iss: 'https://evil.example' } },
      'issued by "https://evil.example"',
    ],
    ['another client', { claims: { client_id: 'someone-else' } }, '"client_id"'],
    ['another resource', { claims: { resource: 'https://other.example/mcp' } }, '"resource"'],
    ['an expired one', { claims: { exp: 1 } }, 'expired'],
    ['no ID-JAG type', { header: { typ: 'JWT' } }, 'oauth-id-jag+jwt'],
    [
      'another token type',
      { answer: { issued_token_type: 'urn:ietf:params:oauth:token-type:access_token' } },
      'not an ID-JAG',
    ],
  ])('checks the ID-JAG before it goes anywhere: %s is refused', async (_, shape, words) => {
    const { idp, world, broker } = await setUp();
    Object.assign(idp.shape, shape);
    const refused = await refusal(authorize(broker));
    expect(refused.status).toBe(502);
    expect(refused.code).toBe('upstream_error');
    expect(refused.message).toContain(words);
    expect(world.tokenRequests).toEqual([]);
    const view = await broker.connections.get(ROOT, 'acme/users/alice/crm');
    expect(view).toMatchObject({ status: 'error', error: { code: 'invalid_response' } });
  });

  it('drops the secret at the identity provider when the provider stops using it', async () => {
    const { world, storage, broker } = await setUp();
    const key = `acme/crm ${IDP}`;
    expect(await storage.getVaultEntry('idp_client_secret', key)).not.toBeNull();
    const custom = await broker.providers.put(ROOT, 'acme/crm', {
      template: 'mcp',
      configuration: { resource_url: world.resourceUrl },
      credentials: { mode: 'custom', client_id: 'xaa-client', client_secret: SECRET },
    });
    expect(custom.created).toBe(false);
    expect(custom.provider.credentials).not.toHaveProperty('identity_provider');
    expect(await storage.getVaultEntry('idp_client_secret', key)).toBeNull();
  });

  it('records the identity provider’s refusal, and sends nothing on', async () => {
    const { world, broker } = await setUp();
    const refused = await refusal(authorize(broker, { subject_token: 'mallory-id-token' }));
    expect(refused.status).toBe(502);
    expect(refused.message).toContain('the identity provider');
    expect(JSON.stringify(refused.toJSON())).not.toContain('mallory-id-token');
    expect(world.tokenRequests).toEqual([]);
    const view = await broker.connections.get(ROOT, 'acme/users/alice/crm');
    expect(view).toMatchObject({ status: 'error', error: { code: 'invalid_grant' } });
  });
});
