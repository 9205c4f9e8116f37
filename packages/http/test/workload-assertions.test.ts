import { memoryStorage } from '@keyway/store-memory';
import { es256Signer } from '@keyway/test-support/jwt-signer';
import { createTestWorld } from '@keyway/testing';
import { describe, expect, it } from 'vitest';
import { Harness, harnessPerTest, ROOT_KEY } from './harness.js';

/*
 * A workload's JWT goes only where the operator meant it to (docs/api.md §14, docs/security.md
 * "provider managers"): a source serves the providers the operator bound it to (and those
 * the root key writes), and an assertion is sent only to the server its `aud` names. Each
 * attack was written first: a token scoped to its own subtree created a `jwt_bearer` provider
 * naming any source and pointing at its own authorization server, which received the JWT.
 */

const BASE = 'https://keyway.example.test';
const WORKLOAD_ISSUER = 'https://idp.example.test';
const GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const EVIL_ISSUER = 'https://evil-as.example.test';

describe('workload assertions go only to bound providers and to their audience', () => {
  const slot = harnessPerTest();

  async function setUp() {
    const signer = await es256Signer();
    const honest = createTestWorld({
      now: () => Date.now(),
      dynamicRegistration: false,
      jwtBearer: { issuer: WORKLOAD_ISSUER, publicJwk: signer.publicJwk },
    });
    // The attacker's own MCP server and authorization server, which accept anything.
    const evil = createTestWorld({
      now: () => Date.now(),
      issuer: EVIL_ISSUER,
      resourceUrl: 'https://evil-mcp.example.test/mcp',
      dynamicRegistration: false,
      jwtBearer: { issuer: WORKLOAD_ISSUER, publicJwk: signer.publicJwk },
    });
    for (const world of [honest, evil]) {
      world.preregister({
        client_id: 'workload',
        token_endpoint_auth_method: 'none',
        grant_types: [GRANT],
        redirect_uris: [],
      });
    }
    const now = Math.floor(Date.now() / 1000);
    // The workload's JWT is for the honest server: its `aud` names that issuer.
    const jwt = await signer.sign({
      iss: WORKLOAD_ISSUER,
      sub: 'system:serviceaccount:acme:billing',
      aud: honest.issuer,
      iat: now,
      exp: now + 600,
    });
    const h = new Harness(memoryStorage(), {
      baseUrl: BASE,
      providerManagement: true,
      now: () => Date.now(),
      fetch: (input, init) => {
        const url = typeof input === 'string' ? input : String(input);
        return url.includes('evil') ? evil.fetch(input, init) : honest.fetch(input, init);
      },
      assertionSources: {
        unbound: { read: () => jwt },
        team: { read: () => jwt, providers: ['acme/team'] },
      },
    });
    slot.h = h;
    const tenant = await h.mint('team', ['acme/team']);
    return { h, honest, evil, jwt, tenant };
  }

  const put = (h: Harness, token: string, id: string, resourceUrl: string, source: string) =>
    h.call('PUT', `/api/admin/providers/${id}`, {
      token,
      body: {
        template: 'mcp',
        configuration: { resource_url: resourceUrl },
        credentials: { mode: 'jwt_bearer', client_id: 'workload', assertion_source: source },
      },
    });

  it('refuses a source the operator did not bind to the provider, to any broker token', async () => {
    const { h, evil, tenant } = await setUp();
    const refused = await put(h, tenant, 'acme/team/evil', evil.resourceUrl, 'unbound');
    expect(refused.status).toBe(403);
    expect(refused.body.error).toBe('insufficient_scope');
    expect(refused.body.details).toEqual([
      {
        path: 'credentials.assertion_source',
        message:
          'the assertion source "unbound" is not bound to provider "acme/team/evil": the operator lists the providers each source serves (KEYWAY_ASSERTION_SOURCES), and only the root key may use a source for others',
      },
    ]);
    expect((await h.call('GET', '/api/admin/providers/acme/team/evil')).status).toBe(404);
    // A bound source outside the ids it serves: refused the same way.
    const other = await h.mint('other', ['acme/other']);
    const outside = await put(h, other, 'acme/other/x', evil.resourceUrl, 'team');
    expect(outside.status).toBe(403);
    expect(outside.body.details[0].path).toBe('credentials.assertion_source');
    expect(evil.tokenRequests).toEqual([]);
  });

  it('never sends a workload JWT to a server its aud does not name', async () => {
    const { h, evil, tenant } = await setUp();
    // Bound to the tenant's subtree, but pointed at the attacker's own server.
    const created = await put(h, tenant, 'acme/team/evil', evil.resourceUrl, 'team');
    expect(created.status, created.text).toBe(201);
    const started = await h.call('POST', '/api/oauth/authorize/acme/team/evil', {
      token: tenant,
      body: { connection_id: 'acme/team/conn' },
    });
    expect(started.status).toBe(502);
    expect(started.body.error).toBe('upstream_error');
    expect(started.body.error_description).toBe(
      `the assertion source "team" gave no assertion: its "aud" names neither the authorization server ${EVIL_ISSUER} nor its token endpoint, so it is not sent there`,
    );
    expect(evil.tokenRequests).toEqual([]);
  });

  it('serves a bound provider, and a root-written one from any source, at their audience', async () => {
    const { h, honest, jwt, tenant } = await setUp();
    expect((await put(h, tenant, 'acme/team/billing', honest.resourceUrl, 'team')).status).toBe(
      201,
    );
    const bound = await h.call('POST', '/api/oauth/authorize/acme/team/billing', {
      token: tenant,
      body: { connection_id: 'acme/team/billing-conn' },
    });
    expect(bound.status, bound.text).toBe(201);
    expect(bound.body).toMatchObject({ status: 'active', grant: 'jwt_bearer' });
    expect((await put(h, ROOT_KEY, 'ops/billing', honest.resourceUrl, 'unbound')).status).toBe(201);
    const rooted = await h.call('POST', '/api/oauth/authorize/ops/billing', {
      body: { connection_id: 'ops/billing-conn' },
    });
    expect(rooted.status, rooted.text).toBe(201);
    expect(honest.tokenRequests.map((form) => form.assertion)).toEqual([jwt, jwt]);
    // A broker token that rewrites the root's provider loses the root's say: the unbound
    // source no longer serves it.
    const ops = await h.mint('ops', ['ops']);
    const rewritten = await put(h, ops, 'ops/billing', honest.resourceUrl, 'unbound');
    expect(rewritten.status).toBe(403);
  });
});
