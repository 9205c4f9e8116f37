import {
  type Broker,
  type ConnectionTokens,
  createBroker,
  type KeywayEvent,
  type ProviderState,
  rootPrincipal,
} from '@keyway/core';
import { createTestWorld, type TestWorld, type TestWorldOptions } from '@keyway/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { Harness, ROOT_KEY, storageFactories, VAULT_KEY } from './harness.js';

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

  async function storedTokens(id: string): Promise<ConnectionTokens> {
    const entry = await h.storage.getVaultEntry('connection_tokens', id);
    return JSON.parse(await h.broker.vault.open(entry as never)) as ConnectionTokens;
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
      const victimTokens = await storedTokens(VICTIM);
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
      expect(reply.body.error_description).toBe(
        `the authorization server does not meet what Keyway requires (${field} ${problem})`,
      );
      expect(reply.body.details.at(-1)).toEqual({
        step: 'requirements',
        url: null,
        status: null,
        ok: false,
        note: `${field} ${problem}`,
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
      const previous = await storedTokens(VICTIM);
      const flowId = await consentWithVerification(world);
      expect((await storedTokens(VICTIM)).access_token).toBe(previous.access_token);
      expect((await h.call('GET', `/api/oauth/connections/${VICTIM}`)).body.status).toBe('active');
      expect(
        (await h.call('POST', '/api/oauth/verify', { body: { flow_id: flowId } })).status,
      ).toBe(200);
      const now = await storedTokens(VICTIM);
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
      const newer = await storedTokens(VICTIM);
      expect(newer.generation).toBe(2);
      gated.release();
      const reply = await slow;
      expect(reply.status).toBe(200);
      expect(reply.body.access_token).toBe(newer.access_token);
      const stored = await storedTokens(VICTIM);
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
