import { describe, expect, it } from 'vitest';
import { createTestWorld, type TestWorld, type TestWorldOptions } from '../src/index.js';

/*
 * The registration, `resource` and client-authentication behaviours of the servers people
 * use, as switches of the world, driven at its endpoints: registration for named clients
 * only (Figma), https redirect URIs only (AppSignal), `resource` compared exactly (Entra)
 * or from a list (Sentry), client secrets read from the body only (HubSpot).
 * packages/cli/test/server-quirks.test.ts shows what Keyway does with each.
 */

const HTTPS = 'https://app.example/callback';
const LOOPBACK = 'http://127.0.0.1:8787/callback';

async function register(world: TestWorld, body: Record<string, unknown>) {
  const response = await world.fetch(`${world.issuer}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** The consent page's answer to an authorization request with this `resource`. */
function consentWith(world: TestWorld, clientId: string, resource: string): URLSearchParams {
  const authorize = new URL(`${world.issuer}/oauth/authorize`);
  const params = {
    response_type: 'code',
    client_id: clientId,
    redirect_uri: HTTPS,
    state: 's',
    code_challenge: 'c'.repeat(43),
    code_challenge_method: 'S256',
    resource,
  };
  for (const [name, value] of Object.entries(params)) authorize.searchParams.set(name, value);
  return new URL(world.consent(authorize.href)).searchParams;
}

function worldWith(options: TestWorldOptions): TestWorld {
  return createTestWorld({ resourceUrl: 'https://mcp.example.test/mcp', ...options });
}

describe('registration for named clients only (Figma)', () => {
  it('refuses any other client_name with 403, and registers a listed one under that name', async () => {
    const world = worldWith({ registrationClientNames: ['Approved Client'] });
    const refused = await register(world, { redirect_uris: [HTTPS], client_name: 'Keyway' });
    expect(refused).toEqual({
      status: 403,
      body: { error: 'access_denied', error_description: 'Forbidden' },
    });
    expect((await register(world, { redirect_uris: [HTTPS] })).status).toBe(403);
    const taken = await register(world, {
      redirect_uris: [HTTPS],
      client_name: 'Approved Client',
    });
    expect(taken.status).toBe(201);
    const clientId = taken.body.client_id as string;
    expect(world.clients.get(clientId)?.client_name).toBe('Approved Client');
    expect(world.stats.registrations).toBe(3);
  });
});

describe('https redirect URIs only (AppSignal)', () => {
  it('refuses a loopback http redirect URI even for a native client; takes https', async () => {
    const native = { redirect_uris: [LOOPBACK], application_type: 'native' };
    expect((await register(worldWith({}), native)).status).toBe(201);
    const world = worldWith({ registrationHttpsOnly: true });
    expect(await register(world, native)).toEqual({
      status: 400,
      body: { error: 'invalid_redirect_uri', error_description: 'redirect URIs must use https' },
    });
    expect((await register(world, { redirect_uris: [HTTPS] })).status).toBe(201);
  });
});

describe('resource compared exactly', () => {
  it('takes only the published form by default: a trailing slash added is AADSTS9010010 (Entra)', () => {
    const world = worldWith({
      metadataResource: 'https://mcp.example.test',
      invalidTargetDescription:
        "AADSTS9010010: The resource parameter provided in the request doesn't match with the requested scopes.",
    });
    const client = world.preregister({ redirect_uris: [HTTPS] });
    const slashed = consentWith(world, client.client_id, 'https://mcp.example.test/');
    expect([slashed.get('error'), slashed.get('error_description'), slashed.get('code')]).toEqual([
      'invalid_target',
      "AADSTS9010010: The resource parameter provided in the request doesn't match with the requested scopes.",
      null,
    ]);
    const exact = consentWith(world, client.client_id, 'https://mcp.example.test');
    expect(exact.get('error')).toBeNull();
    expect(exact.get('code')).toMatch(/^code_/);
  });

  it('takes each listed form, and no other (Sentry: its origin or its /mcp path)', () => {
    const world = worldWith({
      acceptedResources: ['https://mcp.example.test', 'https://mcp.example.test/mcp'],
    });
    const client = world.preregister({ redirect_uris: [HTTPS] });
    for (const resource of ['https://mcp.example.test', 'https://mcp.example.test/mcp'])
      expect(consentWith(world, client.client_id, resource).get('code')).toMatch(/^code_/);
    for (const resource of ['https://mcp.example.test/', 'https://mcp.example.test/mcp/']) {
      const refused = consentWith(world, client.client_id, resource);
      expect([refused.get('error'), refused.get('error_description')]).toEqual([
        'invalid_target',
        'resource mismatch',
      ]);
    }
  });
});

describe('client secrets from the body only (HubSpot)', () => {
  it('lists no methods, refuses Basic, and takes the same secret in the body', async () => {
    const world = worldWith({ clientSecretPostOnly: true });
    const metadata = await world.fetch(`${world.issuer}/.well-known/oauth-authorization-server`);
    const document = (await metadata.json()) as Record<string, unknown>;
    expect('token_endpoint_auth_methods_supported' in document).toBe(false);
    const client = world.preregister({
      client_secret: 'hubspot-secret',
      redirect_uris: [HTTPS],
      grant_types: ['client_credentials'],
    });
    expect(client.token_endpoint_auth_method).toBe('client_secret_basic');
    const form = { grant_type: 'client_credentials' };
    const basic = await world.fetch(`${world.issuer}/oauth/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${btoa(`${client.client_id}:hubspot-secret`)}`,
      },
      body: new URLSearchParams(form),
    });
    expect([basic.status, await basic.json()]).toEqual([
      401,
      { error: 'invalid_client', error_description: 'client authentication failed' },
    ]);
    const post = await world.fetch(`${world.issuer}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        ...form,
        client_id: client.client_id,
        client_secret: 'hubspot-secret',
      }),
    });
    expect(post.status).toBe(200);
    const wrong = await world.fetch(`${world.issuer}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ ...form, client_id: client.client_id, client_secret: 'nope' }),
    });
    expect(wrong.status).toBe(401);
  });
});
