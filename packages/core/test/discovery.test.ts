import { createTestWorld, type TestWorldOptions } from '@keyway/testing';
import { describe, expect, it } from 'vitest';
import {
  authorizationServerMetadataUrls,
  discover,
  discoverOrThrow,
  resourceMatches,
  selectScopes,
} from '../src/discovery/index.js';
import { createOutboundFetch } from '../src/outbound/fetch.js';

function setup(options: TestWorldOptions = {}) {
  const world = createTestWorld(options);
  const outbound = createOutboundFetch({ fetch: world.fetch, timeoutMs: 200 });
  return {
    world,
    outbound,
    run: (scopes?: string[]) => discover(outbound, world.resourceUrl, scopes ? { scopes } : {}),
  };
}

const summary = (steps: { step: string; ok: boolean }[]) =>
  steps.map((s) => `${s.step}:${s.ok ? 'ok' : 'fail'}`);

describe('discover(): where the metadata is', () => {
  it('follows resource_metadata from the 401 challenge', async () => {
    const { run, world } = setup({ metadataLocation: 'header' });
    const trace = await run();
    expect(trace.ok).toBe(true);
    expect(trace.resource).toEqual({
      resource: 'https://mcp.example.test/mcp',
      resource_metadata_url: 'https://mcp.example.test/keyway-test/resource-metadata/mcp',
      scopes_supported: null,
      authorization_servers: ['https://auth.example.test'],
    });
    expect(trace.authorization_server).toMatchObject({
      issuer: 'https://auth.example.test',
      authorization_endpoint: 'https://auth.example.test/oauth/authorize',
      token_endpoint: 'https://auth.example.test/oauth/token',
      registration_endpoint: 'https://auth.example.test/oauth/register',
      revocation_endpoint: 'https://auth.example.test/oauth/revoke',
      code_challenge_methods_supported: ['S256'],
    });
    expect(summary(trace.steps)).toEqual([
      'probe:ok',
      'resource_metadata:ok',
      'resource_match:ok',
      'authorization_server_metadata:ok',
      'requirements:ok',
    ]);
    // The probe carried no credential.
    expect(world.stats.probes).toBe(1);
    expect(world.stats.mcpCalls).toBe(0);
  });

  it('falls back to the path-inserted well-known URL', async () => {
    const trace = await setup({ metadataLocation: 'path' }).run();
    expect(trace.ok).toBe(true);
    expect(trace.resource?.resource_metadata_url).toBe(
      'https://mcp.example.test/.well-known/oauth-protected-resource/mcp',
    );
  });

  it('falls back to the root well-known URL after the path-inserted one answers 404', async () => {
    const trace = await setup({ metadataLocation: 'root' }).run();
    expect(trace.ok).toBe(true);
    expect(
      trace.steps.filter((s) => s.step === 'resource_metadata').map((s) => [s.url, s.status]),
    ).toEqual([
      ['https://mcp.example.test/.well-known/oauth-protected-resource/mcp', 404],
      ['https://mcp.example.test/.well-known/oauth-protected-resource', 200],
    ]);
  });

  it('uses a custom metadata URL named in the challenge', async () => {
    const trace = await setup({
      metadataLocation: { url: 'https://meta.example.test/prm.json' },
    }).run();
    expect(trace.resource?.resource_metadata_url).toBe('https://meta.example.test/prm.json');
  });

  it.each([
    ['oauth', 'https://auth.example.test/.well-known/oauth-authorization-server/tenant/1', 1],
    ['openid-inserted', 'https://auth.example.test/.well-known/openid-configuration/tenant/1', 2],
    ['openid-appended', 'https://auth.example.test/tenant/1/.well-known/openid-configuration', 3],
  ] as const)(
    'finds %s metadata of an issuer with a path, in the MCP order',
    async (kind, url, tries) => {
      const trace = await setup({
        issuer: 'https://auth.example.test/tenant/1',
        authorizationServerMetadata: kind,
      }).run();
      expect(trace.ok).toBe(true);
      const as = trace.steps.filter((s) => s.step === 'authorization_server_metadata');
      expect(as).toHaveLength(tries);
      expect(as.at(-1)?.url).toBe(url);
      expect(trace.authorization_server?.issuer).toBe('https://auth.example.test/tenant/1');
    },
  );

  it('finds OpenID-only metadata at the root', async () => {
    const trace = await setup({ authorizationServerMetadata: 'openid-inserted' }).run();
    expect(trace.ok).toBe(true);
    expect(trace.steps.find((s) => s.step === 'authorization_server_metadata' && s.ok)?.url).toBe(
      'https://auth.example.test/.well-known/openid-configuration',
    );
  });
});

describe('discover(): servers of the 2025-03-26 revision (docs/api.md §6 item 9)', () => {
  it('finds the authorization server metadata at the MCP origin', async () => {
    const { run, world } = setup({ legacy: 'metadata' });
    const trace = await run();
    expect(trace.ok).toBe(true);
    expect(trace.legacy).toBe(true);
    expect(trace.resource).toEqual({
      resource: 'https://mcp.example.test/mcp',
      resource_metadata_url: null,
      scopes_supported: null,
      authorization_servers: ['https://mcp.example.test'],
    });
    expect(trace.authorization_server).toMatchObject({
      issuer: 'https://mcp.example.test',
      authorization_endpoint: 'https://mcp.example.test/oauth/authorize',
      token_endpoint: 'https://mcp.example.test/oauth/token',
    });
    expect(trace.steps.map((s) => [s.step, s.url, s.status, s.ok])).toEqual([
      ['probe', 'https://mcp.example.test/mcp', 401, true],
      [
        'resource_metadata',
        'https://mcp.example.test/.well-known/oauth-protected-resource/mcp',
        404,
        false,
      ],
      [
        'resource_metadata',
        'https://mcp.example.test/.well-known/oauth-protected-resource',
        404,
        false,
      ],
      ['legacy', null, null, true],
      ['legacy', 'https://mcp.example.test/.well-known/oauth-authorization-server', 200, true],
      ['requirements', null, null, true],
    ]);
    expect(world.requests.some((r) => r.url.includes('openid-configuration'))).toBe(false);
  });

  it('falls back to /authorize, /token and /register when there is no metadata either', async () => {
    const trace = await setup({ legacy: 'defaults' }).run();
    expect(trace.ok).toBe(true);
    expect(trace.authorization_server).toMatchObject({
      issuer: 'https://mcp.example.test',
      authorization_endpoint: 'https://mcp.example.test/authorize',
      token_endpoint: 'https://mcp.example.test/token',
      registration_endpoint: 'https://mcp.example.test/register',
      revocation_endpoint: null,
      code_challenge_methods_supported: ['S256'],
      authorization_response_iss_parameter_supported: false,
    });
    expect(
      trace.steps.filter((s) => s.step === 'legacy').map((s) => [s.url, s.status, s.ok]),
    ).toEqual([
      [null, null, true],
      ['https://mcp.example.test/.well-known/oauth-authorization-server', 404, false],
      ['https://mcp.example.test', null, true],
    ]);
  });

  it('does not fall back when the metadata is only unreachable (a 5xx is no proof of age)', async () => {
    const trace = await setup({
      metadataLocation: 'path',
      failures: { resource_metadata: 'server_error' },
    }).run();
    expect(trace.ok).toBe(false);
    expect(trace.legacy).toBe(false);
    expect(trace.steps.some((s) => s.step === 'legacy')).toBe(false);
  });

  it('accepts an issuer on the MCP origin only, kept as published', async () => {
    // Servers of that revision name an issuer with a path at the origin's metadata.
    const same = await setup({
      legacy: 'metadata',
      metadataIssuer: 'https://mcp.example.test/oauth',
    }).run();
    expect(same.ok).toBe(true);
    expect(same.authorization_server?.issuer).toBe('https://mcp.example.test/oauth');
    const other = await setup({
      legacy: 'metadata',
      metadataIssuer: 'https://evil.example.test',
    }).run();
    expect(other.ok).toBe(false);
    expect(other.steps.at(-1)).toMatchObject({ step: 'legacy', status: 200, ok: false });
    expect(other.steps.at(-1)?.note).toBe(
      'the metadata\'s "issuer" is "https://evil.example.test", not "https://mcp.example.test" exactly: refused (RFC 8414 §3.3)',
    );
  });
});

describe('discover(): what is refused', () => {
  it('stops on a resource mismatch before looking for an authorization server', async () => {
    const { run, world } = setup({ metadataResource: 'https://evil.example.test/mcp' });
    const trace = await run();
    expect(trace).toMatchObject({
      ok: false,
      error: 'discovery_failed',
      authorization_server: null,
    });
    expect(summary(trace.steps)).toEqual([
      'probe:ok',
      'resource_metadata:ok',
      'resource_match:fail',
    ]);
    expect(world.requests.some((r) => r.url.startsWith('https://auth.example.test'))).toBe(false);
  });

  it('accepts a resource that is a segment-wise prefix of the resource URL', async () => {
    const trace = await setup({ metadataResource: 'https://mcp.example.test/' }).run();
    expect(trace.ok).toBe(true);
  });

  it('stops on an issuer mismatch (mix-up) without trying other URLs', async () => {
    const trace = await setup({ metadataIssuer: 'https://other.example.test' }).run();
    expect(trace.ok).toBe(false);
    expect(trace.error).toBe('discovery_failed');
    const as = trace.steps.filter((s) => s.step === 'authorization_server_metadata');
    expect(as).toHaveLength(1);
    expect(as[0]?.note).toBe(
      'the metadata\'s "issuer" is "https://other.example.test", not "https://auth.example.test" exactly: refused (RFC 8414 §3.3)',
    );
  });

  it.each([
    ['a trailing /', 'https://auth.example.test/tenant/'],
    ['case', 'https://AUTH.example.test/tenant'],
    ['a default port', 'https://auth.example.test:443/tenant'],
    ['encoding', 'https://auth.example.test/%74enant'],
  ])('refuses a metadata issuer that differs by %s, naming the value', async (_, published) => {
    const trace = await setup({
      issuer: 'https://auth.example.test/tenant',
      metadataIssuer: published,
    }).run();
    expect(trace).toMatchObject({
      ok: false,
      error: 'discovery_failed',
      authorization_server: null,
    });
    expect(trace.steps.at(-1)).toEqual({
      step: 'authorization_server_metadata',
      url: 'https://auth.example.test/.well-known/oauth-authorization-server/tenant',
      status: 200,
      ok: false,
      note: `the metadata's "issuer" is ${JSON.stringify(published)}, not "https://auth.example.test/tenant" exactly: refused (RFC 8414 §3.3)`,
    });
  });

  it('accepts an issuer with an empty path written with or without one /', async () => {
    for (const published of ['https://auth.example.test', 'https://auth.example.test/']) {
      const trace = await setup({ metadataIssuer: published }).run();
      expect(trace.ok).toBe(true);
      // The issuer is kept as published: RFC 9207 compares `iss` with it exactly.
      expect(trace.authorization_server?.issuer).toBe(published);
    }
  });

  it('refuses an authorization server without S256, naming the field and its value', async () => {
    const absent = await setup({ codeChallengeMethods: null }).run();
    expect(absent.error).toBe('unsupported_authorization_server');
    expect(absent.steps.at(-1)).toEqual({
      step: 'requirements',
      url: null,
      status: null,
      ok: false,
      note: '"code_challenge_methods_supported" is absent (PKCE S256 is required; absent counts as unsupported)',
    });
    const plain = await setup({ codeChallengeMethods: ['plain'] }).run();
    expect(plain.error).toBe('unsupported_authorization_server');
    expect(plain.steps.at(-1)?.note).toBe(
      '"code_challenge_methods_supported" is ["plain"], without "S256" (PKCE S256 is required)',
    );
  });

  it('refuses an authorization server without token or authorization endpoint as unsupported', async () => {
    const world = createTestWorld();
    const fetch = async (url: string, init?: RequestInit) => {
      const response = await world.fetch(url, init);
      if (!url.includes('oauth-authorization-server')) return response;
      const { token_endpoint, authorization_endpoint, ...rest } = await response.json();
      void token_endpoint;
      void authorization_endpoint;
      return Response.json(rest);
    };
    const trace = await discover(createOutboundFetch({ fetch }), world.resourceUrl);
    expect(trace.error).toBe('unsupported_authorization_server');
    expect(trace.steps.at(-1)?.note).toBe(
      '"authorization_endpoint" is absent; "token_endpoint" is absent',
    );
  });

  it.each([
    ['resource_metadata', 'server_error'],
    ['resource_metadata', 'malformed_json'],
    ['resource_metadata', 'oversized'],
    ['resource_metadata', 'timeout'],
    ['authorization_server_metadata', 'server_error'],
    ['authorization_server_metadata', 'malformed_json'],
  ] as const)('reports %s failing with %s as discovery_failed', async (endpoint, failure) => {
    const trace = await setup({
      metadataLocation: 'path',
      failures: { [endpoint]: failure },
    }).run();
    expect(trace.ok).toBe(false);
    expect(trace.error).toBe('discovery_failed');
    expect(trace.steps.filter((s) => s.step === endpoint).every((s) => !s.ok)).toBe(true);
  });

  it('throws discovery_failed with the trace in details', async () => {
    const { outbound, world } = setup({ metadataResource: 'https://evil.example.test/x' });
    await expect(discoverOrThrow(outbound, world.resourceUrl)).rejects.toMatchObject({
      code: 'discovery_failed',
      status: 502,
      details: expect.arrayContaining([
        expect.objectContaining({ step: 'resource_match', ok: false }),
      ]),
    });
  });

  it('never reaches a private address named by the metadata', async () => {
    const trace = await setup({
      metadataLocation: { url: 'https://169.254.169.254/latest/meta-data' },
    }).run();
    expect(trace.ok).toBe(false);
    expect(trace.steps.find((s) => s.step === 'resource_metadata')?.note).toContain(
      'link-local addresses are not allowed',
    );
  });
});

describe('scope selection (docs/api.md §6 step 5)', () => {
  it('prefers configured scopes, then the challenge, then scopes_supported', async () => {
    const world = { challengeScope: 'from:challenge', resourceScopesSupported: ['from:metadata'] };
    expect((await setup(world).run(['configured'])).scopes).toEqual(['configured']);
    expect((await setup(world).run()).scopes).toEqual(['from:challenge']);
    expect((await setup({ resourceScopesSupported: ['from:metadata'] }).run()).scopes).toEqual([
      'from:metadata',
    ]);
    expect((await setup().run()).scopes).toEqual([]);
  });

  it('adds offline_access only when the authorization server lists it', async () => {
    expect(
      (
        await setup({
          challengeScope: 'read',
          serverScopesSupported: ['read', 'offline_access'],
        }).run()
      ).scopes,
    ).toEqual(['read', 'offline_access']);
    expect(
      (await setup({ challengeScope: 'read', serverScopesSupported: ['read'] }).run()).scopes,
    ).toEqual(['read']);
    expect(selectScopes([], 'a offline_access', null, ['offline_access'])).toEqual([
      'a',
      'offline_access',
    ]);
  });
});

describe('helpers', () => {
  it('matches resources by origin and segment-wise path prefix', () => {
    const url = new URL('https://mcp.example.test/v1/mcp');
    expect(resourceMatches('https://mcp.example.test/v1/mcp', url)).toBe(true);
    expect(resourceMatches('https://mcp.example.test/v1/mcp/', url)).toBe(true);
    expect(resourceMatches('https://mcp.example.test/v1', url)).toBe(true);
    expect(resourceMatches('https://mcp.example.test', url)).toBe(true);
    expect(resourceMatches('https://mcp.example.test/v', url)).toBe(false);
    expect(resourceMatches('https://mcp.example.test/v1/mcp/x', url)).toBe(false);
    expect(resourceMatches('http://mcp.example.test/v1/mcp', url)).toBe(false);
    expect(resourceMatches('https://mcp.example.test:444/v1/mcp', url)).toBe(false);
    expect(resourceMatches('not a url', url)).toBe(false);
  });

  it('orders authorization-server metadata URLs as the MCP specification does', () => {
    expect(authorizationServerMetadataUrls(new URL('https://as.example/'))).toEqual([
      'https://as.example/.well-known/oauth-authorization-server',
      'https://as.example/.well-known/openid-configuration',
    ]);
  });
});
