import { lookup } from 'node:dns/promises';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer, Agent as HttpAgent } from 'node:http';
import { type AddressInfo, connect, createServer as createNetServer } from 'node:net';
import { hostname } from 'node:os';
import { type Broker, createBroker, type KeywayEvent, rootPrincipal } from '@keyway/core';
import { classifyAddress } from '@keyway/core/outbound';
import { memoryStorage } from '@keyway/store-memory';
import { createTestWorld, type TestWorld, type TestWorldOptions } from '@keyway/testing';
import { afterEach, describe, expect, it } from 'vitest';

/** The part of a stored provider state these tests rewrite behind the broker's back. */
type ProviderState = {
  registrations: Record<string, { client_id: string }>;
  authorization_server: { authorization_endpoint: string };
};

import { createHandler } from '../src/index.js';
import { toNodeHandler } from '../src/node/index.js';
import {
  Harness,
  listenOnLoopback,
  ROOT_KEY,
  sendRaw,
  storageFactories,
  VAULT_KEY,
} from './harness.js';

// Regression tests of the security probe (issue 8), each named after its finding.

const BASE = 'https://keyway.example.test';
const APP = 'https://app.example.test';
const VICTIM = 'tenants/bob/linear';

/** One request that left the broker, with everything it carried. */
interface Sent {
  url: string;
  method: string;
  headers: Record<string, string>;
  body: string;
}

/** Two worlds behind one fetch: the legitimate one, and one an attacker runs. */
function twoWorlds(now: () => number, legitOptions: TestWorldOptions = {}) {
  const legit = createTestWorld({ now, ...legitOptions });
  const evil = createTestWorld({
    now,
    resourceUrl: 'https://evil.example.test/mcp',
    issuer: 'https://auth.evil.example.test',
  });
  const toEvil: Sent[] = [];
  const fetch = async (input: string | URL | Request, init: RequestInit = {}) => {
    const url = new URL(String(input instanceof Request ? input.url : input));
    if (!url.hostname.endsWith('evil.example.test')) return legit.fetch(input, init);
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((value, name) => {
      headers[name] = value;
    });
    toEvil.push({
      url: url.href,
      method: init.method ?? 'GET',
      headers,
      body: init.body === undefined || init.body === null ? '' : String(init.body),
    });
    return evil.fetch(input, init);
  };
  return { legit, evil, toEvil, fetch };
}

/** A world whose token endpoint holds every refresh until `release()`. */
function gatedWorld(now: () => number) {
  const world = createTestWorld({ now });
  let release!: () => void;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  let arrived!: () => void;
  const reached = new Promise<void>((resolve) => {
    arrived = resolve;
  });
  const fetch = async (input: string | URL | Request, init: RequestInit = {}) => {
    if (String(init.body ?? '').includes('grant_type=refresh_token')) {
      arrived();
      await gate;
    }
    return world.fetch(input, init);
  };
  return { world, fetch, release, reached };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.each(storageFactories)('security probe findings ($name storage)', (factory) => {
  let h: Harness;
  const events: KeywayEvent[] = [];

  async function harness(fetch: typeof globalThis.fetch | TestWorld['fetch']) {
    h = new Harness(await factory.create(), {
      fetch,
      baseUrl: BASE,
      providerManagement: true,
      allowedRedirects: [APP],
      onEvent: (event) => {
        events.push(event);
      },
    });
    return h;
  }

  async function connect(world: TestWorld, connectionId: string, token = ROOT_KEY) {
    const started = await h.call('POST', '/api/oauth/authorize/linear', {
      token,
      body: { connection_id: connectionId },
    });
    expect(started.status).toBe(201);
    const back = new URL(world.consent(started.body.authorization_url));
    return h.call('GET', `${back.pathname}${back.search}`, { token: null });
  }

  const extraBrokers: Broker[] = [];

  afterEach(async () => {
    expect(h.errors).toEqual([]);
    events.splice(0);
    for (const broker of extraBrokers.splice(0)) await broker.close();
    await h.broker.close();
  });

  describe('High: refresh and revocation follow the connection, not the provider', () => {
    it('never sends a connection’s refresh token to a server the provider was re-pointed at by a provider-scoped token', async () => {
      const worlds = twoWorlds(() => h.now);
      await harness(worlds.fetch);
      const created = await h.call('PUT', '/api/admin/providers/linear', {
        body: { template: 'mcp', configuration: { resource_url: worlds.legit.resourceUrl } },
      });
      expect(created.status).toBe(201);
      expect((await connect(worlds.legit, VICTIM)).status).toBe(200);
      const victimTokens = await h.storedTokens(VICTIM);
      const legitSecret = worlds.legit.clients.get(victimTokens.party.client_id)?.client_secret;

      // A token that manages only the provider, and cannot read the victim's connection.
      const attacker = await h.mint('mallory', ['linear']);
      expect(
        (await h.call('GET', `/api/oauth/connections/${VICTIM}`, { token: attacker })).status,
      ).toBe(403);
      const repointed = await h.call('PUT', '/api/admin/providers/linear', {
        token: attacker,
        body: { template: 'mcp', configuration: { resource_url: worlds.evil.resourceUrl } },
      });
      expect(repointed.status).toBe(200);
      expect(repointed.body.authorization_server.issuer).toBe('https://auth.evil.example.test');
      expect(repointed.body.last_party_change).toEqual({
        at: new Date(h.now).toISOString(),
        previous_issuer: 'https://auth.example.test',
        previous_client_id: victimTokens.party.client_id,
        previous_resource_url: worlds.legit.resourceUrl,
        connections_reauthorization_required: 1,
      });
      expect(events.map((e) => `${e.type} ${e.resource}`)).toContain(
        `connection.reauthorization_required ${VICTIM}`,
      );

      // The victim's app asks for a fresh token: nothing goes anywhere, the connection
      // must be authorized again.
      const refreshed = await h.call('GET', `/api/oauth/credentials/${VICTIM}?force_refresh=true`);
      expect(refreshed.status).toBe(409);
      expect(refreshed.body.error).toBe('connection_not_active');
      const view = await h.call('GET', `/api/oauth/connections/${VICTIM}`);
      expect(view.body.status).toBe('error');
      expect(view.body.error).toEqual({
        code: 'reauthorization_required',
        description:
          'the provider moved to another authorization server or client since this connection was authorized: authorize again',
      });
      expect(worlds.evil.stats.refreshes).toBe(0);
      expect(worlds.legit.stats.refreshes).toBe(0);

      // Deleting the connection revokes at the server the tokens came from, never the new one.
      expect((await h.call('DELETE', `/api/oauth/connections/${VICTIM}`)).status).toBe(204);
      expect(worlds.evil.stats.revocations).toBe(0);
      expect(worlds.legit.stats.revocations).toBe(2);
      expect(worlds.legit.isValidAccessToken(victimTokens.access_token)).toBe(false);

      // Nothing of the victim's grant or the old client ever reached the attacker's servers.
      const carried = JSON.stringify(worlds.toEvil);
      for (const secret of [
        victimTokens.refresh_token as string,
        victimTokens.access_token,
        victimTokens.party.client_id,
        legitSecret as string,
      ]) {
        expect(carried).not.toContain(secret);
      }
      expect(worlds.toEvil.some((sent) => /\/oauth\/(token|revoke)$/.test(sent.url))).toBe(false);
    });

    it('refuses to refresh when the provider’s client changed behind the connection’s back, sending nothing', async () => {
      const worlds = twoWorlds(() => h.now);
      await harness(worlds.fetch);
      await h.call('PUT', '/api/admin/providers/linear', {
        body: { template: 'mcp', configuration: { resource_url: worlds.legit.resourceUrl } },
      });
      await connect(worlds.legit, VICTIM);
      // Another instance (or an older version) swapped the client without marking anything.
      const record = await h.storage.getProvider('linear');
      const state = structuredClone(record?.state) as unknown as ProviderState;
      (state.registrations['https://auth.example.test'] as { client_id: string }).client_id =
        'someone-else';
      expect(
        await h.storage.compareAndSetProvider(
          { ...(record as NonNullable<typeof record>), state: state as never, version: 99 },
          record?.version as number,
        ),
      ).toBe(true);
      const requestsBefore = worlds.legit.requests.length;
      const refreshed = await h.call('GET', `/api/oauth/credentials/${VICTIM}?force_refresh=true`);
      expect(refreshed.status).toBe(409);
      expect(refreshed.body.error).toBe('reauthorization_required');
      expect(worlds.legit.requests.length).toBe(requestsBefore);
      expect((await h.call('GET', `/api/oauth/connections/${VICTIM}`)).body.error.code).toBe(
        'reauthorization_required',
      );
    });

    it('does not exchange a code at a server the provider moved to between consent and callback', async () => {
      const worlds = twoWorlds(() => h.now);
      await harness(worlds.fetch);
      await h.call('PUT', '/api/admin/providers/linear', {
        body: { template: 'mcp', configuration: { resource_url: worlds.legit.resourceUrl } },
      });
      const started = await h.call('POST', '/api/oauth/authorize/linear', {
        body: { connection_id: VICTIM },
      });
      const back = new URL(worlds.legit.consent(started.body.authorization_url));
      await h.call('PUT', '/api/admin/providers/linear', {
        body: { template: 'mcp', configuration: { resource_url: worlds.evil.resourceUrl } },
      });
      const reply = await h.call('GET', `${back.pathname}${back.search}`, { token: null });
      expect(reply.status).toBe(200);
      expect(reply.text).toContain('Not connected');
      expect(worlds.legit.stats.codeExchanges).toBe(0);
      expect(worlds.toEvil.some((sent) => sent.url.endsWith('/oauth/token'))).toBe(false);
      expect((await h.call('GET', `/api/oauth/connections/${VICTIM}`)).body.status).toBe('error');
    });

    it('keeps refreshing at the same server after a PUT that changes neither server nor client', async () => {
      const worlds = twoWorlds(() => h.now);
      await harness(worlds.fetch);
      await h.call('PUT', '/api/admin/providers/linear', {
        body: { template: 'mcp', configuration: { resource_url: worlds.legit.resourceUrl } },
      });
      await connect(worlds.legit, VICTIM);
      const again = await h.call('PUT', '/api/admin/providers/linear', {
        body: {
          template: 'mcp',
          label: 'Renamed',
          configuration: { resource_url: worlds.legit.resourceUrl },
        },
      });
      expect(again.body.last_party_change).toBeNull();
      const refreshed = await h.call('GET', `/api/oauth/credentials/${VICTIM}?force_refresh=true`);
      expect(refreshed.status).toBe(200);
      expect(worlds.legit.stats.refreshes).toBe(1);
    });
  });

  describe('M1: every endpoint from authorization-server metadata is scheme-checked', () => {
    it.each([
      ['authorization_endpoint', 'javascript:alert(document.domain)//', 'must use https'],
      ['authorization_endpoint', 'data:text/html,<script>alert(1)</script>', 'must use https'],
      [
        'authorization_endpoint',
        'http://auth.example.test/oauth/authorize',
        'must use https (plain http only for allowed hosts)',
      ],
      ['token_endpoint', 'https://user:pw@auth.example.test/token', 'must not contain user info'],
      ['token_endpoint', 'https://auth.example.test/token#frag', 'must not have a fragment'],
      ['registration_endpoint', 'ftp://auth.example.test/register', 'must use https'],
      [
        'revocation_endpoint',
        'http://169.254.169.254/latest',
        'must use https (plain http only for allowed hosts)',
      ],
      ['revocation_endpoint', 'https://127.0.0.1/revoke', 'names an address that is not allowed'],
      ['jwks_uri', 'file:///etc/passwd', 'must use https'],
      ['jwks_uri', 'not a url', 'is not an absolute URL'],
    ])('refuses %s %s with 422 naming the field', async (field, value, problem) => {
      const world = createTestWorld({
        now: () => h.now,
        serverMetadataOverrides: { [field]: value },
      });
      await harness(world.fetch);
      const reply = await h.call('PUT', '/api/admin/providers/linear', {
        body: { template: 'mcp', configuration: { resource_url: world.resourceUrl } },
      });
      expect(reply.status).toBe(422);
      expect(reply.body.error).toBe('unsupported_authorization_server');
      // The field and the value as the server published it, so an operator sees the fault.
      const note = `"${field}" ${JSON.stringify(value)} ${problem}`;
      expect(reply.body.error_description).toBe(
        `the authorization server does not meet what Keyway requires (${note})`,
      );
      expect(reply.body.details.at(-1)).toEqual({
        step: 'requirements',
        url: null,
        status: null,
        ok: false,
        note,
      });
      expect(await h.storage.getProvider('linear')).toBeNull();
      expect(world.stats.registrations).toBe(0);
    });

    it('refuses to hand out a consent address built from a stored endpoint that is not https', async () => {
      const world = createTestWorld({ now: () => h.now });
      await harness(world.fetch);
      await h.call('PUT', '/api/admin/providers/linear', {
        body: { template: 'mcp', configuration: { resource_url: world.resourceUrl } },
      });
      // A record written before endpoints were checked.
      const record = await h.storage.getProvider('linear');
      const state = structuredClone(record?.state) as unknown as ProviderState;
      state.authorization_server.authorization_endpoint = 'javascript:alert(1)//';
      await h.storage.compareAndSetProvider(
        { ...(record as NonNullable<typeof record>), state: state as never, version: 2 },
        1,
      );
      const reply = await h.call('POST', '/api/oauth/authorize/linear', {
        body: { connection_id: VICTIM },
      });
      expect(reply.status).toBe(422);
      expect(reply.body).toEqual({
        error: 'unsupported_authorization_server',
        error_description: 'authorization_endpoint must use https',
        details: [
          { path: 'authorization_endpoint', message: 'authorization_endpoint must use https' },
        ],
      });
      expect(reply.text).not.toContain('javascript');
    });

    it('accepts plain http endpoints on a host the configuration allows', async () => {
      const world = createTestWorld({
        now: () => h.now,
        resourceUrl: 'http://localhost:9/mcp',
        issuer: 'http://localhost:9',
      });
      h = new Harness(await factory.create(), {
        fetch: world.fetch,
        baseUrl: BASE,
        providerManagement: true,
        allowedHosts: ['localhost'],
      });
      const reply = await h.call('PUT', '/api/admin/providers/linear', {
        body: { template: 'mcp', configuration: { resource_url: world.resourceUrl } },
      });
      expect(reply.status).toBe(201);
      expect(reply.body.authorization_server.token_endpoint).toBe('http://localhost:9/oauth/token');
    });
  });

  describe('M2: failed authentication and minting are rate limited', () => {
    const BAD = `kw1_${'A'.repeat(60)}`;
    const mintAs = (token: string | undefined, name: string) =>
      h.call('POST', '/api/admin/tokens', {
        ...(token === undefined ? {} : { token }),
        body: { name, scopes: ['acme'], expires_in: 600 },
      });

    it('answers 429 with Retry-After to an address past 20 failures a minute, whatever it presents, and never resets on success', async () => {
      await harness(createTestWorld({ now: () => h.now }).fetch);
      const from = (clientAddress: string, token: string) =>
        h.call('GET', '/api/admin/tokens', { token, clientAddress });
      for (let i = 0; i < 19; i++) expect((await from('203.0.113.7', BAD)).status).toBe(401);
      // A success in between neither counts nor resets the window.
      expect((await from('203.0.113.7', ROOT_KEY)).status).toBe(200);
      expect((await from('203.0.113.7', BAD)).status).toBe(401);
      h.now += 15_000;
      const limited = await from('203.0.113.7', ROOT_KEY);
      expect(limited.status).toBe(429);
      expect(limited.headers.get('retry-after')).toBe('45');
      expect(limited.body).toEqual({
        error: 'rate_limited',
        error_description: 'too many failed authentications from this address; retry after 45 s',
      });
      expect((await from('203.0.113.7', BAD)).status).toBe(429);
      // Another address, and a request without an address (no limit known), are not affected.
      expect((await from('203.0.113.8', ROOT_KEY)).status).toBe(200);
      expect((await h.call('GET', '/api/admin/tokens')).status).toBe(200);
      h.now += 45_000;
      expect((await from('203.0.113.7', ROOT_KEY)).status).toBe(200);
    });

    it('counts an IPv6 client by its /64, and an IPv4-mapped address as its IPv4 address', async () => {
      await harness(createTestWorld({ now: () => h.now }).fetch);
      for (let i = 0; i < 20; i++) {
        const address = `2001:db8:1:2:${i.toString(16)}::1`;
        expect(
          (await h.call('GET', '/api/admin/tokens', { token: BAD, clientAddress: address })).status,
        ).toBe(401);
      }
      const sameNetwork = await h.call('GET', '/api/admin/tokens', {
        clientAddress: '2001:0db8:0001:0002:ffff::9',
      });
      expect(sameNetwork.status).toBe(429);
      const otherNetwork = await h.call('GET', '/api/admin/tokens', {
        clientAddress: '2001:db8:1:3::1',
      });
      expect(otherNetwork.status).toBe(200);
      for (let i = 0; i < 20; i++) {
        await h.call('GET', '/api/admin/tokens', { token: BAD, clientAddress: '198.51.100.4' });
      }
      const mapped = await h.call('GET', '/api/admin/tokens', {
        clientAddress: '::ffff:198.51.100.4',
      });
      expect(mapped.status).toBe(429);
    });

    it('limits minting per scoped caller, never the root key', async () => {
      await harness(createTestWorld({ now: () => h.now }).fetch);
      const ci = await h.mint('ci', ['acme']);
      for (let i = 0; i < 60; i++) {
        expect((await mintAs(ci, `ci.job-${i}`)).status).toBe(201);
      }
      h.now += 59_000;
      const refused = await mintAs(ci, 'ci.job-60');
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(refused.body.error).toBe('rate_limited');
      expect((await h.call('GET', '/api/admin/tokens/ci.job-60')).status).toBe(404);
      for (let i = 0; i < 70; i++) {
        expect((await mintAs(undefined, `root-${i}`)).status).toBe(201);
      }
      h.now += 1_000;
      expect((await mintAs(ci, 'ci.job-60')).status).toBe(201);
    });

    it('turns limits off with rateLimits: false, or one of them, and takes other limits', async () => {
      h = new Harness(await factory.create(), { rateLimits: false });
      for (let i = 0; i < 40; i++) {
        await h.call('GET', '/api/admin/tokens', { token: BAD, clientAddress: '203.0.113.9' });
      }
      expect(
        (await h.call('GET', '/api/admin/tokens', { clientAddress: '203.0.113.9' })).status,
      ).toBe(200);
      await h.broker.close();
      h = new Harness(await factory.create(), {
        rateLimits: { auth: { limit: 2, windowSeconds: 10 }, mint: false },
      });
      await h.call('GET', '/api/admin/tokens', { token: BAD, clientAddress: '203.0.113.9' });
      await h.call('GET', '/api/admin/tokens', { token: BAD, clientAddress: '203.0.113.9' });
      const limited = await h.call('GET', '/api/admin/tokens', { clientAddress: '203.0.113.9' });
      expect(limited.status).toBe(429);
      expect(limited.headers.get('retry-after')).toBe('10');
      const ci = await h.mint('ci', ['acme']);
      for (let i = 0; i < 70; i++) {
        expect((await mintAs(ci, `ci.j${i}`)).status).toBe(201);
      }
    });

    it('shares the counters of two instances on one database with shared: true, and keeps them per instance without', async () => {
      h = new Harness(await factory.create(), { rateLimits: { shared: true } });
      const sameDatabase = async () =>
        factory.reopen === undefined ? h.storage : factory.reopen(h.storage);
      const instance = async (shared: boolean) => {
        const broker = createBroker({
          rootKey: ROOT_KEY,
          storage: await sameDatabase(),
          vaultKeys: [VAULT_KEY],
          now: () => h.now,
          purgeIntervalMs: false,
          rateLimits: { shared },
        });
        extraBrokers.push(broker);
        const handler = createHandler(broker);
        return async (token: string, clientAddress: string) =>
          handler(
            new Request('http://keyway.test/api/admin/tokens', {
              headers: { authorization: `Bearer ${token}` },
            }),
            { clientAddress },
          );
      };
      const other = await instance(true);
      const alone = await instance(false);
      for (let i = 0; i < 10; i++) {
        await h.call('GET', '/api/admin/tokens', { token: BAD, clientAddress: '203.0.113.10' });
        expect((await other(BAD, '203.0.113.10')).status).toBe(401);
        expect((await alone(BAD, '203.0.113.10')).status).toBe(401);
      }
      const limited = await other(ROOT_KEY, '203.0.113.10');
      expect(limited.status).toBe(429);
      expect(limited.headers.get('retry-after')).toBe('60');
      expect(
        (await h.call('GET', '/api/admin/tokens', { clientAddress: '203.0.113.10' })).status,
      ).toBe(429);
      // The instance that counts alone saw 10 failures only.
      expect((await alone(ROOT_KEY, '203.0.113.10')).status).toBe(200);
    });
  });

  describe('M4: with verify_user, a consent link completes only for the app’s own user', () => {
    async function consentWithVerification(world: TestWorld, token = ROOT_KEY) {
      const started = await h.call('POST', '/api/oauth/authorize/linear', {
        token,
        body: { connection_id: VICTIM, verify_user: true, redirect_to: `${APP}/done` },
      });
      expect(started.status).toBe(201);
      const back = new URL(world.consent(started.body.authorization_url));
      const reply = await h.call('GET', `${back.pathname}${back.search}`, { token: null });
      expect(reply.status).toBe(302);
      const target = new URL(reply.headers.get('location') as string);
      expect(`${target.origin}${target.pathname}`).toBe(`${APP}/done`);
      expect(target.searchParams.get('connection_id')).toBe(VICTIM);
      expect(target.searchParams.get('status')).toBe('verification_required');
      expect(target.searchParams.get('error')).toBeNull();
      return target.searchParams.get('flow_id') as string;
    }

    async function providerFor(world: TestWorld) {
      await harness(world.fetch);
      const created = await h.call('PUT', '/api/admin/providers/linear', {
        body: { template: 'mcp', configuration: { resource_url: world.resourceUrl } },
      });
      expect(created.status).toBe(201);
    }

    it('leaves the connection pending after consent until the app confirms the flow', async () => {
      const world = createTestWorld({ now: () => h.now });
      await providerFor(world);
      const flowId = await consentWithVerification(world);
      expect(flowId).toMatch(/^[A-Za-z0-9_-]{43}$/);
      const before = await h.call('GET', `/api/oauth/connections/${VICTIM}`);
      expect(before.body.status).toBe('pending');
      expect((await h.call('GET', `/api/oauth/credentials/${VICTIM}`)).status).toBe(409);
      expect(events.map((e) => e.type)).not.toContain('connection.authorized');

      const confirmed = await h.call('POST', '/api/oauth/verify', { body: { flow_id: flowId } });
      expect(confirmed.status).toBe(200);
      expect(confirmed.body.connection_id).toBe(VICTIM);
      expect(confirmed.body.status).toBe('active');
      const credentials = await h.call('GET', `/api/oauth/credentials/${VICTIM}`);
      expect(credentials.status).toBe(200);
      expect(world.isValidAccessToken(credentials.body.access_token)).toBe(true);
      expect(events.filter((e) => e.type === 'connection.authorized')).toEqual([
        expect.objectContaining({ actor: 'root', resource: VICTIM }),
      ]);
    });

    it('refuses another principal’s confirmation with 403, and the flow id is spent', async () => {
      const world = createTestWorld({ now: () => h.now });
      await providerFor(world);
      const tenant = await h.mint('bob-app', ['tenants/bob', 'linear']);
      const flowId = await consentWithVerification(world, tenant);
      const mallory = await h.mint('mallory', ['tenants/mallory', 'linear']);
      const refused = await h.call('POST', '/api/oauth/verify', {
        token: mallory,
        body: { flow_id: flowId },
      });
      expect(refused.status).toBe(403);
      expect(refused.body.error).toBe('insufficient_scope');
      const again = await h.call('POST', '/api/oauth/verify', {
        token: tenant,
        body: { flow_id: flowId },
      });
      expect(again.status).toBe(400);
      expect(again.body.error).toBe('invalid_request');
      expect((await h.call('GET', `/api/oauth/connections/${VICTIM}`)).body.status).toBe('pending');
    });

    it('answers 400 to a replayed, unknown or expired flow id', async () => {
      const world = createTestWorld({ now: () => h.now });
      await providerFor(world);
      const flowId = await consentWithVerification(world);
      const first = await h.call('POST', '/api/oauth/verify', { body: { flow_id: flowId } });
      expect(first.status).toBe(200);
      const replay = await h.call('POST', '/api/oauth/verify', { body: { flow_id: flowId } });
      expect(replay.status).toBe(400);
      expect(replay.body).toEqual({
        error: 'invalid_request',
        error_description: 'this flow is unknown, expired or already used',
        details: [{ path: 'flow_id', message: 'this flow is unknown, expired or already used' }],
      });
      const unknown = await h.call('POST', '/api/oauth/verify', {
        body: { flow_id: 'x'.repeat(43) },
      });
      expect(unknown.status).toBe(400);
      expect(unknown.body.error).toBe('invalid_request');

      const late = await consentWithVerification(world);
      h.now += 11 * 60 * 1000;
      const expired = await h.call('POST', '/api/oauth/verify', { body: { flow_id: late } });
      expect(expired.status).toBe(400);
      expect(expired.body.error).toBe('invalid_request');
      const malformed = await h.call('POST', '/api/oauth/verify', { body: { flow: late } });
      expect(malformed.status).toBe(400);
      expect(malformed.body.error).toBe('invalid_request');
    });

    it('needs a redirect_to to ask for verification', async () => {
      const world = createTestWorld({ now: () => h.now });
      await providerFor(world);
      const reply = await h.call('POST', '/api/oauth/authorize/linear', {
        body: { connection_id: VICTIM, verify_user: true },
      });
      expect(reply.status).toBe(400);
      expect(reply.body.error).toBe('invalid_request');
      expect(reply.body.details).toEqual([
        {
          path: 'redirect_to',
          message: '"verify_user" needs a "redirect_to": the app confirms the flow there',
        },
      ]);
    });

    it('keeps an active connection on its previous tokens until a re-authorization is confirmed', async () => {
      const world = createTestWorld({ now: () => h.now });
      await providerFor(world);
      expect((await connect(world, VICTIM)).status).toBe(200);
      const previous = await h.storedTokens(VICTIM);
      const flowId = await consentWithVerification(world);
      expect((await h.storedTokens(VICTIM)).access_token).toBe(previous.access_token);
      expect((await h.call('GET', `/api/oauth/connections/${VICTIM}`)).body.status).toBe('active');
      expect(
        (await h.call('POST', '/api/oauth/verify', { body: { flow_id: flowId } })).status,
      ).toBe(200);
      const now = await h.storedTokens(VICTIM);
      expect(now.access_token).not.toBe(previous.access_token);
      expect(now.generation).toBe(previous.generation + 1);
    });
  });

  describe('L5: refresh never overwrites a newer authorization, and its lease lasts as long as it runs', () => {
    it('drops the result of a refresh that finishes after a new authorization completed', async () => {
      const gated = gatedWorld(() => h.now);
      await harness(gated.fetch);
      await h.call('PUT', '/api/admin/providers/linear', {
        body: { template: 'mcp', configuration: { resource_url: gated.world.resourceUrl } },
      });
      await connect(gated.world, VICTIM);
      const slow = h.call('GET', `/api/oauth/credentials/${VICTIM}?force_refresh=true`);
      await gated.reached;
      // The user authorizes again while the old refresh is still at the server.
      expect((await connect(gated.world, VICTIM)).status).toBe(200);
      const newer = await h.storedTokens(VICTIM);
      expect(newer.generation).toBe(2);
      gated.release();
      const reply = await slow;
      expect(reply.status).toBe(200);
      expect(reply.body.access_token).toBe(newer.access_token);
      const stored = await h.storedTokens(VICTIM);
      expect(stored.access_token).toBe(newer.access_token);
      expect(stored.refresh_token).toBe(newer.refresh_token);
      expect(gated.world.stats.refreshes).toBe(1);
      expect(events.filter((e) => e.type === 'connection.refreshed')).toEqual([]);
    });

    it('renews the lease of a slow refresh, so a second instance waits for it instead of refreshing again', async () => {
      const gated = gatedWorld(() => h.now);
      h = new Harness(await factory.create(), {
        fetch: gated.fetch,
        baseUrl: BASE,
        providerManagement: true,
        refreshLeaseMs: 600,
      });
      await h.call('PUT', '/api/admin/providers/linear', {
        body: { template: 'mcp', configuration: { resource_url: gated.world.resourceUrl } },
      });
      await connect(gated.world, VICTIM);
      const other = createBroker({
        rootKey: ROOT_KEY,
        storage: factory.reopen === undefined ? h.storage : await factory.reopen(h.storage),
        vaultKeys: [VAULT_KEY],
        fetch: gated.fetch,
        baseUrl: BASE,
        now: () => h.now,
        purgeIntervalMs: false,
        refreshLeaseMs: 600,
      });
      extraBrokers.push(other);
      const root = rootPrincipal();
      const first = h.broker.connections.credentials(root, VICTIM, { force_refresh: true });
      await gated.reached;
      // Far past the lease's first expiry, on the broker's clock; renewals keep it held.
      h.now += 5_000;
      await sleep(450);
      const second = other.connections.credentials(root, VICTIM, { force_refresh: true });
      await sleep(100);
      gated.release();
      const [a, b] = await Promise.all([first, second]);
      expect(gated.world.stats.refreshes).toBe(1);
      expect(b.access_token).toBe(a.access_token);
      expect(gated.world.isValidAccessToken(a.access_token)).toBe(true);
    });
  });
});

describe('M2 over Node http: the client address comes from the socket, or from X-Forwarded-For only when trusted', () => {
  const BAD = `kw1_${'A'.repeat(60)}`;
  let server: Awaited<ReturnType<typeof listenOnLoopback>> | undefined;

  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  async function serveWith(trustProxy: boolean) {
    const h = new Harness(memoryStorage());
    server = await listenOnLoopback(toNodeHandler(h.handler, { trustProxy }));
    const port = server.port;
    return (token: string, forwardedFor?: string) =>
      fetch(`http://127.0.0.1:${port}/api/admin/tokens`, {
        headers: {
          authorization: `Bearer ${token}`,
          ...(forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor }),
        },
      });
  }

  it('counts the socket peer and ignores X-Forwarded-For by default', async () => {
    const get = await serveWith(false);
    for (let i = 0; i < 20; i++) {
      expect((await get(BAD, `198.51.100.${i}`)).status).toBe(401);
    }
    const limited = await get(ROOT_KEY, '192.0.2.200');
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(59);
  });

  it('with trustProxy, counts the last X-Forwarded-For entry (the one the proxy appended)', async () => {
    const get = await serveWith(true);
    for (let i = 0; i < 20; i++) {
      expect((await get(BAD, `10.9.9.${i}, 198.51.100.1`)).status).toBe(401);
    }
    // A first entry the client chose does not escape the limit.
    expect((await get(ROOT_KEY, '192.0.2.55, 198.51.100.1')).status).toBe(429);
    expect((await get(ROOT_KEY, '198.51.100.1, 198.51.100.2')).status).toBe(200);
  });
});

/**
 * A host name of this machine that resolves to a non-public address without any DNS server:
 * the machine's own name (usually in /etc/hosts on 127.0.1.1, 127.0.0.1 or a container
 * address), else any other name /etc/hosts maps to loopback. `localhost` is not one: the
 * URL guard refuses it before any transport runs.
 */
async function internalName(): Promise<string> {
  const candidates = [hostname()];
  try {
    for (const line of readFileSync('/etc/hosts', 'utf8').split('\n')) {
      const [address, ...names] = line.replace(/#.*/, '').trim().split(/\s+/);
      if (address?.startsWith('127.') || address === '::1') candidates.push(...names);
    }
  } catch {}
  for (const name of candidates) {
    if (name === '' || name === 'localhost' || name.endsWith('.localhost')) continue;
    const addresses = await lookup(name, { all: true }).catch(() => []);
    if (addresses.length > 0 && addresses.some((a) => classifyAddress(a.address) !== 'public')) {
      return name;
    }
  }
  throw new Error('this machine has no host name that resolves to a non-public address');
}

describe('M3: the library’s default transport on Node checks what a host name resolves to', () => {
  it('refuses a name that resolves to an internal address, says only "address not allowed", and never connects', async () => {
    const name = await internalName();
    let connections = 0;
    const server = createNetServer((socket) => {
      connections++;
      socket.destroy();
    });
    server.listen(0);
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    // No `fetch` option: the broker picks its own transport.
    const h = new Harness(memoryStorage(), { providerManagement: true, baseUrl: BASE });
    try {
      const reply = await h.call('POST', '/api/admin/discover', {
        body: { resource_url: `https://${name}:${port}/mcp` },
      });
      expect(reply.status).toBe(200);
      expect(reply.body.ok).toBe(false);
      expect(reply.body.error).toBe('discovery_failed');
      const notes = reply.body.steps.map((step: { note: string }) => step.note);
      expect(notes[0]).toBe(`${name}: address not allowed`);
      expect(JSON.stringify(reply.body)).not.toMatch(/loopback|private|127\.|::1/);
      expect(connections).toBe(0);
    } finally {
      await h.broker.close();
      server.close();
    }
  });
});

describe('L1, L2: request bodies over Node http', () => {
  let server: ReturnType<typeof createHttpServer> | undefined;
  let connections = 0;
  const answered: number[] = [];

  afterEach(async () => {
    server?.closeAllConnections();
    server?.close();
    server = undefined;
    connections = 0;
    answered.splice(0);
  });

  async function start(h: Harness): Promise<number> {
    const handle = toNodeHandler(async (request) => {
      const response = await h.handler(request);
      answered.push(response.status);
      return response;
    });
    server = createHttpServer(handle);
    server.on('connection', () => {
      connections++;
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    return (server.address() as AddressInfo).port;
  }

  const send = (port: number, agent: HttpAgent, method: string, token: string, body?: Uint8Array) =>
    sendRaw({
      port,
      agent,
      method,
      path: '/api/admin/tokens',
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body }),
    });

  it('L1: reads and discards the body of an early 401, so the keep-alive connection serves the next request', async () => {
    const h = new Harness(memoryStorage());
    const port = await start(h);
    const agent = new HttpAgent({ keepAlive: true, maxSockets: 1 });
    try {
      const body = new Uint8Array(512 * 1024).fill(0x20);
      const refused = await send(port, agent, 'POST', `kw1_${'A'.repeat(60)}`, body);
      expect(refused.status).toBe(401);
      expect(refused.headers.connection).toBe('keep-alive');
      const next = await send(port, agent, 'GET', ROOT_KEY);
      expect(next.status).toBe(200);
      const wrongMethod = await send(port, agent, 'PATCH', ROOT_KEY, body);
      expect(wrongMethod.status).toBe(405);
      expect((await send(port, agent, 'GET', ROOT_KEY)).status).toBe(200);
      expect(connections).toBe(1);
    } finally {
      agent.destroy();
    }
  });

  it('L1: closes the connection after an early answer to a body larger than the limit', async () => {
    const h = new Harness(memoryStorage());
    const port = await start(h);
    const agent = new HttpAgent({ keepAlive: true, maxSockets: 1 });
    try {
      const refused = await send(
        port,
        agent,
        'POST',
        `kw1_${'A'.repeat(60)}`,
        new Uint8Array(3 * 1024 * 1024).fill(0x20),
      );
      expect(refused.status).toBe(401);
      expect(refused.headers.connection).toBe('close');
      expect((await send(port, agent, 'GET', ROOT_KEY)).status).toBe(200);
      expect(connections).toBe(2);
    } finally {
      agent.destroy();
    }
  });

  it('L2: a client that goes away while sending its body is not an internal error', async () => {
    const h = new Harness(memoryStorage());
    const port = await start(h);
    const socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    socket.write(
      `POST /api/admin/tokens HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${ROOT_KEY}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"name":`,
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    socket.destroy();
    while (answered.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(answered).toEqual([400]);
    expect(h.errors).toEqual([]);
  });
});
