import type { KeywayEvent } from '@keyway/core';
import { memoryStorage } from '@keyway/store-memory';
import { worstRequests } from '@keyway/test-support/worst-bodies';
import { createTestWorld, type TestWorld } from '@keyway/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { Harness, ROOT_KEY, storageFactories } from './harness.js';

// Regression tests of the third security probe (issue 22), each named after its finding.
// Every attack was written first and failed against the code before its fix.

const BASE = 'https://keyway.example.test';
const CALLBACK = `${BASE}/api/oauth/callback`;
const VICTIM = 'tenants/bob/linear';
const EVIL_MCP = 'https://evil.example.test/mcp';
const EVIL_METADATA = 'https://evil.example.test/.well-known/oauth-protected-resource/mcp';

/** One request that reached the attacker's MCP server. */
interface Received {
  url: string;
  authorization: string | null;
  body: string;
}

/**
 * An attacker's MCP server that names the honest authorization server in its metadata, so
 * a provider re-pointed at it keeps its issuer and client; it records what it receives.
 */
function evilResourceServer(issuer: string) {
  const received: Received[] = [];
  const fetch = async (input: string | URL | Request, init: RequestInit = {}) => {
    const url = new URL(String(input instanceof Request ? input.url : input));
    received.push({
      url: url.href,
      authorization: new Headers(init.headers).get('authorization'),
      body: typeof init.body === 'string' ? init.body : '',
    });
    if (url.href === EVIL_METADATA) {
      return Response.json({ resource: EVIL_MCP, authorization_servers: [issuer] });
    }
    if (url.href === EVIL_MCP) {
      return new Response(null, {
        status: 401,
        headers: { 'www-authenticate': `Bearer resource_metadata="${EVIL_METADATA}"` },
      });
    }
    return new Response('not found', { status: 404 });
  };
  return { received, fetch };
}

/** What the attacker's authorization server received at its token endpoint. */
function tokenRequestsTo(world: TestWorld): { method: string; url: string }[] {
  return world.requests.filter((request) => request.url.endsWith('/oauth/token'));
}

/**
 * The attacker's authorization server at work (RFC 9700 §4.4.1): instead of asking its user
 * for consent, it sends the browser to the honest server's authorization endpoint with
 * Keyway's request (state, PKCE challenge, scope, resource) under the client id Keyway has
 * there, and a redirect URI the honest server accepts for that client.
 */
function bounce(
  keywayRequestToAttacker: string,
  honest: TestWorld,
  clientId: string,
  redirectUri: string,
): string {
  const incoming = new URL(keywayRequestToAttacker);
  const outgoing = new URL(`${honest.issuer}/oauth/authorize`);
  for (const [name, value] of incoming.searchParams) outgoing.searchParams.set(name, value);
  outgoing.searchParams.set('client_id', clientId);
  outgoing.searchParams.set('redirect_uri', redirectUri);
  outgoing.searchParams.set('resource', honest.resourceUrl);
  return outgoing.href;
}

describe.each(storageFactories)('security probe, round 3 ($name storage)', (factory) => {
  let h: Harness;
  const events: KeywayEvent[] = [];

  async function harness(fetch: TestWorld['fetch'], extra: Record<string, unknown> = {}) {
    h = new Harness(await factory.create(), {
      fetch,
      baseUrl: BASE,
      providerManagement: true,
      onEvent: (event) => {
        events.push(event);
      },
      ...extra,
    });
    return h;
  }

  /** The legitimate world and the attacker's MCP server behind one fetch. */
  function worldWithEvilResource(options: Parameters<typeof createTestWorld>[0] = {}) {
    const world = createTestWorld({ now: () => h.now, ...options });
    const evil = evilResourceServer(world.issuer);
    const fetch = (input: string | URL | Request, init?: RequestInit) =>
      String(input instanceof Request ? input.url : input).startsWith('https://evil.example.test/')
        ? evil.fetch(input, init)
        : world.fetch(input, init);
    return { world, evil, fetch };
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

  afterEach(async () => {
    expect(h.errors).toEqual([]);
    events.splice(0);
    await h.broker.close();
  });

  describe('High 1: the probe sends a token only to the resource it was authorized for', () => {
    /** What each registration mode's provider body is, for the honest server and the attacker. */
    const modes = {
      custom: (world: TestWorld, resourceUrl: string, withSecret: boolean) => {
        const client = world.clients.get('operator-client');
        return {
          template: 'mcp',
          configuration: { resource_url: resourceUrl },
          credentials: {
            mode: 'custom',
            client_id: 'operator-client',
            // The attacker omits the secret: Keyway keeps the stored one for the same client.
            ...(withSecret ? { client_secret: client?.client_secret } : {}),
          },
        };
      },
      metadata_document: (_world: TestWorld, resourceUrl: string) => ({
        template: 'mcp',
        configuration: { resource_url: resourceUrl },
      }),
    } as const;

    it.each(['custom', 'metadata_document'] as const)(
      'puts the connections of a provider re-pointed at another MCP server (same issuer, same %s client) in reauthorization_required, and the probe sends nothing there',
      async (mode) => {
        const { world, evil, fetch } = worldWithEvilResource({
          clientIdMetadataDocuments: mode === 'metadata_document',
          dynamicRegistration: mode !== 'metadata_document',
        });
        await harness(fetch);
        world.preregister({
          client_id: 'operator-client',
          client_secret: 'operator-secret-0123456789',
          token_endpoint_auth_method: 'client_secret_basic',
          redirect_uris: [CALLBACK],
        });
        const created = await h.call('PUT', '/api/admin/providers/linear', {
          body: modes[mode](world, world.resourceUrl, true),
        });
        expect(created.status).toBe(201);
        expect(created.body.credentials.registration).toBe(
          mode === 'custom' ? 'manual' : 'metadata_document',
        );
        expect((await connect(world, VICTIM)).status).toBe(200);
        const victim = await h.storedTokens(VICTIM);
        expect(victim.party.resource_url).toBe(world.resourceUrl);

        // A token that manages only the provider re-points it at its own MCP server, which
        // names the same authorization server: issuer and client stay the same.
        const attacker = await h.mint('mallory', ['linear']);
        const repointed = await h.call('PUT', '/api/admin/providers/linear', {
          token: attacker,
          body: modes[mode](world, EVIL_MCP, false),
        });
        expect(repointed.status).toBe(200);
        expect(repointed.body.authorization_server.issuer).toBe(world.issuer);
        expect(repointed.body.credentials.client_id).toBe(victim.party.client_id);
        expect(repointed.body.last_party_change).toEqual({
          at: new Date(h.now).toISOString(),
          previous_issuer: world.issuer,
          previous_client_id: victim.party.client_id,
          previous_resource_url: world.resourceUrl,
          connections_reauthorization_required: 1,
        });
        expect(events.map((e) => `${e.type} ${e.resource}`)).toContain(
          `connection.reauthorization_required ${VICTIM}`,
        );
        const view = await h.call('GET', `/api/oauth/connections/${VICTIM}`);
        expect(view.body.status).toBe('error');
        expect(view.body.error).toEqual({
          code: 'reauthorization_required',
          description:
            'the provider was re-pointed at another MCP endpoint since this connection was authorized: authorize again',
        });

        const probe = await h.call('POST', `/api/oauth/probe/${VICTIM}`);
        expect(probe.status).toBe(409);
        expect(probe.body.error).toBe('connection_not_active');
        const carried = JSON.stringify(evil.received);
        expect(carried).not.toContain(victim.access_token);
        expect(evil.received.every((sent) => sent.authorization === null)).toBe(true);
      },
    );

    it('probes the endpoint of the authorization even when the provider was re-pointed behind the connection’s back', async () => {
      const { world, evil, fetch } = worldWithEvilResource();
      await harness(fetch);
      expect(
        (
          await h.call('PUT', '/api/admin/providers/linear', {
            body: { template: 'mcp', configuration: { resource_url: world.resourceUrl } },
          })
        ).status,
      ).toBe(201);
      expect((await connect(world, VICTIM)).status).toBe(200);
      const victim = await h.storedTokens(VICTIM);
      // Another instance (or an older version) re-pointed the provider without marking its
      // connections: the stored state names the attacker's server.
      const record = await h.storage.getProvider('linear');
      if (record === null) throw new Error('no provider');
      const state = structuredClone(record.state) as { configuration: { resource_url: string } };
      state.configuration.resource_url = EVIL_MCP;
      expect(
        await h.storage.compareAndSetProvider(
          { ...record, state, version: record.version + 1 },
          record.version,
        ),
      ).toBe(true);

      const probe = await h.call('POST', `/api/oauth/probe/${VICTIM}`);
      expect(probe.status).toBe(200);
      expect(probe.body.ok).toBe(true);
      expect(world.stats.mcpCalls).toBeGreaterThan(0);
      expect(evil.received).toEqual([]);
      expect(JSON.stringify(probe.body)).not.toContain(victim.access_token);
    });

    it('keeps the connections of a PUT that changes neither resource, server nor client', async () => {
      const { world, fetch } = worldWithEvilResource();
      await harness(fetch);
      const body = { template: 'mcp', configuration: { resource_url: world.resourceUrl } };
      await h.call('PUT', '/api/admin/providers/linear', { body });
      await connect(world, VICTIM);
      const again = await h.call('PUT', '/api/admin/providers/linear', {
        body: { ...body, label: 'Renamed' },
      });
      expect(again.body.last_party_change).toBeNull();
      expect((await h.call('GET', `/api/oauth/connections/${VICTIM}`)).body.status).toBe('active');
      expect((await h.call('POST', `/api/oauth/probe/${VICTIM}`)).body.ok).toBe(true);
    });
  });

  describe('Low 5: minting is counted per delegation tree, not per name', () => {
    const mintAs = (token: string, name: string) =>
      h.call('POST', '/api/admin/tokens', {
        token,
        body: { name, scopes: ['acme'], expires_in: 600 },
      });

    it.each([
      ['this instance', false],
      ['the storage', true],
    ] as const)(
      'counts every name of a tree against its root, with counters in %s',
      async (_where, shared) => {
        await harness(createTestWorld({ now: () => h.now }).fetch, {
          rateLimits: { mint: { limit: 4, windowSeconds: 60 }, shared },
        });
        const ci = await h.mint('ci', ['acme']);
        expect((await mintAs(ci, 'ci.a')).status).toBe(201);
        expect((await mintAs(ci, 'ci.b')).status).toBe(201);
        const a = await h.mint('ci.a.worker', ['acme'], { by: ci });
        // Before: each child had a budget of its own, so two levels gave 4 + 4 × 4 mints.
        expect((await mintAs(a, 'ci.a.worker.1')).status).toBe(201);
        const refused = await mintAs(a, 'ci.a.worker.2');
        expect(refused.status).toBe(429);
        expect(refused.body.error).toBe('rate_limited');
        expect((await mintAs(ci, 'ci.c')).status).toBe(429);
        // Another tree has its own budget, and the root key none.
        const other = await h.mint('other', ['acme']);
        expect((await mintAs(other, 'other.a')).status).toBe(201);
        expect((await mintAs(ROOT_KEY, 'ci.root-made')).status).toBe(201);
        h.now += 60_000;
        expect((await mintAs(a, 'ci.a.worker.2')).status).toBe(201);
      },
    );
  });

  describe('Decided: an authorization lives no longer than the token and the connection it was started for', () => {
    async function started(token: string, connectionId = VICTIM) {
      const reply = await h.call('POST', '/api/oauth/authorize/linear', {
        token,
        body: { connection_id: connectionId },
      });
      expect(reply.status).toBe(201);
      return reply.body.authorization_url as string;
    }
    const REVOKED =
      'the broker token that started this authorization was revoked, expired or narrowed meanwhile: start it again';

    async function setup() {
      const world = createTestWorld({ now: () => h.now });
      await harness(world.fetch);
      await h.call('PUT', '/api/admin/providers/linear', {
        body: { template: 'mcp', configuration: { resource_url: world.resourceUrl } },
      });
      const app = await h.mint('app', ['tenants', 'linear']);
      return { world, app };
    }

    it('refuses the callback of an authorization whose token was revoked meanwhile, exchanging nothing', async () => {
      const { world, app } = await setup();
      const url = await started(app);
      expect((await h.call('DELETE', '/api/admin/tokens/app')).status).toBe(204);
      const back = new URL(world.consent(url));
      const reply = await h.call('GET', `${back.pathname}${back.search}`, { token: null });
      expect(reply.text).toContain('Not connected');
      expect(world.stats.codeExchanges).toBe(0);
      const view = await h.call('GET', `/api/oauth/connections/${VICTIM}`);
      expect(view.body.status).toBe('error');
      expect(view.body.error).toEqual({ code: 'invalid_request', description: REVOKED });
    });

    it('refuses it when the token was narrowed away from the connection, and completes it while the token still covers it', async () => {
      const { world, app } = await setup();
      const narrowed = await started(app);
      const kept = await started(app, 'tenants/carol/linear');
      const patch = await h.call('PATCH', '/api/admin/tokens/app', {
        body: { scopes: ['tenants/carol', 'linear'] },
      });
      expect(patch.status).toBe(200);
      const refused = new URL(world.consent(narrowed));
      expect(
        (await h.call('GET', `${refused.pathname}${refused.search}`, { token: null })).text,
      ).toContain('Not connected');
      const completed = new URL(world.consent(kept));
      expect(
        (await h.call('GET', `${completed.pathname}${completed.search}`, { token: null })).text,
      ).toContain('Connected');
      expect(world.stats.codeExchanges).toBe(1);
      expect((await h.call('GET', '/api/oauth/connections/tenants/carol/linear')).body.status).toBe(
        'active',
      );
    });

    it('gives a connection deleted (and created again) meanwhile nothing of the old authorization', async () => {
      const { world } = await setup();
      const old = await started(ROOT_KEY);
      expect((await h.call('DELETE', `/api/oauth/connections/${VICTIM}`)).status).toBe(204);
      const fresh = await started(ROOT_KEY);
      const stale = new URL(world.consent(old));
      const reply = await h.call('GET', `${stale.pathname}${stale.search}`, { token: null });
      expect(reply.text).toContain('Not connected');
      expect(reply.text).toContain('connection_deleted');
      expect(world.stats.codeExchanges).toBe(0);
      expect((await h.call('GET', `/api/oauth/connections/${VICTIM}`)).body.status).toBe('pending');
      const back = new URL(world.consent(fresh));
      expect(
        (await h.call('GET', `${back.pathname}${back.search}`, { token: null })).text,
      ).toContain('Connected');
      expect(world.stats.codeExchanges).toBe(1);
    });
    it('completes an authorization started before another one of the same connection completed', async () => {
      const { world, app } = await setup();
      const first = await started(app);
      const second = await started(app);
      for (const url of [second, first]) {
        const back = new URL(world.consent(url));
        expect(
          (await h.call('GET', `${back.pathname}${back.search}`, { token: null })).text,
        ).toContain('Connected');
      }
      expect(world.stats.codeExchanges).toBe(2);
    });
  });

  describe('Decided: discovery is counted per delegation tree, as it fetches what the caller names', () => {
    it('refuses the discoveries of a tree past its limit, never the root key’s', async () => {
      const world = createTestWorld({ now: () => h.now });
      await harness(world.fetch, { rateLimits: { discover: { limit: 2, windowSeconds: 60 } } });
      const probe = await h.mint('probe', ['nothing']);
      const child = await h.mint('probe.child', ['nothing'], { by: probe });
      const discover = (token: string) =>
        h.call('POST', '/api/admin/discover', {
          token,
          body: { resource_url: world.resourceUrl },
        });
      expect((await discover(probe)).status).toBe(200);
      expect((await discover(child)).status).toBe(200);
      const refused = await discover(child);
      expect(refused.status).toBe(429);
      expect(refused.body.error).toBe('rate_limited');
      expect(refused.headers.get('retry-after')).toBe('60');
      const requests = world.requests.length;
      expect((await discover(probe)).status).toBe(429);
      expect(world.requests.length).toBe(requests);
      for (let i = 0; i < 5; i++) expect((await discover(ROOT_KEY)).status).toBe(200);
      h.now += 60_000;
      expect((await discover(child)).status).toBe(200);
    });
  });

  describe('Medium 2: a code goes only to the token endpoint of the server that issued it (mix-up, RFC 9700 §4.4)', () => {
    /** An honest server and an attacker's, each with its MCP server, behind one fetch. */
    function mixUpWorlds(honest: Parameters<typeof createTestWorld>[0]) {
      const legit = createTestWorld({ now: () => h.now, ...honest });
      const evil = createTestWorld({
        now: () => h.now,
        resourceUrl: 'https://evil.example.test/mcp',
        issuer: 'https://auth.evil.example.test',
      });
      const fetch = (input: string | URL | Request, init?: RequestInit) =>
        new URL(String(input instanceof Request ? input.url : input)).hostname.endsWith(
          'evil.example.test',
        )
          ? evil.fetch(input, init)
          : legit.fetch(input, init);
      return { legit, evil, fetch };
    }

    /**
     * The attack from the callback's side: the attacker's provider starts an authorization,
     * its server bounces the user to the honest one, whose answer comes back to Keyway.
     */
    async function attack(
      worlds: ReturnType<typeof mixUpWorlds>,
      honestClient: { client_id: string; redirect_uri: string },
      attackerClient:
        | 'register'
        | 'custom on the shared callback'
        | 'the metadata document' = 'register',
    ) {
      if (attackerClient === 'the metadata document') {
        worlds.evil.set({ clientIdMetadataDocuments: true, dynamicRegistration: false });
      }
      const attacker = await h.mint('mallory', ['evil', 'mallory']);
      // The attacker runs its server, so it can give its provider any client it likes.
      worlds.evil.preregister({
        client_id: 'evil-client',
        token_endpoint_auth_method: 'none',
        redirect_uris: [CALLBACK],
      });
      const created = await h.call('PUT', '/api/admin/providers/evil', {
        token: attacker,
        body: {
          template: 'mcp',
          configuration: { resource_url: worlds.evil.resourceUrl },
          ...(attackerClient === 'custom on the shared callback'
            ? { credentials: { mode: 'custom', client_id: 'evil-client' } }
            : {}),
        },
      });
      expect(created.status).toBe(201);
      const started = await h.call('POST', '/api/oauth/authorize/evil', {
        token: attacker,
        body: { connection_id: 'mallory/loot' },
      });
      expect(started.status).toBe(201);
      const atHonest = bounce(
        started.body.authorization_url,
        worlds.legit,
        honestClient.client_id,
        honestClient.redirect_uri,
      );
      const back = new URL(worlds.legit.consent(atHonest));
      expect(back.searchParams.get('code')).not.toBeNull();
      const reply = await h.call('GET', `${back.pathname}${back.search}`, { token: null });
      return { reply, back };
    }

    async function expectRefused(
      worlds: ReturnType<typeof mixUpWorlds>,
      outcome: Awaited<ReturnType<typeof attack>>,
      description: string,
    ) {
      expect(outcome.reply.status).toBe(200);
      expect(outcome.reply.text).toContain('Not connected');
      // The honest server's code reached no token endpoint at all.
      expect(tokenRequestsTo(worlds.evil)).toEqual([]);
      expect(worlds.legit.stats.codeExchanges).toBe(0);
      const view = await h.call('GET', '/api/oauth/connections/mallory/loot');
      expect(view.body.status).toBe('error');
      expect(view.body.error).toEqual({ code: 'invalid_response', description });
    }

    const MIXED_UP =
      'the authorization response came back to the redirect URI of another authorization server (a mix-up, RFC 9700 §4.4): refused';
    const WRONG_ISS = (honest: string) =>
      `the authorization response's "iss" "${honest}" is not the issuer "https://auth.evil.example.test" exactly (RFC 9207): refused`;

    it('dynamic registration: each server gets its own redirect URI, and a code on another one is refused (the server sends no iss)', async () => {
      const worlds = mixUpWorlds({ issParameter: false });
      await harness(worlds.fetch);
      const honest = await h.call('PUT', '/api/admin/providers/linear', {
        body: { template: 'mcp', configuration: { resource_url: worlds.legit.resourceUrl } },
      });
      expect(honest.body.credentials.registration).toBe('dynamic');
      const redirectUri: string = honest.body.credentials.redirect_uri;
      expect(redirectUri).toMatch(new RegExp(`^${CALLBACK}/[A-Za-z0-9_-]{22}$`));
      const client = worlds.legit.clients.get(honest.body.credentials.client_id);
      expect(client?.redirect_uris).toEqual([redirectUri]);

      const outcome = await attack(worlds, {
        client_id: honest.body.credentials.client_id,
        redirect_uri: redirectUri,
      });
      expect(outcome.back.href.startsWith(`${redirectUri}?`)).toBe(true);
      await expectRefused(worlds, outcome, MIXED_UP);

      // The attacker's own client has another redirect URI, which the honest server refuses.
      const evil = await h.call('GET', '/api/admin/providers/evil');
      expect(evil.body.credentials.redirect_uri).not.toBe(redirectUri);
      // And the honest flow still completes on its own redirect URI.
      const started = await h.call('POST', '/api/oauth/authorize/linear', {
        body: { connection_id: VICTIM },
      });
      expect(new URL(started.body.authorization_url).searchParams.get('redirect_uri')).toBe(
        redirectUri,
      );
      expect((await connect(worlds.legit, VICTIM)).text).toContain('Connected');
      expect((await h.call('GET', `/api/oauth/connections/${VICTIM}`)).body.status).toBe('active');
    });

    it('client-ID metadata document: used where the server sends iss, and iss refuses the mix-up', async () => {
      const worlds = mixUpWorlds({ clientIdMetadataDocuments: true });
      await harness(worlds.fetch);
      const honest = await h.call('PUT', '/api/admin/providers/linear', {
        body: { template: 'mcp', configuration: { resource_url: worlds.legit.resourceUrl } },
      });
      expect(honest.body.credentials).toMatchObject({
        registration: 'metadata_document',
        client_id: `${BASE}/api/oauth/client-metadata.json`,
        redirect_uri: CALLBACK,
      });
      const outcome = await attack(
        worlds,
        { client_id: honest.body.credentials.client_id, redirect_uri: CALLBACK },
        'custom on the shared callback',
      );
      await expectRefused(worlds, outcome, WRONG_ISS(worlds.legit.issuer));
    });

    it('client-ID metadata document at the attacker’s server: its shared redirect URI is not the honest server’s, whose own one is refused for the attacker’s state', async () => {
      const worlds = mixUpWorlds({ issParameter: false });
      await harness(worlds.fetch);
      const honest = await h.call('PUT', '/api/admin/providers/linear', {
        body: { template: 'mcp', configuration: { resource_url: worlds.legit.resourceUrl } },
      });
      const clientId: string = honest.body.credentials.client_id;
      const redirectUri: string = honest.body.credentials.redirect_uri;
      // With the honest server's own redirect URI, Keyway refuses the attacker's state.
      const outcome = await attack(
        worlds,
        { client_id: clientId, redirect_uri: redirectUri },
        'the metadata document',
      );
      const evil = await h.call('GET', '/api/admin/providers/evil');
      expect(evil.body.credentials).toMatchObject({
        registration: 'metadata_document',
        redirect_uri: CALLBACK,
      });
      // With the shared one of the attacker's state, the honest server refuses.
      const again = await h.call('POST', '/api/oauth/authorize/evil', {
        body: { connection_id: 'mallory/again' },
      });
      expect(() =>
        worlds.legit.consent(
          bounce(again.body.authorization_url, worlds.legit, clientId, CALLBACK),
        ),
      ).toThrow('redirect_uri is not registered');
      await expectRefused(worlds, outcome, MIXED_UP);
    });

    it('custom client at a server that sends iss: iss refuses the mix-up on the shared redirect URI', async () => {
      const worlds = mixUpWorlds({});
      await harness(worlds.fetch);
      worlds.legit.preregister({
        client_id: 'operator-client',
        token_endpoint_auth_method: 'none',
        redirect_uris: [CALLBACK],
      });
      const honest = await h.call('PUT', '/api/admin/providers/linear', {
        body: {
          template: 'mcp',
          configuration: { resource_url: worlds.legit.resourceUrl },
          credentials: { mode: 'custom', client_id: 'operator-client' },
        },
      });
      expect(honest.body.credentials.redirect_uri).toBe(CALLBACK);
      const outcome = await attack(
        worlds,
        { client_id: 'operator-client', redirect_uri: CALLBACK },
        'custom on the shared callback',
      );
      await expectRefused(worlds, outcome, WRONG_ISS(worlds.legit.issuer));
    });

    it('custom client at a server that sends no iss: with callback "per_server", the registered redirect URI refuses the mix-up', async () => {
      const worlds = mixUpWorlds({ issParameter: false });
      await harness(worlds.fetch);
      const body = (callback: 'shared' | 'per_server') => ({
        template: 'mcp',
        configuration: { resource_url: worlds.legit.resourceUrl },
        credentials: { mode: 'custom', client_id: 'operator-client', callback },
      });
      // The operator reads the redirect URI to register from the view, then registers it.
      const first = await h.call('PUT', '/api/admin/providers/linear', {
        body: body('per_server'),
      });
      expect(first.status).toBe(201);
      const redirectUri: string = first.body.credentials.redirect_uri;
      expect(redirectUri).toMatch(new RegExp(`^${CALLBACK}/[A-Za-z0-9_-]{22}$`));
      worlds.legit.preregister({
        client_id: 'operator-client',
        token_endpoint_auth_method: 'none',
        redirect_uris: [redirectUri],
      });
      const outcome = await attack(worlds, {
        client_id: 'operator-client',
        redirect_uri: redirectUri,
      });
      await expectRefused(worlds, outcome, MIXED_UP);
      // The shared form is what an operator registered before: still accepted, and shown.
      const shared = await h.call('PUT', '/api/admin/providers/linear', { body: body('shared') });
      expect(shared.body.credentials.redirect_uri).toBe(CALLBACK);
    });

    it('refuses a callback on the shared redirect URI for a state that named a server’s own, and the reverse', async () => {
      const worlds = mixUpWorlds({ issParameter: false });
      await harness(worlds.fetch);
      await h.call('PUT', '/api/admin/providers/linear', {
        body: { template: 'mcp', configuration: { resource_url: worlds.legit.resourceUrl } },
      });
      const started = await h.call('POST', '/api/oauth/authorize/linear', {
        body: { connection_id: VICTIM },
      });
      const back = new URL(worlds.legit.consent(started.body.authorization_url));
      const onShared = await h.call('GET', `/api/oauth/callback${back.search}`, { token: null });
      expect(onShared.text).toContain('Not connected');
      expect(worlds.legit.stats.codeExchanges).toBe(0);
      // The state is spent: the same answer on the right URI is a replay.
      const replay = await h.call('GET', `${back.pathname}${back.search}`, { token: null });
      expect(replay.status).toBe(400);
      expect(worlds.legit.stats.codeExchanges).toBe(0);
    });

    it('rejects "callback" in mode register', async () => {
      const worlds = mixUpWorlds({});
      await harness(worlds.fetch);
      const reply = await h.call('PUT', '/api/admin/providers/linear', {
        body: {
          template: 'mcp',
          configuration: { resource_url: worlds.legit.resourceUrl },
          credentials: { mode: 'register', callback: 'per_server' },
        },
      });
      expect(reply.status).toBe(400);
      expect(reply.body).toEqual({
        error: 'invalid_request',
        error_description:
          'mode "register" chooses the redirect URI itself; "callback" is for mode "custom"',
        details: [
          {
            path: 'credentials.callback',
            message:
              'mode "register" chooses the redirect URI itself; "callback" is for mode "custom"',
          },
        ],
      });
    });
  });
});

describe('Medium 3: a validation answer never grows with the body that caused it', () => {
  /** Largest answer to any body, in bytes: 20 details of at most 300 characters each, and some. */
  const MAX_ANSWER = 16 * 1024;

  it.each(worstRequests().map((request) => [request.name, request] as const))(
    '%s: a 400 of bounded size',
    async (_name, request) => {
      const h = new Harness(memoryStorage(), { providerManagement: true, baseUrl: BASE });
      const reply = await h.call(request.method, request.path, { raw: request.body });
      expect(request.body.length).toBeGreaterThan(900_000);
      expect(reply.status).toBe(400);
      expect(['invalid_request', 'invalid_scope']).toContain(reply.body.error);
      expect(reply.text.length).toBeLessThanOrEqual(MAX_ANSWER);
      expect(reply.body.details?.length ?? 0).toBeLessThanOrEqual(20);
      await h.broker.close();
    },
  );

  it('refuses an object of more than 64 fields anywhere in a body before reading them', async () => {
    const h = new Harness(memoryStorage(), { providerManagement: true, baseUrl: BASE });
    const params = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`p${i}`, 'v']));
    const reply = await h.call('PUT', '/api/admin/providers/p', {
      body: {
        template: 'mcp',
        configuration: {
          resource_url: 'https://mcp.example.test/mcp',
          authorization_params: params,
        },
      },
    });
    expect(reply.status).toBe(400);
    expect(reply.body).toEqual({
      error: 'invalid_request',
      error_description: '"configuration.authorization_params" has more than 64 fields',
      details: [
        {
          path: 'configuration.authorization_params',
          message: '"configuration.authorization_params" has more than 64 fields',
        },
      ],
    });
    await h.broker.close();
  });

  it('refuses a list of more than 32 scopes as invalid_scope before reading its entries', async () => {
    const h = new Harness(memoryStorage());
    const reply = await h.call('POST', '/api/admin/tokens', {
      body: { name: 'n', scopes: Array(250_000).fill(1) },
    });
    expect(reply.status).toBe(400);
    expect(reply.body).toEqual({
      error: 'invalid_scope',
      error_description: '"scopes" has more than 32 entries; at most 32 are allowed',
      details: [
        { path: 'scopes', message: '"scopes" has more than 32 entries; at most 32 are allowed' },
      ],
    });
    await h.broker.close();
  });

  it('shows the first 19 issues and counts the rest', async () => {
    const h = new Harness(memoryStorage());
    const reply = await h.call('POST', '/api/admin/tokens', {
      body: { name: 'n', scopes: Array(30).fill(7) },
    });
    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('invalid_request');
    expect(reply.body.details).toEqual([
      ...Array.from({ length: 19 }, (_, i) => ({
        path: `scopes.${i}`,
        message: 'Invalid input: expected string, received number',
      })),
      { path: '', message: 'and 11 more issues' },
    ]);
    await h.broker.close();
  });

  it('cuts a message that quotes the caller’s text (unknown field names) at 300 characters', async () => {
    const h = new Harness(memoryStorage());
    const fields = Object.fromEntries(
      Array.from({ length: 40 }, (_, i) => [`field${i}_with_a_long_name`, 0]),
    );
    const reply = await h.call('POST', '/api/admin/tokens', {
      body: { name: 'n', scopes: ['a'], ...fields },
    });
    expect(reply.status).toBe(400);
    expect(reply.body.details).toHaveLength(1);
    const [detail] = reply.body.details;
    expect(detail.message).toHaveLength(300);
    expect(
      detail.message.startsWith(
        'Unrecognized keys: "field0_with_a_long_name", "field1_with_a_long_name"',
      ),
    ).toBe(true);
    expect(detail.message.endsWith('…')).toBe(true);
    expect(reply.body.error_description).toBe(detail.message);
    await h.broker.close();
  });
});
