import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { memoryStorage } from '@keyway/store-memory';
import { es256Signer } from '@keyway/test-support/jwt-signer';
import { createTestWorld } from '@keyway/testing';
import { afterEach, describe, expect, it } from 'vitest';
import type { Broker } from '../../src/broker/broker.js';
import type { BrokerConfig } from '../../src/broker/config.js';
import type { ProviderInput } from '../../src/contract/schemas.js';
import type { KeywayEvent } from '../../src/index.js';
import { brokerPerTest, ROOT, refusal } from '../support/spec.js';

/*
 * The JWT bearer grant for workload identity (docs/api.md §14; RFC 7523 §2.1; SEP-1933): a
 * provider whose tokens come for the workload's own JWT, read at each token request from
 * a source the operator configured, never kept, never shown.
 */

const WORKLOAD_ISSUER = 'https://idp.example.test';
const GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';

describe('the JWT bearer grant (workload identity)', () => {
  const spec = brokerPerTest();
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
    const events: KeywayEvent[] = [];
    const broker = spec.open(memoryStorage(), {
      fetch: world.fetch,
      now: () => Date.now(),
      assertionSources: {
        app: () => current.jwt,
        projected: { directory },
      },
      onEvent: (event) => {
        events.push(event);
      },
    });
    return { world, token, current, directory, broker, events };
  }

  // What a caller sends, checked by the broker: not always a valid provider.
  const provider = (broker: Broker, world: { resourceUrl: string }, credentials: object) =>
    broker.providers.put(ROOT, 'acme/billing', {
      template: 'mcp',
      configuration: { resource_url: world.resourceUrl },
      credentials: { mode: 'jwt_bearer', client_id: 'workload', ...credentials },
    } as ProviderInput);

  const start = (broker: Broker) =>
    broker.connections.start(ROOT, 'acme/billing', { connection_id: 'acme/services/billing' });

  it('reads the assertion at each token request, sends it once, and never shows it', async () => {
    const { world, token, current, broker, events } = await setUp();
    const put = await provider(broker, world, { assertion_source: 'app' });
    expect(put.created).toBe(true);
    expect(put.provider.credentials).toMatchObject({
      mode: 'jwt_bearer',
      assertion_source: 'app',
      client_id: 'workload',
      token_endpoint_auth_method: 'none',
      client_secret_set: false,
    });
    const started = await start(broker);
    expect(started.connection_id).toBe('acme/services/billing');
    expect(started).toMatchObject({
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
    const forced = await broker.connections.credentials(ROOT, 'acme/services/billing', {
      force_refresh: true,
    });
    expect(forced.connection_id).toBe('acme/services/billing');
    expect(world.isValidAccessToken(forced.access_token)).toBe(true);
    expect(world.tokenRequests.map((form) => form.assertion)).toEqual([first, current.jwt]);
    const everything = [put, started, forced, ...events].map((value) => JSON.stringify(value));
    expect(everything.join('\n')).not.toContain(first.split('.')[2]);
    expect(everything.join('\n')).not.toContain(current.jwt.split('.')[2]);
  });

  it('gives up at the first refusal, without retrying or switching grants', async () => {
    const { world, token, current, broker } = await setUp();
    expect((await provider(broker, world, { assertion_source: 'app' })).created).toBe(true);
    expect((await start(broker)).connection_id).toBe('acme/services/billing');
    // An expired assertion: the server refuses it (one for another audience is never sent).
    current.jwt = await token({ exp: Math.floor(Date.now() / 1000) - 60 });
    const refused = await refusal(
      broker.connections.credentials(ROOT, 'acme/services/billing', { force_refresh: true }),
    );
    expect(refused.status).toBe(409);
    expect(refused.code).toBe('reauthorization_required');
    expect(world.stats.jwtBearerGrants).toBe(2);
    expect(world.tokenRequests.map((form) => form.grant_type)).toEqual([GRANT, GRANT]);
    const view = await broker.connections.get(ROOT, 'acme/services/billing');
    expect(view).toMatchObject({ status: 'error', error: { code: 'invalid_grant' } });
  });

  it('reads a file of a directory source, and says when the source gives nothing', async () => {
    const { world, token, directory, broker } = await setUp();
    expect(
      (
        await provider(broker, world, {
          assertion_source: 'projected',
          assertion_file: 'mcp-token',
        })
      ).created,
    ).toBe(true);
    const missing = await refusal(start(broker));
    expect(missing.status).toBe(502);
    expect(missing.toJSON()).toEqual({
      error: 'upstream_error',
      error_description: 'the assertion source "projected" gave no assertion: it could not be read',
    });
    expect(world.tokenRequests).toEqual([]);
    writeFileSync(join(directory, 'mcp-token'), 'not a jwt\n');
    const garbage = await refusal(start(broker));
    expect(garbage.message).toBe(
      'the assertion source "projected" gave no assertion: it is not a compact JWT',
    );
    expect(world.tokenRequests).toEqual([]);
    const jwt = await token();
    writeFileSync(join(directory, 'mcp-token'), `${jwt}\n`);
    const started = await start(broker);
    expect(started.connection_id).toBe('acme/services/billing');
    expect(world.tokenRequests[0]?.assertion).toBe(jwt);
  });

  it('names the source a provider may use, and nothing else', async () => {
    const { world, broker } = await setUp();
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
      const reply = await refusal(provider(broker, world, credentials));
      expect(reply.status, JSON.stringify(credentials)).toBe(400);
      expect(reply.details?.[0]).toEqual({ path, message });
    }
    const custom = await refusal(
      broker.providers.put(ROOT, 'acme/other', {
        template: 'mcp',
        configuration: { resource_url: world.resourceUrl },
        credentials: { mode: 'custom', client_id: 'workload', assertion_source: 'app' },
      } as ProviderInput),
    );
    expect(custom.status).toBe(400);
    expect(custom.details?.[0]?.path).toBe('credentials.assertion_source');
    expect(() =>
      spec.open(memoryStorage(), {
        assertionSources: { 'Not A Name': { env: 'WORKLOAD_TOKEN' } },
      } as Partial<BrokerConfig>),
    ).toThrow(TypeError);
  });
});
