import { createHash } from 'node:crypto';
import { memoryStorage } from '@keyway/store-memory';
import { createTestWorld } from '@keyway/testing';
import { describe, expect, it } from 'vitest';
import { Harness, harnessPerTest } from './harness.js';

/*
 * DPoP (docs/api.md §14; RFC 9449; SEP-1932): an inject-only provider whose authorization
 * server takes ES256 proofs gets a key pair per connection; every token request and every request that
 * presents the token carries a fresh proof (`ath` for the token), a server nonce is
 * retried once, and the token is never handed out. The servers are @keyway/testing's, with
 * the DPoP checks of RFC 9449 §4.3 and §7 in front of them here.
 */

const BASE = 'https://keyway.example.test';
const RPC = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} };
const ACCEPT = { accept: 'application/json, text/event-stream' };

interface Proof {
  header: { typ?: string; alg?: string; jwk?: JsonWebKey };
  claims: { jti?: string; htm?: string; htu?: string; iat?: number; ath?: string; nonce?: string };
  valid: boolean;
}

/** A request's DPoP proof, its signature checked with the key in its header. */
async function proofOf(request: Request): Promise<Proof | null> {
  const proof = request.headers.get('dpop');
  if (proof === null) return null;
  const [head = '', body = '', signature = ''] = proof.split('.');
  const decode = (part: string) => JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
  const header = decode(head) as Proof['header'];
  const key = await crypto.subtle.importKey(
    'jwk',
    header.jwk as JsonWebKey,
    { name: 'ECDSA', namedCurve: 'P-256' },
    false,
    ['verify'],
  );
  const valid = await crypto.subtle.verify(
    { name: 'ECDSA', hash: 'SHA-256' },
    key,
    Buffer.from(signature, 'base64url'),
    new TextEncoder().encode(`${head}.${body}`),
  );
  return { header, claims: decode(body), valid };
}

const ath = (token: string) => createHash('sha256').update(token).digest('base64url');

/** A DPoP-bound token is never answered (docs/api.md §14). */
async function expectNoHandOut(h: Harness): Promise<void> {
  const handOut = await h.call('GET', '/api/oauth/credentials/acme/users/alice/linear');
  expect(handOut.status).toBe(403);
  expect(handOut.body.error).toBe('credentials_not_exportable');
}

/** `tools/list` through the gateway, answered 200. */
async function listThroughGateway(h: Harness) {
  const listed = await h.call('POST', '/mcp/acme/users/alice/linear', {
    body: RPC,
    headers: ACCEPT,
  });
  expect(listed.status, listed.text).toBe(200);
  return listed;
}

describe('DPoP-bound connections', () => {
  const slot = harnessPerTest();

  async function setUp(
    handOut = false,
    mode: 'consent' | 'client_credentials' = 'consent',
    /** `advertise: false`: a server that takes proofs without listing its algorithms. */
    options: { advertise?: boolean; dpop?: boolean } = {},
  ) {
    const world = createTestWorld({
      now: () => Date.now(),
      ...(options.advertise === false
        ? {}
        : { serverMetadataOverrides: { dpop_signing_alg_values_supported: ['ES256'] } }),
    });
    const tokenEndpoint = `${world.issuer}/oauth/token`;
    const seen = { token: [] as Proof[], mcp: [] as { proof: Proof; token: string }[] };
    const servers = {
      asNonce: 'as-nonce-1',
      rsNonce: 'rs-nonce-1',
      rsAlwaysNonce: false,
      rsRefuseOnce: false,
    };
    const h = new Harness(memoryStorage(), {
      baseUrl: BASE,
      providerManagement: true,
      now: () => Date.now(),
      fetch: async (input, init) => {
        const request = new Request(input, init);
        if (
          request.method === 'POST' &&
          request.url === tokenEndpoint &&
          request.headers.has('dpop')
        ) {
          const proof = await proofOf(request);
          seen.token.push(proof as Proof);
          if (proof?.claims.nonce !== servers.asNonce) {
            return Response.json(
              { error: 'use_dpop_nonce' },
              { status: 400, headers: { 'dpop-nonce': servers.asNonce } },
            );
          }
          const answer = (await (await world.fetch(request)).json()) as Record<string, unknown>;
          return Response.json({ ...answer, token_type: 'DPoP' });
        }
        const authorization = request.headers.get('authorization') ?? '';
        if (request.url === world.resourceUrl && authorization.startsWith('DPoP ')) {
          const token = authorization.slice(5);
          const proof = (await proofOf(request)) as Proof;
          seen.mcp.push({ proof, token });
          if (servers.rsAlwaysNonce || proof.claims.nonce !== servers.rsNonce) {
            return Response.json(
              { error: 'use_dpop_nonce' },
              {
                status: 401,
                headers: {
                  'www-authenticate': 'DPoP error="use_dpop_nonce"',
                  'dpop-nonce': servers.rsNonce,
                },
              },
            );
          }
          if (!proof.valid || proof.claims.ath !== ath(token) || servers.rsRefuseOnce) {
            servers.rsRefuseOnce = false;
            return Response.json(
              { error: 'invalid_token' },
              { status: 401, headers: { 'www-authenticate': 'DPoP error="invalid_token"' } },
            );
          }
          const headers = new Headers(request.headers);
          headers.set('authorization', `Bearer ${token}`);
          headers.delete('dpop');
          return world.fetch(new Request(request, { headers }));
        }
        return world.fetch(request);
      },
    });
    slot.h = h;
    const own = mode === 'client_credentials';
    if (own) {
      world.preregister({
        client_id: 'svc',
        client_secret: 'svc-secret-0123456789',
        token_endpoint_auth_method: 'client_secret_basic',
        grant_types: ['client_credentials'],
        redirect_uris: [],
      });
    }
    const put = await h.call('PUT', '/api/admin/providers/acme/linear', {
      body: {
        template: 'mcp',
        configuration: { resource_url: world.resourceUrl },
        ...(options.dpop ? { dpop: true } : handOut ? {} : { hand_out: false }),
        ...(own
          ? {
              credentials: {
                mode: 'client_credentials',
                client_id: 'svc',
                client_secret: 'svc-secret-0123456789',
              },
            }
          : {}),
      },
    });
    expect(put.status, put.text).toBe(201);
    const started = await h.call('POST', '/api/oauth/authorize/acme/linear', {
      body: { connection_id: 'acme/users/alice/linear' },
    });
    if (own) {
      expect(started.status, started.text).toBe(201);
      return { world, seen, servers, tokenEndpoint, h };
    }
    const back = new URL(world.consent(started.body.authorization_url));
    const done = await h.call('GET', `${back.pathname}${back.search}`, { token: null });
    expect(done.status, done.text).toBe(200);
    return { world, seen, servers, tokenEndpoint, h };
  }

  it('binds the tokens to a key of the connection, proves it on every request, and never hands them out', async () => {
    const { seen, servers, tokenEndpoint, world, h } = await setUp();
    // The code exchange: a proof, then the same request again with the server's nonce.
    expect(seen.token).toHaveLength(2);
    const [first, second] = seen.token as [Proof, Proof];
    for (const proof of [first, second]) {
      expect(proof.valid).toBe(true);
      expect(proof.header).toMatchObject({ typ: 'dpop+jwt', alg: 'ES256' });
      expect(proof.header.jwk).not.toHaveProperty('d');
      expect(proof.claims).toMatchObject({ htm: 'POST', htu: tokenEndpoint });
      expect(proof.claims.ath).toBeUndefined();
    }
    expect(first.claims.nonce).toBeUndefined();
    expect(second.claims.nonce).toBe(servers.asNonce);
    expect(first.claims.jti).not.toBe(second.claims.jti);
    const view = await h.call('GET', '/api/oauth/connections/acme/users/alice/linear');
    expect(view.body.status).toBe('active');

    await expectNoHandOut(h);

    // Through the gateway: `DPoP <token>`, a proof with `ath`, the resource's nonce retried once.
    const listed = await listThroughGateway(h);
    expect(listed.body.result.tools[0].name).toBe('echo');
    expect(seen.mcp).toHaveLength(2);
    for (const { proof, token } of seen.mcp) {
      expect(proof.valid).toBe(true);
      expect(proof.claims).toMatchObject({ htm: 'POST', htu: world.resourceUrl, ath: ath(token) });
      expect(proof.header.jwk).toEqual(first.header.jwk);
    }
    expect(seen.mcp[1]?.proof.claims.nonce).toBe(servers.rsNonce);
    expect(listed.text).not.toContain(seen.mcp[0]?.token);
    // The nonce is kept: the next call needs one request.
    await h.call('POST', '/mcp/acme/users/alice/linear', { body: RPC, headers: ACCEPT });
    expect(seen.mcp).toHaveLength(3);
    expect(new Set(seen.mcp.map(({ proof }) => proof.claims.jti)).size).toBe(3);
    // The probe presents the token the same way.
    const probe = await h.call('POST', '/api/oauth/probe/acme/users/alice/linear');
    expect(probe.status, probe.text).toBe(200);
    expect(probe.body.ok).toBe(true);
    expect(seen.mcp.length).toBeGreaterThan(3);
    expect(
      seen.mcp.every(({ proof, token }) => proof.valid && proof.claims.ath === ath(token)),
    ).toBe(true);
  });

  it('binds the tokens of the client credentials grant too, renewed with the same key', async () => {
    const { seen, servers, world, h } = await setUp(false, 'client_credentials');
    expect(seen.token).toHaveLength(2);
    expect(seen.token[1]).toMatchObject({
      valid: true,
      claims: { htm: 'POST', nonce: servers.asNonce },
    });
    await listThroughGateway(h);
    expect(seen.mcp.at(-1)?.proof.header.jwk).toEqual(seen.token[0]?.header.jwk);
    // The server refuses the token once: it is obtained again, proved with the same key.
    servers.rsRefuseOnce = true;
    const again = await h.call('POST', '/mcp/acme/users/alice/linear', {
      body: RPC,
      headers: ACCEPT,
    });
    expect(again.status, again.text).toBe(200);
    expect(
      world.tokenRequests.filter((form) => form.grant_type === 'client_credentials'),
    ).toHaveLength(2);
    expect(seen.token).toHaveLength(3);
    expect(seen.token[2]).toMatchObject({ valid: true, claims: { nonce: servers.asNonce } });
    expect(seen.token[2]?.header.jwk).toEqual(seen.token[0]?.header.jwk);
    const tokens = [...new Set(seen.mcp.map(({ token }) => token))];
    expect(tokens).toHaveLength(2);
  });

  it('binds the tokens where the provider says dpop: true, though the server lists no DPoP algorithm', async () => {
    const { seen, servers, world, h } = await setUp(false, 'consent', {
      advertise: false,
      dpop: true,
    });
    const provider = await h.call('GET', '/api/admin/providers/acme/linear');
    expect(provider.body).toMatchObject({ dpop: true, hand_out: false });
    expect(provider.body.authorization_server.dpop_signing_alg_values_supported ?? null).toBeNull();
    // The code exchange proved the key, the nonce retried once.
    expect(seen.token).toHaveLength(2);
    expect(seen.token.every((proof) => proof.valid)).toBe(true);
    expect(seen.token[1]?.claims.nonce).toBe(servers.asNonce);
    await expectNoHandOut(h);
    await listThroughGateway(h);
    expect(seen.mcp.at(-1)?.proof).toMatchObject({
      valid: true,
      claims: { htm: 'POST', htu: world.resourceUrl },
    });
    expect(seen.mcp.at(-1)?.proof.header.jwk).toEqual(seen.token[0]?.header.jwk);
  });

  it('refuses dpop: true with hand_out: true, and at a server that takes no ES256 proof', async () => {
    const world = createTestWorld({
      serverMetadataOverrides: { dpop_signing_alg_values_supported: ['RS256', 'PS256'] },
    });
    const h = new Harness(memoryStorage(), {
      baseUrl: BASE,
      providerManagement: true,
      fetch: (input, init) => world.fetch(input, init),
    });
    slot.h = h;
    const body = (extra: Record<string, unknown>) => ({
      template: 'mcp',
      configuration: { resource_url: world.resourceUrl },
      ...extra,
    });
    const both = await h.call('PUT', '/api/admin/providers/acme/linear', {
      body: body({ dpop: true, hand_out: true }),
    });
    expect(both.status).toBe(400);
    expect(both.body).toMatchObject({
      error: 'invalid_request',
      details: [
        {
          path: 'dpop',
          message: '"dpop": true makes the provider inject-only: leave out "hand_out"',
        },
      ],
    });
    const rsa = await h.call('PUT', '/api/admin/providers/acme/linear', {
      body: body({ dpop: true }),
    });
    expect(rsa.status).toBe(400);
    expect(rsa.body.details).toEqual([
      {
        path: 'dpop',
        message:
          'the authorization server takes DPoP proofs signed with RS256, PS256, not ES256, the one Keyway signs with',
      },
    ]);
    expect((await h.call('GET', '/api/admin/providers/acme/linear')).status).toBe(404);
    // Not for a classic API: the API proxy sends its tokens as Bearer tokens.
    const classic = await h.call('PUT', '/api/admin/providers/acme/github', {
      body: {
        template: 'oauth2',
        profile: 'github',
        dpop: true,
        credentials: { client_id: 'gh', client_secret: 'gh-secret-0123456789' },
      },
    });
    expect(classic.status).toBe(400);
    expect(classic.body.details).toEqual([{ path: '', message: 'Unrecognized key: "dpop"' }]);
    // Without it, the provider is made: Bearer tokens, as the server's algorithms allow no DPoP.
    const plain = await h.call('PUT', '/api/admin/providers/acme/linear', { body: body({}) });
    expect(plain.status).toBe(201);
    expect(plain.body).toMatchObject({ dpop: false, hand_out: true });
  });

  it('keeps Bearer tokens for a provider whose tokens are handed out', async () => {
    const { seen, world, h } = await setUp(true);
    expect(seen.token).toEqual([]);
    expect(world.tokenRequests).toHaveLength(1);
    const handOut = await h.call('GET', '/api/oauth/credentials/acme/users/alice/linear');
    expect(handOut.status, handOut.text).toBe(200);
    expect(handOut.body.token_type).toBe('Bearer');
    expect(world.isValidAccessToken(handOut.body.access_token)).toBe(true);
  });

  it('retries a nonce challenge once per token, never more', async () => {
    const { seen, servers, h } = await setUp();
    servers.rsAlwaysNonce = true;
    const refused = await h.call('POST', '/mcp/acme/users/alice/linear', {
      body: RPC,
      headers: ACCEPT,
    });
    // The token, then a refreshed one, each sent twice (once with the nonce): then the
    // connection needs consent, which the gateway asks for (URL elicitation).
    expect(refused.status, refused.text).toBe(200);
    expect(refused.body.error.code).toBe(-32042);
    const perToken = [...new Set(seen.mcp.map(({ token }) => token))].map(
      (token) => seen.mcp.filter((sent) => sent.token === token).length,
    );
    expect(perToken).toEqual([2, 2]);
    // The refresh in between proved the key too, with the nonce the server gave before.
    expect(seen.token).toHaveLength(3);
    expect(seen.token[2]).toMatchObject({
      valid: true,
      claims: { htm: 'POST', nonce: servers.asNonce },
    });
  });
});
