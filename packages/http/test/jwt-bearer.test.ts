import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { memoryStorage } from '@keyway/store-memory';
import { createTestWorld } from '@keyway/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { Harness, harnessPerTest } from './harness.js';
import { es256Signer } from './jwt-signer.js';

/*
 * The JWT bearer grant for workload identity (docs/api.md §14; RFC 7523 §2.1; SEP-1933): a
 * provider whose tokens come for the workload's own JWT, read at each token request from
 * a source the operator configured, never kept, never shown.
 */

const BASE = 'https://keyway.example.test';
const WORKLOAD_ISSUER = 'https://idp.example.test';
const GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';

describe('the JWT bearer grant (workload identity)', () => {
  const slot = harnessPerTest();
  let directory: string | undefined;
  afterEach(() => {
    if (directory !== undefined) rmSync(directory, { recursive: true, force: true });
  });

  async function setUp() {
    const issuer = await es256Signer();
    const world = createTestWorld({
      now: () => Date.now(),
      dynamicRegistration: false,
      jwtBearer: { issuer: WORKLOAD_ISSUER, publicJwk: issuer.publicJwk },
    });
    world.preregister({
      client_id: 'workload',
      token_endpoint_auth_method: 'none',
      grant_types: [GRANT],
      redirect_uris: [],
    });
    const token = (claims: Record<string, unknown> = {}) =>
      issuer.sign({
        iss: WORKLOAD_ISSUER,
        sub: 'system:serviceaccount:acme:billing',
        aud: world.issuer,
        iat: Math.floor(Date.now() / 1000),
        exp: Math.floor(Date.now() / 1000) + 600,
        ...claims,
      });
    directory = mkdtempSync(join(tmpdir(), 'keyway-wif-'));
    const current = { jwt: await token() };
    const h = new Harness(memoryStorage(), {
      fetch: world.fetch,
      baseUrl: BASE,
      providerManagement: true,
      now: () => Date.now(),
      assertionSources: {
        app: () => current.jwt,
        projected: { directory },
      },
    });
    slot.h = h;
    return { world, token, current, directory, h };
  }

  const provider = (h: Harness, world: { resourceUrl: string }, credentials: object) =>
    h.call('PUT', '/api/admin/providers/acme/billing', {
      body: {
        template: 'mcp',
        configuration: { resource_url: world.resourceUrl },
        credentials: { mode: 'jwt_bearer', client_id: 'workload', ...credentials },
      },
    });

  it('reads the assertion at each token request, sends it once, and never shows it', async () => {
    const { world, token, current, h } = await setUp();
    const put = await provider(h, world, { assertion_source: 'app' });
    expect(put.status, put.text).toBe(201);
    expect(put.body.credentials).toMatchObject({
      mode: 'jwt_bearer',
      assertion_source: 'app',
      client_id: 'workload',
      token_endpoint_auth_method: 'none',
      client_secret_set: false,
    });
    const started = await h.call('POST', '/api/oauth/authorize/acme/billing', {
      body: { connection_id: 'acme/services/billing' },
    });
    expect(started.status, started.text).toBe(201);
    expect(started.body).toMatchObject({
      status: 'active',
      grant: 'jwt_bearer',
      refreshable: true,
    });
    expect(world.tokenRequests).toEqual([
      {
        grant_type: GRANT,
        assertion: current.jwt,
        client_id: 'workload',
        resource: world.resourceUrl,
      },
    ]);
    const first = current.jwt;
    // The source rotates its token (a projected token is renewed): the next request reads it.
    current.jwt = await token({ jti: 'second' });
    const forced = await h.call(
      'GET',
      '/api/oauth/credentials/acme/services/billing?force_refresh=true',
    );
    expect(forced.status, forced.text).toBe(200);
    expect(world.isValidAccessToken(forced.body.access_token)).toBe(true);
    expect(world.tokenRequests.map((form) => form.assertion)).toEqual([first, current.jwt]);
    const everything = [put.text, started.text, forced.text, ...h.requestLog].join('\n');
    expect(everything).not.toContain(first.split('.')[2]);
    expect(everything).not.toContain(current.jwt.split('.')[2]);
  });

  it('gives up at the first refusal, without retrying or switching grants', async () => {
    const { world, token, current, h } = await setUp();
    expect((await provider(h, world, { assertion_source: 'app' })).status).toBe(201);
    expect(
      (
        await h.call('POST', '/api/oauth/authorize/acme/billing', {
          body: { connection_id: 'acme/services/billing' },
        })
      ).status,
    ).toBe(201);
    // An expired assertion: the server refuses it (one for another audience is never sent).
    current.jwt = await token({ exp: Math.floor(Date.now() / 1000) - 60 });
    const refused = await h.call(
      'GET',
      '/api/oauth/credentials/acme/services/billing?force_refresh=true',
    );
    expect(refused.status).toBe(409);
    expect(refused.body.error).toBe('reauthorization_required');
    expect(world.stats.jwtBearerGrants).toBe(2);
    expect(world.tokenRequests.map((form) => form.grant_type)).toEqual([GRANT, GRANT]);
    const view = await h.call('GET', '/api/oauth/connections/acme/services/billing');
    expect(view.body).toMatchObject({ status: 'error', error: { code: 'invalid_grant' } });
  });

  it('reads a file of a directory source, and says when the source gives nothing', async () => {
    const { world, token, directory, h } = await setUp();
    expect(
      (await provider(h, world, { assertion_source: 'projected', assertion_file: 'mcp-token' }))
        .status,
    ).toBe(201);
    const missing = await h.call('POST', '/api/oauth/authorize/acme/billing', {
      body: { connection_id: 'acme/services/billing' },
    });
    expect(missing.status).toBe(502);
    expect(missing.body).toEqual({
      error: 'upstream_error',
      error_description: 'the assertion source "projected" gave no assertion: it could not be read',
    });
    expect(world.tokenRequests).toEqual([]);
    writeFileSync(join(directory, 'mcp-token'), 'not a jwt\n');
    const garbage = await h.call('POST', '/api/oauth/authorize/acme/billing', {
      body: { connection_id: 'acme/services/billing' },
    });
    expect(garbage.body.error_description).toBe(
      'the assertion source "projected" gave no assertion: it is not a compact JWT',
    );
    expect(world.tokenRequests).toEqual([]);
    const jwt = await token();
    writeFileSync(join(directory, 'mcp-token'), `${jwt}\n`);
    const started = await h.call('POST', '/api/oauth/authorize/acme/billing', {
      body: { connection_id: 'acme/services/billing' },
    });
    expect(started.status, started.text).toBe(201);
    expect(world.tokenRequests[0]?.assertion).toBe(jwt);
  });

  it('names the source a provider may use, and nothing else', async () => {
    const { world, h } = await setUp();
    const cases: [object, string, string][] = [
      [
        { assertion_source: 'secrets' },
        'credentials.assertion_source',
        'mode "jwt_bearer" needs "assertion_source", one of the broker\'s assertion sources (the configured ones: app, projected)',
      ],
      [
        {},
        'credentials.assertion_source',
        'mode "jwt_bearer" needs "assertion_source", one of the broker\'s assertion sources (the configured ones: app, projected)',
      ],
      [
        { assertion_source: 'projected', assertion_file: '../keyway.sqlite' },
        'credentials.assertion_file',
        '"assertion_file" is one file name of the source\'s directory',
      ],
      [
        { assertion_source: 'app', client_secret: 'x' },
        'credentials.client_secret',
        'mode "jwt_bearer" authenticates with its assertion, not a secret',
      ],
    ];
    for (const [credentials, path, message] of cases) {
      const reply = await provider(h, world, credentials);
      expect(reply.status, JSON.stringify(credentials)).toBe(400);
      expect(reply.body.details[0]).toEqual({ path, message });
    }
    const custom = await h.call('PUT', '/api/admin/providers/acme/other', {
      body: {
        template: 'mcp',
        configuration: { resource_url: world.resourceUrl },
        credentials: { mode: 'custom', client_id: 'workload', assertion_source: 'app' },
      },
    });
    expect(custom.status).toBe(400);
    expect(custom.body.details[0].path).toBe('credentials.assertion_source');
    expect(
      () =>
        new Harness(memoryStorage(), {
          assertionSources: { 'Not A Name': { env: 'WORKLOAD_TOKEN' } } as never,
        }),
    ).toThrow(TypeError);
  });
});
