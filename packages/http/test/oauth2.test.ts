import { readFileSync, writeFileSync } from 'node:fs';
import {
  BUILT_IN_MCP_PROFILES,
  BUILT_IN_PROFILES,
  catalogOf,
  type Profile,
  type ProfileInput,
} from '@keyway/core/catalog';
import { memoryStorage } from '@keyway/store-memory';
import { type ClassicQuirks, createTestWorld, type TestWorldOptions } from '@keyway/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { Harness, storageFactories } from './harness.js';

/*
 * The `oauth2` template (docs/api.md §4, §15): every profile of the catalog through the whole
 * flow against @keyway/testing configured as that provider behaves (authorization URL as
 * the provider documents it, token requests as it reads them, answers read right), and the
 * template's rules: parameters that cannot inject a host or a path, explicit endpoints,
 * an app's own profiles, and no MCP use of a classic API's token.
 */

const BASE = 'https://keyway.example.test';
const CALLBACK = `${BASE}/api/oauth/callback`;
const CLIENT = { client_id: 'app-client-id', client_secret: 'app-client-secret-0123456789' };
/** Values for the parameters a profile has no default for. */
const SAMPLE_PARAMS: Record<string, string> = { subdomain: 'acme', shop: 'acme-store' };
/** Metadata values as the providers give them (others: `<name>-value`). */
const SAMPLE_METADATA: Record<string, string> = {
  instance_url: 'https://acme.my.salesforce.com',
  realmId: '9130350000000001',
  cloud_id: '1324a887-45db-1bf4-1e99-ef0ff456d421',
  site_url: 'https://acme.atlassian.net',
};
const sampleOf = (name: string) => SAMPLE_METADATA[name] ?? `${name}-value`;
const ACCESSIBLE = 'https://api.atlassian.com/oauth/token/accessible-resources';

const catalog = catalogOf();
const profiles = BUILT_IN_PROFILES.map((input) => catalog.get(input.id) as Profile);

/** The value the kit answers at a dot-separated path, as an object to merge into answers. */
function nestedAt(path: string, value: string): Record<string, unknown> {
  const [head, ...rest] = path.split('.') as [string, ...string[]];
  return { [head]: rest.length === 0 ? value : nestedAt(rest.join('.'), value) };
}

/** A profile's parameters filled with their defaults and the sample values. */
function filled(profile: Profile, text: string): string {
  return text.replace(/\{([A-Za-z_]+)\}/g, (whole, name: string) => {
    const param = profile.params.find((p) => p.name === name);
    return param === undefined ? whole : (param.default ?? (SAMPLE_PARAMS[name] as string));
  });
}

/** A connection's API base: its parameters filled, and its connection values (as samples). */
function connectionBase(profile: Profile): string {
  return filled(profile, profile.api_base_url as string).replace(
    /\{([A-Za-z_]+)\}/g,
    (_, name: string) => {
      const value = profile.connection_values.find((v) => v.name === name);
      const sample = sampleOf(name);
      return value?.kind === 'origin' ? new URL(sample).host : sample;
    },
  );
}

/** An answer holding `value` at each dot-separated path (digits: an array's items). */
function answerWith(paths: Record<string, string>, value: (name: string) => string): unknown {
  let root: unknown;
  for (const [name, path] of Object.entries(paths)) {
    const keys = path.split('.');
    const container = (key: string) => (/^\d+$/.test(key) ? [] : {});
    root ??= container(keys[0] as string);
    let here = root as Record<string, unknown>;
    keys.forEach((key, i) => {
      const next = keys[i + 1];
      if (next === undefined) here[key] = value(name);
      else {
        here[key] ??= container(next);
        here = here[key] as Record<string, unknown>;
      }
    });
  }
  return root;
}

/** The test kit configured as the provider of a profile behaves. */
function worldFor(
  profile: Profile,
  now: () => number,
  override: Partial<ClassicQuirks> = {},
): ReturnType<typeof createTestWorld> {
  const read = profile.token_response;
  const nest = read.access_token.includes('.') ? read.access_token.split('.')[0] : undefined;
  let answerExtra: Record<string, unknown> = {};
  for (const [name, path] of Object.entries(read.extra))
    answerExtra = { ...answerExtra, ...nestedAt(path, sampleOf(name)) };
  const classic: ClassicQuirks = {
    endpoints: {
      authorize: filled(profile, profile.authorization_endpoint),
      token: filled(profile, profile.token_endpoint),
      ...(profile.refresh_endpoint && { refresh: filled(profile, profile.refresh_endpoint) }),
      ...(profile.revocation_endpoint && { revoke: filled(profile, profile.revocation_endpoint) }),
    },
    pkce: profile.pkce === 'none' ? 'ignored' : 'required',
    scopeSeparator: profile.scope_separator,
    scopeParam: profile.scope_param,
    requiredAuthorizationParams: profile.authorization_params,
    tokenRequestFormat: profile.token_request_format,
    requiredTokenHeaders: profile.token_request_headers,
    formEncodedAnswers: read.format === 'form',
    okField: read.ok_field !== undefined,
    ...(read.error === 'error'
      ? {}
      : { errorFields: { error: read.error, description: read.error_description } }),
    ...(nest === undefined ? {} : { nestTokensUnder: nest }),
    answerExtra,
    redirectExtra: Object.fromEntries(profile.redirect_params.map((n) => [n, sampleOf(n)])),
    ...(profile.api_base_url === null ? {} : { apiBase: connectionBase(profile) }),
    ...(profile.after_connect && {
      afterConnect: {
        url: filled(profile, profile.after_connect.url),
        answer: answerWith(profile.after_connect.metadata, sampleOf),
      },
    }),
    ...override,
  };
  const options: TestWorldOptions = {
    now,
    issuer:
      profile.issuer === undefined ? 'https://issuer.invalid' : filled(profile, profile.issuer),
    // A server that sends `iss` is one whose issuer the profile names.
    issParameter: profile.issuer !== undefined,
    dynamicRegistration: false,
    rotateRefreshTokens: profile.refresh === 'rotating',
    issueRefreshTokens: profile.refresh !== 'none',
    ...(read.bearer ? { tokenResponse: { tokenType: 'bot' } } : {}),
    classic,
  };
  const world = createTestWorld(options);
  world.preregister({
    ...CLIENT,
    token_endpoint_auth_method: profile.token_endpoint_auth_method,
    redirect_uris: [CALLBACK],
  });
  return world;
}

describe('every profile of the catalog, through the whole flow as its provider behaves', () => {
  let h: Harness | undefined;
  afterEach(async () => {
    if (h === undefined) return;
    expect(h.errors).toEqual([]);
    await h.broker.close();
  });

  it('has at least 25 profiles, each checked, each with its documentation', () => {
    expect(profiles.length).toBeGreaterThanOrEqual(25);
    expect(new Set(profiles.map((p) => p.id)).size).toBe(profiles.length);
    for (const profile of profiles) expect(profile.docs_url).toMatch(/^https:\/\//);
  });

  it.each(profiles.map((profile) => [profile.id, profile] as const))('%s', async (_, profile) => {
    let now = Date.UTC(2026, 10, 24, 12);
    const world = worldFor(profile, () => now);
    h = new Harness(memoryStorage(), {
      fetch: world.fetch,
      baseUrl: BASE,
      providerManagement: true,
    });
    h.now = now;
    const params = Object.fromEntries(
      profile.params
        .filter((p) => p.default === undefined)
        .map((p) => [p.name, SAMPLE_PARAMS[p.name]]),
    );
    const put = await h.call('PUT', `/api/admin/providers/${profile.id}`, {
      body: {
        template: 'oauth2',
        profile: profile.id,
        configuration: {
          scopes: profile.scopes_example,
          ...(Object.keys(params).length > 0 ? { params } : {}),
        },
        credentials: CLIENT,
      },
    });
    expect(put.status, put.text).toBe(201);
    expect(put.body).toMatchObject({
      template: 'oauth2',
      profile: profile.id,
      resource: null,
      api_base_url: profile.api_base_url === null ? null : filled(profile, profile.api_base_url),
      credentials: {
        mode: 'custom',
        client_id: CLIENT.client_id,
        registration: 'manual',
        token_endpoint_auth_method: profile.token_endpoint_auth_method,
        client_secret_set: true,
        redirect_uri: CALLBACK,
      },
    });
    expect(put.text).not.toContain(CLIENT.client_secret);

    // The authorization URL exactly as the provider documents it.
    const started = await h.call('POST', `/api/oauth/authorize/${profile.id}`, {
      body: { connection_id: `acme/users/alice/${profile.id}` },
    });
    expect(started.status, started.text).toBe(201);
    const url = new URL(started.body.authorization_url);
    expect(url.href.split('?')[0]).toBe(filled(profile, profile.authorization_endpoint));
    const scopes = [...new Set([...profile.scopes_example, ...profile.scopes_always])];
    const expected: Record<string, string> = {
      response_type: 'code',
      client_id: CLIENT.client_id,
      redirect_uri: CALLBACK,
      state: url.searchParams.get('state') as string,
      ...(profile.pkce === 'S256'
        ? {
            code_challenge: url.searchParams.get('code_challenge') as string,
            code_challenge_method: 'S256',
          }
        : {}),
      ...(scopes.length > 0 ? { [profile.scope_param]: scopes.join(profile.scope_separator) } : {}),
      ...profile.authorization_params,
    };
    expect(Object.fromEntries(url.searchParams)).toEqual(expected);
    expect([...url.searchParams.keys()]).toHaveLength(Object.keys(expected).length);
    expect(url.searchParams.get('state')).toMatch(/^[A-Za-z0-9_-]{43}$/);

    // The user consents; the code is exchanged as the provider reads token requests.
    const back = new URL(world.consent(started.body.authorization_url));
    const done = await h.call('GET', `${back.pathname}${back.search}`, { token: null });
    expect(done.status, done.text).toBe(200);
    const id = `acme/users/alice/${profile.id}`;
    const view = await h.call('GET', `/api/oauth/connections/${id}`);
    expect(view.body).toMatchObject({
      status: 'active',
      provider_id: profile.id,
      scopes,
      refreshable: profile.refresh !== 'none',
      error: null,
    });
    const kept = [
      ...Object.keys(profile.token_response.extra),
      ...profile.redirect_params,
      ...Object.keys(profile.after_connect?.metadata ?? {}),
    ];
    expect(view.body.metadata).toEqual(Object.fromEntries(kept.map((n) => [n, sampleOf(n)])));
    const first = await h.call('GET', `/api/oauth/credentials/${id}`);
    expect(first.status).toBe(200);
    expect(first.body.token_type).toBe('Bearer');
    expect(world.isValidAccessToken(first.body.access_token)).toBe(true);

    // The API proxy reaches the connection's own API base, with the profile's headers (a
    // caller's `Accept` would take the place of the profile's).
    const proxied = await h.call('GET', `/proxy/${id}/some/path?x=1`, {
      headers: { 'accept-language': 'en' },
    });
    if (profile.api_base_url === null) {
      expect(proxied.status).toBe(400);
      expect(proxied.body.error).toBe('invalid_request');
    } else {
      expect(proxied.status, proxied.text).toBe(200);
      expect(proxied.body.url).toBe(`${connectionBase(profile)}/some/path?x=1`);
      const apiHeaders = Object.entries(profile.api_headers).map(([n, v]) => [n.toLowerCase(), v]);
      expect(proxied.body.headers).toMatchObject(Object.fromEntries(apiHeaders));
      expect(proxied.body.headers).toMatchObject({ 'accept-language': 'en' });
    }
    expect(world.stats.apiCalls).toBe(
      (profile.after_connect ? 1 : 0) + (profile.api_base_url === null ? 0 : 1),
    );
    expect(world.tokenRequests[0]).toMatchObject({
      grant_type: 'authorization_code',
      redirect_uri: CALLBACK,
    });
    expect(world.tokenRequests[0]).toMatchObject(profile.token_params);
    expect('resource' in (world.tokenRequests[0] ?? {})).toBe(false);
    expect('code_verifier' in (world.tokenRequests[0] ?? {})).toBe(profile.pkce === 'S256');

    // A refresh, at the provider's refresh endpoint, or none to ask for.
    now += 1000;
    h.now = now;
    const forced = await h.call('GET', `/api/oauth/credentials/${id}?force_refresh=true`);
    if (profile.refresh === 'none') {
      expect(forced.status).toBe(409);
      expect(forced.body.error).toBe('refresh_unavailable');
      return;
    }
    expect(forced.status, forced.text).toBe(200);
    expect(world.stats.refreshes).toBe(1);
    expect(forced.body.access_token).not.toBe(first.body.access_token);
    expect(world.isValidAccessToken(forced.body.access_token)).toBe(true);
    const refreshUrl = filled(profile, profile.refresh_endpoint ?? profile.token_endpoint);
    expect(world.requests.filter((r) => r.url === refreshUrl).length).toBeGreaterThanOrEqual(1);
    expect(world.tokenRequests[1]).toMatchObject({ grant_type: 'refresh_token' });
    // Rotating or not, the next refresh works with what was kept.
    const again = await h.call('GET', `/api/oauth/credentials/${id}?force_refresh=true`);
    expect(again.status, again.text).toBe(200);
    expect(world.isValidAccessToken(again.body.access_token)).toBe(true);
  });
});

/** A Microsoft-like world (a tenant in the endpoint paths), and a harness over `storage`. */
async function microsoft(storage = memoryStorage(), extra: Record<string, unknown> = {}) {
  const profile = catalog.get('microsoft') as Profile;
  const world = worldFor(profile, () => Date.UTC(2026, 10, 24, 12));
  const h = new Harness(await storage, {
    fetch: world.fetch,
    baseUrl: BASE,
    providerManagement: true,
    ...extra,
  });
  h.now = Date.UTC(2026, 10, 24, 12);
  return { h, world };
}

const put = (h: Harness, id: string, body: Record<string, unknown>, token?: string) =>
  h.call('PUT', `/api/admin/providers/${id}`, {
    body: { template: 'oauth2', credentials: CLIENT, ...body },
    ...(token === undefined ? {} : { token }),
  });

describe('the oauth2 template: what an operator may give', () => {
  it.each([
    ['evil.example/x', 'a path'],
    ['evil.example?x=1', 'a query'],
    ['evil.example#x', 'a fragment'],
    ['user@evil.example', 'user info'],
    ['evil.example:444', 'a port'],
    ['a%2fb', 'an encoded slash'],
    ['..', 'a dot segment'],
    ['.', 'a dot segment'],
    ['a\\b', 'a backslash'],
    ['a b', 'a space'],
    ['', 'nothing'],
  ])('refuses a parameter value with %s (%s), naming the parameter', async (tenant) => {
    const { h, world } = await microsoft();
    const reply = await put(h, 'ms', {
      profile: 'microsoft',
      configuration: { params: { tenant } },
    });
    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('invalid_request');
    expect(reply.body.details).toEqual([
      { path: 'configuration.params.tenant', message: expect.stringContaining('"tenant"') },
    ]);
    expect(world.requests).toEqual([]);
    expect((await h.call('GET', '/api/admin/providers/ms')).status).toBe(404);
    await h.broker.close();
  });

  it('fills a tenant into the endpoints, and refuses unknown or missing parameters', async () => {
    const { h } = await microsoft();
    const ok = await put(h, 'ms', {
      profile: 'microsoft',
      configuration: { params: { tenant: 'contoso.onmicrosoft.com' } },
    });
    expect(ok.status, ok.text).toBe(201);
    expect(ok.body.configuration.params).toEqual({ tenant: 'contoso.onmicrosoft.com' });
    expect(ok.body.authorization_server.authorization_endpoint).toBe(
      'https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/authorize',
    );
    const unknown = await put(h, 'ms2', {
      profile: 'microsoft',
      configuration: { params: { region: 'eu' } },
    });
    expect(unknown.status).toBe(400);
    expect(unknown.body.details[0]).toEqual({
      path: 'configuration.params.region',
      message: 'profile "microsoft" has no parameter "region" (its parameters: tenant)',
    });
    const missing = await put(h, 'zd', { profile: 'zendesk' });
    expect(missing.status).toBe(400);
    expect(missing.body.details[0].path).toBe('configuration.params.subdomain');
    const noProfile = await put(h, 'nope', { profile: 'myspace' });
    expect(noProfile.status).toBe(400);
    expect(noProfile.body.details[0].path).toBe('profile');
    const both = await put(h, 'both', {
      profile: 'github',
      configuration: { token_endpoint: 'https://evil.example/token' },
    });
    expect(both.status).toBe(400);
    expect(both.body.details[0].path).toBe('configuration.token_endpoint');
    const reserved = await put(h, 'res', {
      profile: 'github',
      configuration: { authorization_params: { state: 'fixed' } },
    });
    expect(reserved.status).toBe(400);
    expect(reserved.body.details[0].path).toBe('configuration.authorization_params.state');
    const noClient = await h.call('PUT', '/api/admin/providers/gh', {
      body: { template: 'oauth2', profile: 'github', credentials: {} },
    });
    expect(noClient.status).toBe(400);
    expect(noClient.body.details[0].path).toBe('credentials.client_id');
    await h.broker.close();
  });
});

describe.each(storageFactories)(
  'the oauth2 template with named endpoints ($name storage)',
  (factory) => {
    it('authorizes, refreshes and revokes without a profile; the MCP routes refuse its token', async () => {
      const world = createTestWorld({
        now: () => h.now,
        issuer: 'https://api.example.test',
        issParameter: false,
        dynamicRegistration: false,
        rotateRefreshTokens: false,
        classic: { scopeSeparator: ',' },
      });
      world.preregister({ ...CLIENT, redirect_uris: [CALLBACK] });
      const h = new Harness(await factory.create(), {
        fetch: world.fetch,
        baseUrl: BASE,
        providerManagement: true,
      });
      const refused = await put(h, 'api', {
        configuration: { authorization_endpoint: 'https://api.example.test/oauth/authorize' },
      });
      expect(refused.status).toBe(400);
      expect(refused.body.details[0].path).toBe('configuration.token_endpoint');
      const plain = await put(h, 'api', {
        configuration: {
          authorization_endpoint: 'https://api.example.test/oauth/authorize',
          token_endpoint: 'http://api.example.test/oauth/token',
        },
      });
      expect(plain.status).toBe(400);
      expect(plain.body.details[0]).toEqual({
        path: 'configuration.token_endpoint',
        message: '"token_endpoint" must use https (plain http only for allowed hosts)',
      });
      // An answer shape of its own is checked as a profile's, naming the field.
      const shaped = await put(h, 'api', {
        configuration: {
          authorization_endpoint: 'https://api.example.test/oauth/authorize',
          token_endpoint: 'https://api.example.test/oauth/token',
          token_response: { access_token: 5 },
        },
      });
      expect([shaped.status, shaped.body.details[0].path]).toEqual([
        400,
        'configuration.token_response.access_token',
      ]);
      const unknown = await put(h, 'api', {
        configuration: {
          authorization_endpoint: 'https://api.example.test/oauth/authorize',
          token_endpoint: 'https://api.example.test/oauth/token',
          token_response: { tokens_at: 'data' },
        },
      });
      expect([unknown.status, unknown.body.details[0].path]).toEqual([
        400,
        'configuration.token_response',
      ]);
      const created = await put(h, 'api', {
        label: 'Example API',
        configuration: {
          scopes: ['read', 'write'],
          authorization_endpoint: 'https://api.example.test/oauth/authorize',
          token_endpoint: 'https://api.example.test/oauth/token',
          revocation_endpoint: 'https://api.example.test/oauth/revoke',
          scope_separator: ',',
          token_endpoint_auth_method: 'client_secret_basic',
          api_base_url: 'https://api.example.test/v1/',
        },
      });
      expect(created.status, created.text).toBe(201);
      expect(created.body).toMatchObject({
        template: 'oauth2',
        profile: null,
        label: 'Example API',
        resource: null,
        api_base_url: 'https://api.example.test/v1',
        authorization_server: {
          issuer: 'https://api.example.test',
          token_endpoint: 'https://api.example.test/oauth/token',
          revocation_endpoint: 'https://api.example.test/oauth/revoke',
          registration_endpoint: null,
        },
      });
      const started = await h.call('POST', '/api/oauth/authorize/api', {
        body: { connection_id: 'acme/alice/api' },
      });
      expect(new URL(started.body.authorization_url).searchParams.get('scope')).toBe('read,write');
      const back = new URL(world.consent(started.body.authorization_url));
      expect((await h.call('GET', `${back.pathname}${back.search}`, { token: null })).status).toBe(
        200,
      );
      const view = await h.call('GET', '/api/oauth/connections/acme/alice/api');
      expect(view.body).toMatchObject({
        status: 'active',
        scopes: ['read', 'write'],
        metadata: {},
      });
      const forced = await h.call(
        'GET',
        '/api/oauth/credentials/acme/alice/api?force_refresh=true',
      );
      expect(forced.status).toBe(200);
      expect(world.isValidAccessToken(forced.body.access_token)).toBe(true);
      // Not an MCP server: the gateway and the probe send its token nowhere.
      const before = world.requests.length;
      const gateway = await h.call('POST', '/mcp/acme/alice/api', {
        body: { jsonrpc: '2.0', id: 1, method: 'tools/list' },
        headers: { accept: 'application/json, text/event-stream' },
      });
      expect(gateway.status).toBe(400);
      expect(gateway.body.error).toBe('invalid_request');
      const probe = await h.call('POST', '/api/oauth/probe/acme/alice/api');
      expect(probe.status).toBe(400);
      expect(probe.body.error_description).toBe(
        'provider "api" is an "oauth2" API, not an MCP server: its connections are used through the API proxy or their credentials',
      );
      expect(world.requests.length).toBe(before);
      expect((await h.call('GET', '/api/oauth/connections/acme/alice/api')).body.status).toBe(
        'active',
      );
      // Deleting revokes at the named revocation endpoint (RFC 7009).
      expect((await h.call('DELETE', '/api/oauth/connections/acme/alice/api')).status).toBe(204);
      expect(world.stats.revocations).toBeGreaterThanOrEqual(1);
      expect(world.isValidAccessToken(forced.body.access_token)).toBe(false);
      expect(h.errors).toEqual([]);
      await h.broker.close();
    });
  },
);

describe('the oauth2 template keeps each connection with its party', () => {
  it('puts connections in error when the provider moves to another server or API, and never sends them there', async () => {
    const world = createTestWorld({
      now: () => h.now,
      issuer: 'https://api.example.test',
      issParameter: false,
      dynamicRegistration: false,
    });
    world.preregister({ ...CLIENT, redirect_uris: [CALLBACK] });
    const h = new Harness(memoryStorage(), {
      fetch: world.fetch,
      baseUrl: BASE,
      providerManagement: true,
    });
    const configuration = {
      authorization_endpoint: 'https://api.example.test/oauth/authorize',
      token_endpoint: 'https://api.example.test/oauth/token',
      api_base_url: 'https://api.example.test/v1',
    };
    expect((await put(h, 'api', { configuration })).status).toBe(201);
    const started = await h.call('POST', '/api/oauth/authorize/api', {
      body: { connection_id: 'acme/alice/api' },
    });
    const back = new URL(world.consent(started.body.authorization_url));
    await h.call('GET', `${back.pathname}${back.search}`, { token: null });
    // Another API base: the token was issued for the first one.
    const moved = await put(h, 'api', {
      configuration: { ...configuration, api_base_url: 'https://evil.example/v1' },
    });
    expect(moved.status).toBe(200);
    expect(moved.body.last_party_change).toMatchObject({
      previous_issuer: 'https://api.example.test',
      previous_resource_url: 'https://api.example.test/v1',
      connections_reauthorization_required: 1,
    });
    const view = await h.call('GET', '/api/oauth/connections/acme/alice/api');
    expect(view.body).toMatchObject({
      status: 'error',
      error: { code: 'reauthorization_required' },
    });
    const credentials = await h.call('GET', '/api/oauth/credentials/acme/alice/api');
    expect(credentials.status).toBe(409);
    expect(credentials.body.error).toBe('connection_not_active');
    expect(world.requests.some((r) => r.url.startsWith('https://evil.example'))).toBe(false);
    await h.broker.close();
  });
});

describe('token answers as classic servers write them', () => {
  it.each([
    ['slack', 'ok: false with status 200'],
    ['github', 'a form-encoded error with status 200'],
    ['notion', 'an error named in `code` and described in `message`'],
  ])('%s: a refused refresh (%s) needs consent again', async (id) => {
    const profile = catalog.get(id) as Profile;
    const world = worldFor(profile, () => Date.UTC(2026, 10, 24, 12));
    const h = new Harness(memoryStorage(), {
      fetch: world.fetch,
      baseUrl: BASE,
      providerManagement: true,
    });
    expect((await put(h, id, { profile: id })).status).toBe(201);
    const started = await h.call('POST', `/api/oauth/authorize/${id}`, {
      body: { connection_id: `acme/${id}` },
    });
    const back = new URL(world.consent(started.body.authorization_url));
    expect((await h.call('GET', `${back.pathname}${back.search}`, { token: null })).status).toBe(
      200,
    );
    world.revokeRefreshTokens();
    const forced = await h.call('GET', `/api/oauth/credentials/acme/${id}?force_refresh=true`);
    expect(forced.status).toBe(409);
    expect(forced.body.error).toBe('reauthorization_required');
    const view = await h.call('GET', `/api/oauth/connections/acme/${id}`);
    expect(view.body.status).toBe('error');
    expect(view.body.error.code).toBe('invalid_grant');
    await h.broker.close();
  });
});

describe('per-connection API bases: values the provider gives, checked before a token goes there', () => {
  /** A connection made through `profile`, its provider answering as `override` says. */
  async function connected(profileId: string, override: Partial<ClassicQuirks>) {
    const profile = catalog.get(profileId) as Profile;
    const world = worldFor(profile, () => Date.UTC(2026, 10, 24, 12), override);
    const h = new Harness(memoryStorage(), {
      fetch: world.fetch,
      baseUrl: BASE,
      providerManagement: true,
    });
    h.now = Date.UTC(2026, 10, 24, 12);
    const made = await put(h, profileId, {
      profile: profileId,
      configuration: { scopes: profile.scopes_example },
    });
    expect(made.status, made.text).toBe(201);
    const id = `acme/users/alice/${profileId}`;
    const started = await h.call('POST', `/api/oauth/authorize/${profileId}`, {
      body: { connection_id: id },
    });
    const back = new URL(world.consent(started.body.authorization_url));
    const done = await h.call('GET', `${back.pathname}${back.search}`, { token: null });
    expect(done.status, done.text).toBe(200);
    const view = await h.call('GET', `/api/oauth/connections/${id}`);
    expect(view.body.status).toBe('active');
    return { h, world, id, view: view.body };
  }

  it.each([
    'https://evil.example',
    'https://acme.my.salesforce.com.evil.example',
    'https://evil.example/.salesforce.com',
    'https://evil.example#.salesforce.com',
    'https://evil.example?.salesforce.com',
    'https://acme.my.salesforce.com:8443',
    'https://user@acme.my.salesforce.com',
    'https://acme.my.salesforce.com/services',
    'http://acme.my.salesforce.com',
    'https://salesforce.com',
    'acme.my.salesforce.com',
    '',
  ])('Salesforce: an instance_url of %j is never where a token goes', async (instance) => {
    const { h, world, id, view } = await connected('salesforce', {
      answerExtra: { instance_url: instance, id: 'https://login.salesforce.com/id/1/2' },
    });
    expect(view.metadata.instance_url).toBe(instance);
    const before = world.requests.length;
    const reply = await h.call('GET', `/proxy/${id}/v62.0/limits`);
    expect(reply.status, reply.text).toBe(502);
    expect(reply.body.error).toBe('upstream_error');
    expect(reply.body.details).toEqual([
      { path: 'metadata.instance_url', message: expect.stringContaining('salesforce.com') },
    ]);
    expect(world.requests.slice(before)).toEqual([]);
    expect(world.stats.apiCalls).toBe(0);
    expect(h.errors).toEqual([]);
    await h.broker.close();
  });

  it('Salesforce: the proxy reaches the instance the token answer named', async () => {
    const instance = 'https://acme--dev.sandbox.my.salesforce.com';
    const { h, world, id } = await connected('salesforce', {
      answerExtra: { instance_url: instance },
      apiBase: `${instance}/services/data`,
    });
    const reply = await h.call('GET', `/proxy/${id}/v62.0/query?q=SELECT%20Id%20FROM%20Account`);
    expect(reply.status, reply.text).toBe(200);
    expect(reply.body.url).toBe(
      `${instance}/services/data/v62.0/query?q=SELECT%20Id%20FROM%20Account`,
    );
    expect(world.stats.apiCalls).toBe(1);
    await h.broker.close();
  });

  it.each(['..', '.', '1/2', '1%2F2', '12?x=1', '12#x', 'abc', '12 3', ''])(
    'QuickBooks: a realmId of %j on the redirect back is never a path',
    async (realm) => {
      const { h, world, id, view } = await connected('quickbooks', {
        redirectExtra: { realmId: realm },
      });
      expect(view.metadata.realmId).toBe(realm);
      const reply = await h.call('GET', `/proxy/${id}/companyinfo/1`);
      expect(reply.status, reply.text).toBe(502);
      expect(reply.body.error).toBe('upstream_error');
      expect(reply.body.details[0].path).toBe('metadata.realmId');
      expect(world.stats.apiCalls).toBe(0);
      await h.broker.close();
    },
  );

  it.each([
    ['no site granted', { afterConnect: { url: ACCESSIBLE, answer: [] } }],
    ['a site without a UUID', { afterConnect: { url: ACCESSIBLE, answer: [{ id: '../admin' }] } }],
    ['the request failing', { afterConnect: undefined }],
  ] as const)(
    'Atlassian with %s: the connection is kept, the proxy asks for consent again',
    async (_, override) => {
      const { h, world, id, view } = await connected('atlassian', override);
      const invalid = view.metadata.cloud_id !== undefined;
      expect(view.metadata).toEqual(invalid ? { cloud_id: '../admin' } : {});
      expect(world.requests).toContainEqual({ method: 'GET', url: ACCESSIBLE });
      // The tokens are kept: a hand-out works.
      expect((await h.call('GET', `/api/oauth/credentials/${id}`)).status).toBe(200);
      const reply = await h.call('GET', `/proxy/${id}/rest/api/3/myself`);
      expect(reply.status, reply.text).toBe(invalid ? 502 : 409);
      expect(reply.body.error).toBe(invalid ? 'upstream_error' : 'reauthorization_required');
      expect(reply.body.details).toEqual([
        { path: 'metadata.cloud_id', message: 'the cloud id of the site granted, a UUID' },
      ]);
      expect(world.requests.filter((r) => r.url.includes('/ex/'))).toEqual([]);
      await h.broker.close();
    },
  );

  it('Atlassian: the first site granted is the one the proxy reaches', async () => {
    const first = '11111111-2222-4333-8444-555555555555';
    const { h, world, id, view } = await connected('atlassian', {
      afterConnect: {
        url: ACCESSIBLE,
        answer: [
          { id: first, url: 'https://one.atlassian.net', name: 'one', scopes: [] },
          { id: 'aaaaaaaa-2222-4333-8444-555555555555', url: 'https://two.atlassian.net' },
        ],
      },
      apiBase: `https://api.atlassian.com/ex/jira/${first}`,
    });
    expect(view.metadata).toEqual({ cloud_id: first, site_url: 'https://one.atlassian.net' });
    const reply = await h.call('GET', `/proxy/${id}/rest/api/3/myself`);
    expect(reply.status, reply.text).toBe(200);
    expect(reply.body.url).toBe(`https://api.atlassian.com/ex/jira/${first}/rest/api/3/myself`);
    expect(world.stats.apiCalls).toBe(2);
    await h.broker.close();
  });
});

describe('the catalog', () => {
  const region = { name: 'region', description: 'eu or us', pattern: 'eu|us', default: 'eu' };
  const own: ProfileInput = {
    id: 'acme-crm',
    label: 'Acme CRM',
    docs_url: 'https://developer.acme.example/oauth',
    params: [region],
    authorization_endpoint: 'https://{region}.acme.example/oauth/authorize',
    token_endpoint: 'https://{region}.acme.example/oauth/token',
    scopes_example: ['contacts.read'],
    api_base_url: 'https://{region}.api.acme.example',
    refresh: 'stable',
  };

  it('lists every profile to any valid credential, with the app’s own', async () => {
    const h = new Harness(memoryStorage(), { baseUrl: BASE, profiles: [own] });
    const token = await h.mint('reader', ['somewhere/else']);
    const reply = await h.call('GET', '/api/admin/profiles', { token });
    expect(reply.status).toBe(200);
    expect(reply.body.next_cursor).toBeNull();
    expect(reply.body.items).toHaveLength(
      BUILT_IN_PROFILES.length + BUILT_IN_MCP_PROFILES.length + 1,
    );
    expect(reply.body.items.map((p: { id: string }) => p.id)).toEqual(
      [
        ...BUILT_IN_PROFILES.map((p) => p.id),
        ...BUILT_IN_MCP_PROFILES.map((p) => p.id),
        'acme-crm',
      ].sort(),
    );
    expect(reply.body.items.find((p: { id: string }) => p.id === 'acme-crm')).toEqual({
      id: 'acme-crm',
      template: 'oauth2',
      label: 'Acme CRM',
      docs_url: 'https://developer.acme.example/oauth',
      checked: null,
      resource_url: null,
      credentials: 'custom',
      scopes_example: ['contacts.read'],
      params: ['region'],
      api_base_url: 'https://{region}.api.acme.example',
      refresh: 'stable',
      notes: [],
    });
    const hubspot = reply.body.items.find((p: { id: string }) => p.id === 'hubspot-mcp');
    expect({ ...hubspot, notes: hubspot.notes.length }).toEqual({
      id: 'hubspot-mcp',
      template: 'mcp',
      label: 'HubSpot (MCP)',
      docs_url:
        'https://developers.hubspot.com/docs/apps/developer-platform/build-apps/integrate-with-the-remote-hubspot-mcp-server',
      checked: '2026-11-28',
      resource_url: 'https://mcp.hubspot.com',
      credentials: 'custom',
      scopes_example: [],
      params: [],
      api_base_url: null,
      refresh: 'stable',
      notes: 3,
    });
    expect((await h.call('GET', '/api/admin/profiles', { token: 'kw_nonsense' })).status).toBe(401);
    await h.broker.close();
  });

  it.each([
    [
      { ...own, id: 'github' },
      'profiles[0] has the id "github" of a built-in profile; choose another id',
    ],
    [
      { ...own, token_endpoint: 'https://{tenant}.acme.example/token' },
      'profiles[0] profile ("acme-crm"): "token_endpoint": {tenant} is not a declared parameter',
    ],
    [
      { ...own, authorization_params: { client_id: 'x' } },
      'profiles[0] profile ("acme-crm"): "authorization_params.client_id": Keyway sends this parameter itself',
    ],
    [
      { ...own, params: [{ ...region, default: 'asia' }] },
      'profiles[0] profile ("acme-crm"): "params.region.default": does not match its pattern',
    ],
    [
      { ...own, token_response: { extra: { bot: 'access_token' } } },
      'profiles[0] profile ("acme-crm"): "token_response.extra.bot": a token or a secret is never kept as metadata',
    ],
    [
      { ...own, token_response: { extra: { other: 'authed_user.refresh_token' } } },
      'profiles[0] profile ("acme-crm"): "token_response.extra.other": a token or a secret is never kept as metadata',
    ],
    [
      { ...own, redirect_params: ['code'] },
      'profiles[0] profile ("acme-crm"): "redirect_params": "code" is never kept as metadata',
    ],
    [
      { ...own, token_endpoint: 'http://eu.acme.example/token' },
      'profiles[0] profile ("acme-crm"): "token_endpoint": an https URL without query or fragment',
    ],
    [
      {
        ...own,
        api_base_url: 'https://{region}.api.acme.example/{account}',
        connection_values: [{ name: 'account', description: 'the account', pattern: '[0-9]+' }],
      },
      'profiles[0] profile ("acme-crm"): "connection_values.0.name": "account" is not metadata the profile keeps (token_response.extra, redirect_params or after_connect.metadata)',
    ],
    [
      {
        ...own,
        redirect_params: ['account'],
        connection_values: [{ name: 'account', description: 'the account', pattern: '[0-9]+' }],
      },
      'profiles[0] profile ("acme-crm"): "connection_values.0.name": api_base_url has no {account}',
    ],
    [
      {
        ...own,
        redirect_params: ['account'],
        token_endpoint: 'https://{account}.acme.example/token',
        api_base_url: 'https://{region}.api.acme.example/{account}',
        connection_values: [{ name: 'account', description: 'the account', pattern: '[0-9]+' }],
      },
      'profiles[0] profile ("acme-crm"): "token_endpoint": {account} is not a declared parameter',
    ],
    [
      {
        ...own,
        token_response: { extra: { instance: 'instance_url' } },
        api_base_url: 'https://api.{instance}.acme.example',
        connection_values: [
          { name: 'instance', kind: 'origin' as const, description: 'the instance', pattern: '.+' },
        ],
      },
      'profiles[0] profile ("acme-crm"): "connection_values.0.kind": an origin is the whole host: https://{instance}/…',
    ],
    [
      {
        ...own,
        after_connect: {
          url: 'https://{region}.acme.example/me',
          metadata: { key: 'session.token' },
        },
      },
      'profiles[0] profile ("acme-crm"): "after_connect.metadata.key": a token or a secret is never kept as metadata',
    ],
  ])('refuses a bad profile at start, naming it', (profile, message) => {
    expect(() => new Harness(memoryStorage(), { baseUrl: BASE, profiles: [profile] })).toThrow(
      new TypeError(`invalid broker configuration: ${message}`),
    );
  });
});

/** A profile as docs/providers.md shows it: its facts, and each quirk that is not a default. */
function profileMarkdown(profile: Profile): string {
  const code = (value: string) => `\`${value}\``;
  const read = profile.token_response;
  const quirks = [
    profile.issuer && `issuer ${code(profile.issuer)}`,
    profile.scope_separator !== ' ' && 'scopes comma-separated',
    profile.scope_param !== 'scope' && `scopes in ${code(profile.scope_param)}`,
    profile.scopes_always.length > 0 &&
      `always asks for ${profile.scopes_always.map(code).join(', ')}`,
    profile.pkce === 'none' && 'no PKCE',
    `client authentication ${code(profile.token_endpoint_auth_method)}`,
    profile.token_request_format === 'json' && 'JSON token requests',
    ...Object.entries(profile.token_request_headers).map(
      ([n, v]) => `token requests with ${code(`${n}: ${v}`)}`,
    ),
    ...Object.entries(profile.authorization_params).map(
      ([n, v]) => `consent URL with ${code(`${n}=${v}`)}`,
    ),
    ...Object.entries(profile.token_params).map(
      ([n, v]) => `token requests with ${code(`${n}=${v}`)}`,
    ),
    read.format === 'form' && 'form-encoded answers read',
    read.ok_field && `${code(`${read.ok_field}: false`)} with status 200 is a failure`,
    read.bearer && 'its `token_type` is read as Bearer',
    read.error !== 'error' &&
      `errors named in ${code(read.error)}, described in ${code(read.error_description)}`,
    ...(['access_token', 'refresh_token', 'expires_in', 'scope'] as const)
      .filter((field) => read[field] !== field)
      .map((field) => `${code(field)} read at ${code(read[field])}`),
    ...Object.entries(read.extra).map(([n, path]) => `keeps ${code(n)} (from ${code(path)})`),
    ...profile.redirect_params.map((n) => `keeps ${code(n)} of the redirect back`),
    profile.refresh_endpoint && `refreshes at ${code(profile.refresh_endpoint)}`,
    profile.after_connect &&
      `once connected, ${code(`GET ${profile.after_connect.url}`)} and keeps ${Object.entries(
        profile.after_connect.metadata,
      )
        .map(([n, path]) => `${code(n)} (from ${code(path)})`)
        .join(', ')}`,
  ].filter((quirk): quirk is string => typeof quirk === 'string');
  const lines = [
    `### ${profile.label} (${code(profile.id)})`,
    '',
    `- Documentation: <${profile.docs_url}>`,
    `- Authorization: ${code(profile.authorization_endpoint)}; token: ${code(profile.token_endpoint)}` +
      (profile.revocation_endpoint ? `; revocation: ${code(profile.revocation_endpoint)}` : ''),
    ...profile.params.map(
      (param) =>
        `- Parameter ${code(param.name)}: ${param.description} (${code(param.pattern)}${param.default === undefined ? ', required' : `, default ${code(param.default)}`})`,
    ),
    `- Scopes, for example: ${profile.scopes_example.length > 0 ? profile.scopes_example.map(code).join(', ') : 'none (the provider has no scopes)'}`,
    `- Quirks: ${quirks.join('; ')}`,
    `- API proxy: ${profile.api_base_url === null ? 'none' : code(profile.api_base_url)}` +
      Object.entries(profile.api_headers)
        .map(([n, v]) => `, with ${code(`${n}: ${v}`)}`)
        .join(''),
    ...profile.connection_values.map(
      (value) =>
        `- Per connection: ${code(value.name)}, ${value.description} (${value.kind === 'origin' ? 'an https origin whose host matches' : 'matching'} ${code(value.pattern)})`,
    ),
    `- Refresh tokens: ${profile.refresh}`,
    ...profile.notes.map((note) => `- ${note}`),
    '',
  ];
  return lines.join('\n');
}

describe('docs/providers.md', () => {
  it('lists every profile as the catalog has it (KEYWAY_UPDATE_DOCS=1 rewrites it)', () => {
    const file = new URL('../../../docs/providers.md', import.meta.url);
    const text = readFileSync(file, 'utf8');
    const generated = text.replace(
      /<!-- catalog -->[\s\S]*?<!-- \/catalog -->/,
      `<!-- catalog -->\n\n${[...profiles]
        .sort((a, b) => (a.id < b.id ? -1 : 1))
        .map(profileMarkdown)
        .join('\n')}<!-- /catalog -->`,
    );
    if (process.env.KEYWAY_UPDATE_DOCS === '1') writeFileSync(file, generated);
    expect(readFileSync(file, 'utf8')).toBe(generated);
    expect(generated.match(/^### /gm)?.length).toBeGreaterThanOrEqual(profiles.length);
  });
});
