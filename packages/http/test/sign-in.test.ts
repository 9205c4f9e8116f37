import { createHash } from 'node:crypto';
import { memoryStorage } from '@keyway/store-memory';
import { describe, expect, it } from 'vitest';
import { createHandler } from '../src/index.js';
import { Harness, harnessPerTest, initializeMessage, ROOT_KEY } from './harness.js';

/*
 * Sign-in for MCP clients on the wire (docs/api.md §17): the well-known documents at the
 * origin's root whatever the base path, the MCP endpoint's challenge naming its metadata,
 * the pages' headers and cookie, forms that work only with that cookie, and the OAuth
 * endpoints' answers. The policy behind them is specified in core/test/sign-in/.
 */

const BASE = 'https://keyway.example.test';
const VERIFIER = 'wire-verifier-of-forty-three-characters-at-least-0';
const CHALLENGE = createHash('sha256').update(VERIFIER).digest('base64url');

describe('sign-in for MCP clients over HTTP', () => {
  const slot = harnessPerTest();

  function harness(signIn = true): Harness {
    const h = new Harness(memoryStorage(), {
      baseUrl: BASE,
      ...(signIn ? { signIn: { methods: ['token'] } } : {}),
    });
    slot.h = h;
    return h;
  }

  /** A request to the handler at an absolute path of the origin. */
  const raw = (h: Harness, path: string, init: RequestInit = {}) =>
    h.handler(new Request(`${BASE}${path}`, init));

  /**
   * A client registered, its user signed in at the pages with a broker token and approving:
   * the client id, the consent page's answer and the approval's.
   */
  async function approvedWith(h: Harness, resource: string, token: string) {
    const registered = await h.call('POST', '/oauth/register', {
      token: null,
      body: { redirect_uris: ['http://127.0.0.1/callback'] },
    });
    const clientId = registered.body.client_id as string;
    const query = new URLSearchParams({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: 'http://127.0.0.1:8123/callback',
      state: 's1',
      code_challenge: CHALLENGE,
      code_challenge_method: 'S256',
      resource,
    });
    const first = await raw(h, `/oauth/authorize?${query}`);
    const cookie = (first.headers.get('set-cookie') ?? '').split(';')[0] as string;
    const post = (fields: Record<string, string>) =>
      raw(h, '/oauth/authorize', {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
        body: new URLSearchParams(fields).toString(),
      });
    const handleOf = async (response: Response) =>
      (await response.text()).match(/name="request" value="([^"]+)"/)?.[1] ?? '';
    const consent = await post({ request: await handleOf(first), action: 'token', token });
    const consentStatus = consent.status;
    const approved = await post({
      request: await handleOf(consent),
      action: 'consent',
      decision: 'approve',
    });
    return { clientId, consentStatus, approved };
  }

  it('serves both metadata documents at the origin’s root, for a base path too', async () => {
    const h = harness();
    const metadata = await raw(h, '/.well-known/oauth-authorization-server');
    expect(metadata.status).toBe(200);
    expect(metadata.headers.get('cache-control')).toBe('public, max-age=300');
    expect(metadata.headers.get('access-control-allow-origin')).toBe('*');
    expect(await metadata.json()).toEqual({
      issuer: BASE,
      authorization_endpoint: `${BASE}/oauth/authorize`,
      token_endpoint: `${BASE}/oauth/token`,
      registration_endpoint: `${BASE}/oauth/register`,
      revocation_endpoint: `${BASE}/oauth/revoke`,
      response_types_supported: ['code'],
      response_modes_supported: ['query'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: ['none'],
      revocation_endpoint_auth_methods_supported: ['none'],
      client_id_metadata_document_supported: true,
      authorization_response_iss_parameter_supported: true,
    });
    const resource = await raw(
      h,
      '/.well-known/oauth-protected-resource/mcp/acme/users/alice/linear',
    );
    expect(await resource.json()).toEqual({
      resource: `${BASE}/mcp/acme/users/alice/linear`,
      authorization_servers: [BASE],
      bearer_methods_supported: ['header'],
    });
    expect((await raw(h, '/.well-known/oauth-protected-resource/mcp/a%2Fb')).status).toBe(400);
    expect(
      (await raw(h, '/.well-known/oauth-authorization-server', { method: 'POST' })).status,
    ).toBe(405);

    // Mounted under /keyway: the documents stay at the root, path-inserted.
    const mounted = new Harness(memoryStorage(), {
      baseUrl: `${BASE}/keyway`,
      signIn: { methods: ['token'] },
    });
    const handler = createHandler(mounted.broker, { basePath: '/keyway' });
    try {
      const inserted = await handler(
        new Request(`${BASE}/.well-known/oauth-authorization-server/keyway`),
      );
      expect(((await inserted.json()) as { token_endpoint: string }).token_endpoint).toBe(
        `${BASE}/keyway/oauth/token`,
      );
      const protectedResource = await handler(
        new Request(
          `${BASE}/.well-known/oauth-protected-resource/keyway/mcp/acme/users/alice/linear`,
        ),
      );
      expect(((await protectedResource.json()) as { resource: string }).resource).toBe(
        `${BASE}/keyway/mcp/acme/users/alice/linear`,
      );
      // Not this issuer's document: no route, so a credential is asked for first (§1.2).
      expect(
        (await handler(new Request(`${BASE}/.well-known/oauth-authorization-server`))).status,
      ).toBe(401);
    } finally {
      await mounted.broker.close();
    }
  });

  it('names the endpoint’s metadata in its 401 challenge, and nothing changes without sign-in', async () => {
    const h = harness();
    const unauthenticated = await raw(h, '/mcp/acme/users/alice/linear', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
    });
    expect(unauthenticated.status).toBe(401);
    expect(unauthenticated.headers.get('www-authenticate')).toBe(
      `Bearer realm="keyway", resource_metadata="${BASE}/.well-known/oauth-protected-resource/mcp/acme/users/alice/linear"`,
    );
    // The API's own routes keep their challenge.
    const api = await h.call('GET', '/api/admin/tokens', { token: null });
    expect(api.headers.get('www-authenticate')).toBe('Bearer realm="keyway"');

    const off = harness(false);
    const plain = await raw(off, '/mcp/acme/users/alice/linear', { method: 'POST' });
    expect(plain.headers.get('www-authenticate')).toBe('Bearer realm="keyway"');
    for (const path of ['/oauth/authorize', '/oauth/token']) {
      const answer = await raw(off, path, path === '/oauth/token' ? { method: 'POST' } : {});
      expect(answer.status, path).toBe(404);
      expect(((await answer.json()) as { error_description: string }).error_description).toBe(
        'sign-in for MCP clients is not turned on',
      );
    }
    // No document without sign-in: the path is no route, which asks for a credential first.
    expect((await raw(off, '/.well-known/oauth-authorization-server')).status).toBe(401);
  });

  it('answers pages that cannot be framed or cached, with a short-lived HttpOnly binding cookie', async () => {
    const h = harness();
    const registered = await h.call('POST', '/oauth/register', {
      token: null,
      body: { client_name: 'Wire <b>Client</b>', redirect_uris: ['http://127.0.0.1/callback'] },
    });
    expect(registered.status).toBe(201);
    expect(registered.headers.get('cache-control')).toBe('no-store');
    const query = new URLSearchParams({
      response_type: 'code',
      client_id: registered.body.client_id,
      redirect_uri: 'http://127.0.0.1:8123/callback',
      state: 's1',
      code_challenge: CHALLENGE,
      code_challenge_method: 'S256',
      resource: `${BASE}/mcp/acme/users/alice/linear`,
    });
    const page = await raw(h, `/oauth/authorize?${query}`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('content-security-policy')).toBe(
      "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
    );
    expect(page.headers.get('x-frame-options')).toBe('DENY');
    expect(page.headers.get('cache-control')).toBe('no-store');
    expect(page.headers.get('referrer-policy')).toBe('no-referrer');
    const cookie = page.headers.get('set-cookie') ?? '';
    expect(cookie).toMatch(
      /^__Host-keyway-sign-in=[A-Za-z0-9_-]{43}; Path=\/; Max-Age=600; HttpOnly; SameSite=Lax; Secure$/,
    );
    const html = await page.text();
    // The client's name is its own words, escaped.
    expect(html).toContain('Wire &lt;b&gt;Client&lt;/b&gt;');
    expect(html).not.toContain('<b>Client</b>');
    const handle = html.match(/name="request" value="([^"]+)"/)?.[1] ?? '';
    expect(handle).toMatch(/^kwq_/);

    // Posted from another site (no cookie): a page saying to start again, and the handle is spent.
    const alice = await h.mint('alice', ['acme/users/alice']);
    const form = new URLSearchParams({ request: handle, action: 'token', token: alice });
    const foreign = await raw(h, '/oauth/authorize', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: form.toString(),
    });
    expect(foreign.status).toBe(400);
    expect(await foreign.text()).toContain('Start again');
    const late = await raw(h, '/oauth/authorize', {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        cookie: cookie.split(';')[0] as string,
      },
      body: form.toString(),
    });
    expect(late.status).toBe(400);
  });

  it('walks the pages with the cookie, redirects with 303, and answers the token endpoint as RFC 6749 says', async () => {
    const h = harness();
    const alice = await h.mint('alice', ['acme/users/alice']);
    const { clientId, consentStatus, approved } = await approvedWith(
      h,
      `${BASE}/mcp/acme/users/alice/linear`,
      alice,
    );
    expect(consentStatus).toBe(200);
    expect(approved.status).toBe(303);
    const location = new URL(approved.headers.get('location') ?? '');
    expect(location.searchParams.get('iss')).toBe(BASE);
    const token = (fields: Record<string, string>) =>
      raw(h, '/oauth/token', {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(fields).toString(),
      });
    const answer = await token({
      grant_type: 'authorization_code',
      code: location.searchParams.get('code') ?? '',
      redirect_uri: 'http://127.0.0.1:8123/callback',
      client_id: clientId,
      code_verifier: VERIFIER,
    });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('cache-control')).toBe('no-store');
    expect(answer.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const tokens = (await answer.json()) as Record<string, unknown>;
    expect(Object.keys(tokens).sort()).toEqual([
      'access_token',
      'expires_in',
      'refresh_token',
      'token_type',
    ]);

    // The access token at its endpoint: past authentication (the connection does not exist).
    const used = await raw(h, '/mcp/acme/users/alice/linear', {
      method: 'POST',
      headers: {
        authorization: `Bearer ${tokens.access_token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
    });
    expect(used.status).toBe(404);
    // At the API: no credential at all.
    const api = await h.call('GET', '/api/admin/tokens', { token: tokens.access_token as string });
    expect(api.status).toBe(401);
    expect(api.body).toEqual({
      error: 'invalid_token',
      error_description: 'the token is for another resource',
    });

    const cases: [Record<string, string>, number, Record<string, string>][] = [
      [{ grant_type: 'password', client_id: clientId }, 400, { error: 'unsupported_grant_type' }],
      [
        { grant_type: 'refresh_token', refresh_token: 'kwr_unknown', client_id: clientId },
        400,
        { error: 'invalid_grant' },
      ],
      [{ grant_type: 'refresh_token', refresh_token: 'kwr_x' }, 401, { error: 'invalid_client' }],
    ];
    for (const [fields, status, body] of cases) {
      const refused = await token(fields);
      expect(refused.status, JSON.stringify(fields)).toBe(status);
      expect(await refused.json()).toMatchObject(body);
      expect(refused.headers.get('cache-control')).toBe('no-store');
    }
    const twice = await raw(h, '/oauth/token', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `grant_type=refresh_token&grant_type=authorization_code&client_id=${clientId}`,
    });
    expect(await twice.json()).toEqual({
      error: 'invalid_request',
      error_description: '"grant_type" is given twice',
    });
    const json = await raw(h, '/oauth/token', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(json.status).toBe(415);

    // Revocation answers 200 whatever it is given; the grant is gone after.
    const revoked = await raw(h, '/oauth/revoke', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        token: tokens.refresh_token as string,
        client_id: clientId,
      }).toString(),
    });
    expect(revoked.status).toBe(200);
    const nonsense = await raw(h, '/oauth/revoke', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'token=nonsense',
    });
    expect(nonsense.status).toBe(200);
    expect((await h.call('GET', '/api/admin/grants')).body).toEqual({
      items: [],
      next_cursor: null,
    });
  });

  it('signs a client in to a portal: its token works there and nowhere else, with the tools of the token that signed in', async () => {
    const h = harness();
    const portal = `${BASE}/portal/acme/users/alice`;
    // Without a credential, the portal's challenge names the portal's own metadata.
    const challenged = await raw(h, '/portal/acme/users/alice', { method: 'POST' });
    expect(challenged.status).toBe(401);
    expect(challenged.headers.get('www-authenticate')).toBe(
      `Bearer realm="keyway", resource_metadata="${BASE}/.well-known/oauth-protected-resource/portal/acme/users/alice"`,
    );
    const metadata = await raw(h, '/.well-known/oauth-protected-resource/portal/acme/users/alice');
    expect(await metadata.json()).toEqual({
      resource: portal,
      authorization_servers: [BASE],
      bearer_methods_supported: ['header'],
    });
    const minted = await h.call('POST', '/api/admin/tokens', {
      body: { name: 'alice', scopes: ['acme/users/alice'], tools: ['linear__*'] },
    });
    const { clientId, consentStatus, approved } = await approvedWith(
      h,
      portal,
      minted.body.access_token as string,
    );
    expect(consentStatus).toBe(200);
    const location = new URL(approved.headers.get('location') ?? '');
    const answer = await raw(h, '/oauth/token', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'authorization_code',
        code: location.searchParams.get('code') ?? '',
        redirect_uri: 'http://127.0.0.1:8123/callback',
        client_id: clientId,
        code_verifier: VERIFIER,
      }).toString(),
    });
    expect(answer.status).toBe(200);
    const { access_token: accessToken } = (await answer.json()) as { access_token: string };
    const initialize = JSON.stringify(initializeMessage('t'));
    const at = (path: string) =>
      raw(h, path, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${accessToken}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: initialize,
      });
    const opened = await at('/portal/acme/users/alice');
    expect(opened.status).toBe(200);
    expect(opened.headers.get('mcp-session-id')).toMatch(/^[A-Za-z0-9_-]{32}$/);
    // Another portal, a connection's endpoint below it, the API: another resource each.
    for (const path of [
      '/portal/acme/users',
      '/mcp/acme/users/alice/linear',
      '/api/admin/tokens',
    ]) {
      const refused = path.startsWith('/api')
        ? await raw(h, path, { headers: { authorization: `Bearer ${accessToken}` } })
        : await at(path);
      expect(refused.status, path).toBe(401);
      expect((await refused.json()).error_description, path).toBe(
        'the token is for another resource',
      );
    }
    // The grant's tokens carry the globs of the token that signed in.
    const tokens = await h.call('GET', '/api/admin/tokens?limit=50');
    const delegated = (tokens.body.items as { name: string; tools?: string[] }[]).filter((token) =>
      token.name.startsWith('alice.signin-'),
    );
    expect(delegated.length).toBe(2);
    expect(delegated.map((token) => token.tools)).toEqual([['linear__*'], ['linear__*']]);
  });

  it('lists and revokes grants for the root key and the token that signed in, nobody else', async () => {
    const h = harness();
    const registered = await h.call('POST', '/oauth/register', {
      token: null,
      body: { redirect_uris: ['http://127.0.0.1/callback'] },
    });
    const alice = await h.mint('alice', ['acme/users/alice']);
    const bob = await h.mint('bob', ['acme/users/bob']);
    // A grant through the core flow (its wire is the test above).
    const signIn = h.broker.signIn;
    const first = await signIn.authorize(
      new URLSearchParams({
        response_type: 'code',
        client_id: registered.body.client_id,
        redirect_uri: 'http://127.0.0.1/callback',
        code_challenge: CHALLENGE,
        code_challenge_method: 'S256',
        resource: `${BASE}/mcp/acme/users/alice/linear`,
      }),
      null,
    );
    if (first.step.kind !== 'sign_in' || first.binding === null) throw new Error('no page');
    const consent = await signIn.signInWithToken(first.step.request, alice, first.binding, null);
    if (consent.step.kind !== 'consent') throw new Error('no consent');
    const done = await signIn.decide(consent.step.request, 'approve', first.binding);
    if (done.step.kind !== 'redirect') throw new Error('no redirect');
    await signIn.token(
      new URLSearchParams({
        grant_type: 'authorization_code',
        code: new URL(done.step.location).searchParams.get('code') ?? '',
        redirect_uri: 'http://127.0.0.1/callback',
        client_id: registered.body.client_id,
        code_verifier: VERIFIER,
      }),
    );
    const asRoot = await h.call('GET', '/api/admin/grants', { token: ROOT_KEY });
    expect(asRoot.body.items).toHaveLength(1);
    const id = asRoot.body.items[0].id as string;
    expect((await h.call('GET', '/api/admin/grants', { token: alice })).body.items).toHaveLength(1);
    expect((await h.call('GET', '/api/admin/grants', { token: bob })).body.items).toEqual([]);
    const refused = await h.call('DELETE', `/api/admin/grants/${id}`, { token: bob });
    expect(refused.status).toBe(404);
    expect(refused.body.error).toBe('not_found');
    const gone = await h.call('DELETE', `/api/admin/grants/${id}`, { token: alice });
    expect(gone.status).toBe(204);
    expect((await h.call('GET', '/api/admin/grants', { token: ROOT_KEY })).body.items).toEqual([]);
  });
});
