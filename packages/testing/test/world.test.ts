import { describe, expect, it } from 'vitest';
import { createTestWorld } from '../src/index.js';
import { s256 } from './pkce.js';

const probe = (fetch: (url: string, init?: RequestInit) => Promise<Response>, url: string) =>
  fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} }),
  });

describe('createTestWorld()', () => {
  it('challenges an unauthenticated MCP call, naming its metadata and scope', async () => {
    const world = createTestWorld({ challengeScope: 'read write' });
    const response = await probe(world.fetch, world.resourceUrl);
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe(
      'Bearer realm="mcp", resource_metadata="https://mcp.example.test/keyway-test/resource-metadata/mcp", scope="read write"',
    );
    const metadata = await world.fetch(
      'https://mcp.example.test/keyway-test/resource-metadata/mcp',
    );
    expect(await metadata.json()).toEqual({
      resource: 'https://mcp.example.test/mcp',
      authorization_servers: ['https://auth.example.test'],
      bearer_methods_supported: ['header'],
    });
    expect(world.stats.probes).toBe(1);
  });

  it('serves metadata where the options put it, and nowhere else', async () => {
    const world = createTestWorld({
      metadataLocation: 'path',
      issuer: 'https://auth.example.test/tenant/1',
      authorizationServerMetadata: 'openid-appended',
    });
    expect(
      (await world.fetch('https://mcp.example.test/.well-known/oauth-protected-resource/mcp'))
        .status,
    ).toBe(200);
    expect(
      (await world.fetch('https://mcp.example.test/.well-known/oauth-protected-resource')).status,
    ).toBe(404);
    const as = await world.fetch(
      'https://auth.example.test/tenant/1/.well-known/openid-configuration',
    );
    expect((await as.json()).issuer).toBe('https://auth.example.test/tenant/1');
    expect(
      (
        await world.fetch(
          'https://auth.example.test/.well-known/oauth-authorization-server/tenant/1',
        )
      ).status,
    ).toBe(404);
  });

  it('runs registration, consent, code exchange with PKCE, refresh with rotation, revocation and MCP calls', async () => {
    const world = createTestWorld();
    const registered = await world.fetch('https://auth.example.test/oauth/register', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        redirect_uris: ['https://app.example/callback'],
        token_endpoint_auth_method: 'client_secret_post',
      }),
    });
    expect(registered.status).toBe(201);
    const client = (await registered.json()) as { client_id: string; client_secret: string };
    const verifier = 'v'.repeat(43);
    const challenge = await s256(verifier);
    const authorize = new URL('https://auth.example.test/oauth/authorize');
    for (const [k, v] of Object.entries({
      response_type: 'code',
      client_id: client.client_id,
      redirect_uri: 'https://app.example/callback',
      state: 's1',
      code_challenge: challenge,
      code_challenge_method: 'S256',
      resource: world.resourceUrl,
      scope: 'read',
    })) {
      authorize.searchParams.set(k, v);
    }
    const back = new URL(world.consent(authorize.href));
    expect(back.searchParams.get('state')).toBe('s1');
    expect(back.searchParams.get('iss')).toBe('https://auth.example.test');
    const form = (entries: Record<string, string>) => ({
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        client_id: client.client_id,
        client_secret: client.client_secret,
        ...entries,
      }).toString(),
    });
    const exchanged = await world.fetch(
      'https://auth.example.test/oauth/token',
      form({
        grant_type: 'authorization_code',
        code: back.searchParams.get('code') as string,
        redirect_uri: 'https://app.example/callback',
        code_verifier: verifier,
        resource: world.resourceUrl,
      }),
    );
    const tokens = (await exchanged.json()) as {
      access_token: string;
      refresh_token: string;
      scope: string;
    };
    expect(tokens.scope).toBe('read');
    expect(world.isValidAccessToken(tokens.access_token)).toBe(true);

    const call = await world.fetch(world.resourceUrl, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${tokens.access_token}`,
        'content-type': 'application/json',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 2,
        method: 'tools/call',
        params: { name: 'echo', arguments: { a: 1 } },
      }),
    });
    expect(await call.json()).toEqual({
      jsonrpc: '2.0',
      id: 2,
      result: { content: [{ type: 'text', text: '{"a":1}' }] },
    });

    const refreshed = (await (
      await world.fetch(
        'https://auth.example.test/oauth/token',
        form({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token }),
      )
    ).json()) as { refresh_token: string };
    expect(refreshed.refresh_token).not.toBe(tokens.refresh_token);
    const replay = await world.fetch(
      'https://auth.example.test/oauth/token',
      form({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token }),
    );
    expect(replay.status).toBe(400);
    expect((await replay.json()).error).toBe('invalid_grant');

    await world.fetch(
      'https://auth.example.test/oauth/revoke',
      form({ token: tokens.access_token }),
    );
    expect(world.isValidAccessToken(tokens.access_token)).toBe(false);
    expect(world.stats).toMatchObject({
      registrations: 1,
      codeExchanges: 1,
      refreshes: 2,
      revocations: 1,
      mcpCalls: 1,
    });
  });

  it('denies consent with access_denied and refuses a second use of a code', () => {
    const world = createTestWorld();
    const client = world.preregister({ redirect_uris: ['https://app.example/cb'] });
    const url = `https://auth.example.test/oauth/authorize?response_type=code&client_id=${client.client_id}&redirect_uri=${encodeURIComponent('https://app.example/cb')}&state=x&code_challenge=abc&code_challenge_method=S256`;
    expect(new URL(world.consent(url, 'deny')).searchParams.get('error')).toBe('access_denied');
    const plain = url.replace('code_challenge_method=S256', 'code_challenge_method=plain');
    expect(new URL(world.consent(plain)).searchParams.get('error')).toBe('invalid_request');
  });

  it('injects failures: 5xx, malformed JSON, oversized bodies and timeouts', async () => {
    const world = createTestWorld({
      metadataLocation: 'root',
      failures: {
        resource_metadata: 'server_error',
        authorization_server_metadata: 'malformed_json',
        token: 'oversized',
        registration: 'timeout',
      },
    });
    expect(
      (await world.fetch('https://mcp.example.test/.well-known/oauth-protected-resource')).status,
    ).toBe(500);
    await expect(
      (
        await world.fetch('https://auth.example.test/.well-known/oauth-authorization-server')
      ).json(),
    ).rejects.toThrow();
    const big = await world.fetch('https://auth.example.test/oauth/token', {
      method: 'POST',
      body: '',
    });
    expect((await big.text()).length).toBeGreaterThan(2 * 1024 * 1024);
    const controller = new AbortController();
    const pending = world.fetch('https://auth.example.test/oauth/register', {
      method: 'POST',
      body: '{}',
      signal: controller.signal,
    });
    controller.abort(new Error('gave up'));
    await expect(pending).rejects.toThrow('gave up');
  });

  it('serves a classic API and an after-connect answer to valid access tokens only', async () => {
    const world = createTestWorld({
      dynamicRegistration: false,
      classic: {
        pkce: 'ignored',
        apiBase: 'https://api.example.test/v1/',
        afterConnect: { url: 'https://api.example.test/sites', answer: [{ id: 'site-1' }] },
      },
    });
    const client = world.preregister({
      client_id: 'app',
      client_secret: 'app-secret-0123456789',
      redirect_uris: ['https://app.example/cb'],
      token_endpoint_auth_method: 'client_secret_post',
    });
    const authorize = `https://auth.example.test/oauth/authorize?response_type=code&client_id=${client.client_id}&redirect_uri=${encodeURIComponent('https://app.example/cb')}&state=s`;
    const code = new URL(world.consent(authorize)).searchParams.get('code') as string;
    const exchanged = await world.fetch('https://auth.example.test/oauth/token', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'authorization_code',
        code,
        redirect_uri: 'https://app.example/cb',
        client_id: client.client_id,
        client_secret: client.client_secret as string,
      }).toString(),
    });
    expect(exchanged.status).toBe(200);
    const { access_token: token } = (await exchanged.json()) as { access_token: string };
    const bearer = { authorization: `Bearer ${token}` };

    const echoed = await world.fetch('https://api.example.test/v1/items/7?x=1', {
      method: 'PUT',
      headers: { ...bearer, 'content-type': 'text/plain', 'x-trace': 't1' },
      body: 'hello',
    });
    expect(echoed.status).toBe(200);
    expect(await echoed.json()).toEqual({
      method: 'PUT',
      url: 'https://api.example.test/v1/items/7?x=1',
      headers: { 'content-type': 'text/plain', 'x-trace': 't1' },
      body: 'hello',
    });
    const sites = await world.fetch('https://api.example.test/sites', { headers: bearer });
    expect(await sites.json()).toEqual([{ id: 'site-1' }]);
    expect(world.stats.apiCalls).toBe(2);

    for (const url of ['https://api.example.test/v1/items', 'https://api.example.test/sites']) {
      const refused = await world.fetch(url, { headers: { authorization: 'Bearer nope' } });
      expect(refused.status).toBe(401);
      expect(refused.headers.get('www-authenticate')).toBe('Bearer error="invalid_token"');
    }
    // Beside the base: not the API's.
    expect((await world.fetch('https://api.example.test/v10', { headers: bearer })).status).toBe(
      404,
    );
    expect(world.stats.apiCalls).toBe(2);
  });
});
