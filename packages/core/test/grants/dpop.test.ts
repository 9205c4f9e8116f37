import { createHash } from 'node:crypto';
import { memoryStorage } from '@keyway/store-memory';
import { createTestWorld } from '@keyway/testing';
import { describe, expect, it } from 'vitest';
import type { Broker } from '../../src/broker/broker.js';
import type { ProviderInput } from '../../src/contract/schemas.js';
import { answerOf, BASE, brokerPerTest, ROOT, refusal } from '../support/spec.js';

/*
 * DPoP (docs/api.md §14; RFC 9449; SEP-1932): an inject-only provider whose authorization
 * server takes ES256 proofs gets a key pair per connection; every token request and every request that
 * presents the token carries a fresh proof (`ath` for the token), a server nonce is
 * retried once, and the token is never handed out. The servers are @keyway/testing's, with
 * the DPoP checks of RFC 9449 §4.3 and §7 in front of them here.
 */

const CONNECTION = 'acme/users/alice/linear';
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
async function expectNoHandOut(broker: Broker): Promise<void> {
  const handOut = await refusal(broker.connections.credentials(ROOT, CONNECTION));
  expect(handOut.status).toBe(403);
  expect(handOut.code).toBe('credentials_not_exportable');
}

/** A JSON-RPC request to the gateway, as an MCP client sends it. */
function mcpCall(broker: Broker) {
  return broker.gateway
    .mcp(
      ROOT,
      CONNECTION,
      new Request(`${BASE}/mcp/${CONNECTION}`, {
        method: 'POST',
        headers: { ...ACCEPT, 'content-type': 'application/json' },
        body: JSON.stringify(RPC),
      }),
    )
    .then(answerOf);
}

/** `tools/list` through the gateway, answered 200. */
async function listThroughGateway(broker: Broker) {
  const listed = await mcpCall(broker);
  expect(listed.status, listed.text).toBe(200);
  return listed;
}

describe('DPoP-bound connections', () => {
  const spec = brokerPerTest();

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
    const broker = spec.open(memoryStorage(), {
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
    const put = await broker.providers.put(ROOT, 'acme/linear', {
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
    });
    expect(put.created).toBe(true);
    const started = await broker.connections.start(ROOT, 'acme/linear', {
      connection_id: CONNECTION,
    });
    if (own) {
      expect(started).toMatchObject({ connection_id: CONNECTION, status: 'active' });
      return { world, seen, servers, tokenEndpoint, broker };
    }
    if (!('authorization_url' in started)) throw new Error('expected an authorization URL');
    const back = new URL(world.consent(started.authorization_url));
    const done = await broker.connections.callback(back);
    expect(done.status).toBe('active');
    return { world, seen, servers, tokenEndpoint, broker };
  }

  it('binds the tokens to a key of the connection, proves it on every request, and never hands them out', async () => {
    const { seen, servers, tokenEndpoint, world, broker } = await setUp();
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
    const view = await broker.connections.get(ROOT, CONNECTION);
    expect(view.status).toBe('active');

    await expectNoHandOut(broker);

    // Through the gateway: `DPoP <token>`, a proof with `ath`, the resource's nonce retried once.
    const listed = await listThroughGateway(broker);
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
    await mcpCall(broker);
    expect(seen.mcp).toHaveLength(3);
    expect(new Set(seen.mcp.map(({ proof }) => proof.claims.jti)).size).toBe(3);
    // The probe presents the token the same way.
    const probe = await broker.connections.probe(ROOT, CONNECTION);
    expect(probe.steps.at(-1)?.ok).toBe(true);
    expect(probe.ok).toBe(true);
    expect(seen.mcp.length).toBeGreaterThan(3);
    expect(
      seen.mcp.every(({ proof, token }) => proof.valid && proof.claims.ath === ath(token)),
    ).toBe(true);
  });

  it('binds the tokens of the client credentials grant too, renewed with the same key', async () => {
    const { seen, servers, world, broker } = await setUp(false, 'client_credentials');
    expect(seen.token).toHaveLength(2);
    expect(seen.token[1]).toMatchObject({
      valid: true,
      claims: { htm: 'POST', nonce: servers.asNonce },
    });
    await listThroughGateway(broker);
    expect(seen.mcp.at(-1)?.proof.header.jwk).toEqual(seen.token[0]?.header.jwk);
    // The server refuses the token once: it is obtained again, proved with the same key.
    servers.rsRefuseOnce = true;
    const again = await mcpCall(broker);
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
    const { seen, servers, world, broker } = await setUp(false, 'consent', {
      advertise: false,
      dpop: true,
    });
    const provider = await broker.providers.get(ROOT, 'acme/linear');
    expect(provider).toMatchObject({ dpop: true, hand_out: false });
    expect(provider.authorization_server).not.toHaveProperty('dpop_signing_alg_values_supported');
    // The code exchange proved the key, the nonce retried once.
    expect(seen.token).toHaveLength(2);
    expect(seen.token.every((proof) => proof.valid)).toBe(true);
    expect(seen.token[1]?.claims.nonce).toBe(servers.asNonce);
    await expectNoHandOut(broker);
    await listThroughGateway(broker);
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
    const broker = spec.open(memoryStorage(), { fetch: (input, init) => world.fetch(input, init) });
    // What a caller sends, checked by the broker: not always a valid provider.
    const body = (extra: Record<string, unknown>) =>
      ({
        template: 'mcp',
        configuration: { resource_url: world.resourceUrl },
        ...extra,
      }) as ProviderInput;
    const both = await refusal(
      broker.providers.put(ROOT, 'acme/linear', body({ dpop: true, hand_out: true })),
    );
    expect(both.status).toBe(400);
    expect(both.toJSON()).toMatchObject({
      error: 'invalid_request',
      details: [
        {
          path: 'dpop',
          message: '"dpop": true makes the provider inject-only: leave out "hand_out"',
        },
      ],
    });
    const rsa = await refusal(broker.providers.put(ROOT, 'acme/linear', body({ dpop: true })));
    expect(rsa.status).toBe(400);
    expect(rsa.details).toEqual([
      {
        path: 'dpop',
        message:
          'the authorization server takes DPoP proofs signed with RS256, PS256, not ES256, the one Keyway signs with',
      },
    ]);
    expect((await refusal(broker.providers.get(ROOT, 'acme/linear'))).status).toBe(404);
    // Not for a classic API: the API proxy sends its tokens as Bearer tokens.
    const classic = await refusal(
      broker.providers.put(ROOT, 'acme/github', {
        template: 'oauth2',
        profile: 'github',
        dpop: true,
        credentials: { client_id: 'gh', client_secret: 'gh-secret-0123456789' },
      } as ProviderInput),
    );
    expect(classic.status).toBe(400);
    expect(classic.details).toEqual([{ path: '', message: 'Unrecognized key: "dpop"' }]);
    // Without it, the provider is made: Bearer tokens, as the server's algorithms allow no DPoP.
    const plain = await broker.providers.put(ROOT, 'acme/linear', body({}));
    expect(plain.created).toBe(true);
    expect(plain.provider).toMatchObject({ dpop: false, hand_out: true });
  });

  it('keeps Bearer tokens for a provider whose tokens are handed out', async () => {
    const { seen, world, broker } = await setUp(true);
    expect(seen.token).toEqual([]);
    expect(world.tokenRequests).toHaveLength(1);
    const handOut = await broker.connections.credentials(ROOT, CONNECTION);
    expect(handOut.connection_id).toBe(CONNECTION);
    expect(handOut.token_type).toBe('Bearer');
    expect(world.isValidAccessToken(handOut.access_token)).toBe(true);
  });

  it('retries a nonce challenge once per token, never more', async () => {
    const { seen, servers, broker } = await setUp();
    servers.rsAlwaysNonce = true;
    const refused = await mcpCall(broker);
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
