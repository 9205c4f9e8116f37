import { createTestWorld } from '@keyway/testing';
import { describe, expect, it } from 'vitest';
import { storageFactories } from './harness.js';
import { BASE, bounce, CALLBACK, probePerTest, tokenRequestsTo, VICTIM } from './probe-support.js';

/*
 * Mix-up defense (RFC 9700 §4.4; docs/api.md §5): a code goes only to the token endpoint of
 * the server that issued it, by `iss` where the server sends it, else by a redirect URI per
 * server.
 */

describe.each(storageFactories)('mix-up defense ($name storage)', (factory) => {
  const suite = probePerTest(factory);

  describe('a code goes only to the token endpoint of the server that issued it (mix-up, RFC 9700 §4.4)', () => {
    /** An honest server and an attacker's, each with its MCP server, behind one fetch. */
    function mixUpWorlds(honest: Parameters<typeof createTestWorld>[0]) {
      const legit = createTestWorld({ now: () => suite.h.now, ...honest });
      const evil = createTestWorld({
        now: () => suite.h.now,
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
      const attacker = await suite.h.mint('mallory', ['evil', 'mallory']);
      // The attacker runs its server, so it can give its provider any client it likes.
      worlds.evil.preregister({
        client_id: 'evil-client',
        token_endpoint_auth_method: 'none',
        redirect_uris: [CALLBACK],
      });
      const created = await suite.h.call('PUT', '/api/admin/providers/evil', {
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
      const started = await suite.h.call('POST', '/api/oauth/authorize/evil', {
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
      const reply = await suite.h.call('GET', `${back.pathname}${back.search}`, { token: null });
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
      const view = await suite.h.call('GET', '/api/oauth/connections/mallory/loot');
      expect(view.body.status).toBe('error');
      expect(view.body.error).toEqual({ code: 'invalid_response', description });
    }

    const MIXED_UP =
      'the authorization response came back to the redirect URI of another authorization server (a mix-up, RFC 9700 §4.4): refused';
    const WRONG_ISS = (honest: string) =>
      `the authorization response's "iss" "${honest}" is not the issuer "https://auth.evil.example.test" exactly (RFC 9207): refused`;

    it('dynamic registration: each server gets its own redirect URI, and a code on another one is refused (the server sends no iss)', async () => {
      const worlds = mixUpWorlds({ issParameter: false });
      await suite.harness(worlds.fetch);
      const honest = await suite.h.call('PUT', '/api/admin/providers/linear', {
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
      const evil = await suite.h.call('GET', '/api/admin/providers/evil');
      expect(evil.body.credentials.redirect_uri).not.toBe(redirectUri);
      // And the honest flow still completes on its own redirect URI.
      const started = await suite.h.call('POST', '/api/oauth/authorize/linear', {
        body: { connection_id: VICTIM },
      });
      expect(new URL(started.body.authorization_url).searchParams.get('redirect_uri')).toBe(
        redirectUri,
      );
      expect((await suite.connect(worlds.legit, VICTIM)).text).toContain('Connected');
      expect((await suite.h.call('GET', `/api/oauth/connections/${VICTIM}`)).body.status).toBe(
        'active',
      );
    });

    it('client-ID metadata document: used where the server sends iss, and iss refuses the mix-up', async () => {
      const worlds = mixUpWorlds({ clientIdMetadataDocuments: true });
      await suite.harness(worlds.fetch);
      const honest = await suite.h.call('PUT', '/api/admin/providers/linear', {
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
      await suite.harness(worlds.fetch);
      const honest = await suite.h.call('PUT', '/api/admin/providers/linear', {
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
      const evil = await suite.h.call('GET', '/api/admin/providers/evil');
      expect(evil.body.credentials).toMatchObject({
        registration: 'metadata_document',
        redirect_uri: CALLBACK,
      });
      // With the shared one of the attacker's state, the honest server refuses.
      const again = await suite.h.call('POST', '/api/oauth/authorize/evil', {
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
      await suite.harness(worlds.fetch);
      worlds.legit.preregister({
        client_id: 'operator-client',
        token_endpoint_auth_method: 'none',
        redirect_uris: [CALLBACK],
      });
      const honest = await suite.h.call('PUT', '/api/admin/providers/linear', {
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
      await suite.harness(worlds.fetch);
      const body = (callback: 'shared' | 'per_server') => ({
        template: 'mcp',
        configuration: { resource_url: worlds.legit.resourceUrl },
        credentials: { mode: 'custom', client_id: 'operator-client', callback },
      });
      // The operator reads the redirect URI to register from the view, then registers it.
      const first = await suite.h.call('PUT', '/api/admin/providers/linear', {
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
      const shared = await suite.h.call('PUT', '/api/admin/providers/linear', {
        body: body('shared'),
      });
      expect(shared.body.credentials.redirect_uri).toBe(CALLBACK);
    });

    it('refuses a callback on the shared redirect URI for a state that named a server’s own, and the reverse', async () => {
      const worlds = mixUpWorlds({ issParameter: false });
      await suite.harness(worlds.fetch);
      await suite.h.call('PUT', '/api/admin/providers/linear', {
        body: { template: 'mcp', configuration: { resource_url: worlds.legit.resourceUrl } },
      });
      const started = await suite.h.call('POST', '/api/oauth/authorize/linear', {
        body: { connection_id: VICTIM },
      });
      const back = new URL(worlds.legit.consent(started.body.authorization_url));
      const onShared = await suite.h.call('GET', `/api/oauth/callback${back.search}`, {
        token: null,
      });
      expect(onShared.text).toContain('Not connected');
      expect(worlds.legit.stats.codeExchanges).toBe(0);
      // The state is spent: the same answer on the right URI is a replay.
      const replay = await suite.h.call('GET', `${back.pathname}${back.search}`, { token: null });
      expect(replay.status).toBe(400);
      expect(worlds.legit.stats.codeExchanges).toBe(0);
    });

    it('rejects "callback" in mode register', async () => {
      const worlds = mixUpWorlds({});
      await suite.harness(worlds.fetch);
      const reply = await suite.h.call('PUT', '/api/admin/providers/linear', {
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
