import { createBroker, type KeywayEvent } from '@keyway/core';
import { memoryStorage } from '@keyway/store-memory';
import { createTestWorld, type TestWorld, type TestWorldOptions } from '@keyway/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { createHandler } from '../src/index.js';
import {
  Harness,
  ROOT_KEY,
  START,
  serverCallback,
  storageFactories,
  VAULT_KEY,
} from './harness.js';

const BASE = 'https://keyway.example.test';
const APP = 'https://app.example.test';
const CONNECTION = 'acme/users/alice/linear';
const iso = (ms: number) => new Date(ms).toISOString();

describe.each(storageFactories)('connections ($name storage)', (factory) => {
  let h: Harness;
  let world: TestWorld;
  const events: KeywayEvent[] = [];

  async function setup(worldOptions: TestWorldOptions = {}) {
    world = createTestWorld({ now: () => h?.now ?? START, ...worldOptions });
    h = new Harness(await factory.create(), {
      fetch: world.fetch,
      baseUrl: BASE,
      providerManagement: true,
      allowedRedirects: [APP],
      onEvent: (event) => {
        events.push(event);
      },
    });
    const reply = await h.call('PUT', '/api/admin/providers/linear', {
      body: { template: 'mcp', configuration: { resource_url: world.resourceUrl } },
    });
    expect(reply.status).toBe(201);
  }

  async function authorize(body: Record<string, unknown> = {}, token?: string) {
    return h.call('POST', '/api/oauth/authorize/linear', {
      body: { connection_id: CONNECTION, ...body },
      ...(token === undefined ? {} : { token }),
    });
  }

  /** The browser's return to the callback, unauthenticated. */
  async function callback(url: string) {
    const { pathname, search } = new URL(url);
    return h.call('GET', `${pathname}${search}`, { token: null });
  }

  async function connect(body: Record<string, unknown> = {}) {
    const started = await authorize(body);
    expect(started.status).toBe(201);
    return callback(world.consent(started.body.authorization_url));
  }

  afterEach(async () => {
    expect(h.errors).toEqual([]);
    const text = JSON.stringify(events.splice(0));
    for (const secret of [...world.clients.values()].map((c) => c.client_secret)) {
      if (secret) expect(text).not.toContain(secret);
    }
    expect(text).not.toMatch(/at_|rt_|code_/);
    await h.broker.close();
  });

  describe('POST /api/oauth/authorize/<provider_id>', () => {
    it('answers 201 with a consent address carrying state, S256, scope and resource, and a pending connection', async () => {
      await setup({
        challengeScope: 'read write',
        serverScopesSupported: ['read', 'write', 'offline_access'],
      });
      const reply = await authorize();
      expect(reply.status).toBe(201);
      expect(reply.body).toEqual({
        connection_id: CONNECTION,
        provider_id: 'linear',
        authorization_url: expect.stringMatching(
          /^https:\/\/auth\.example\.test\/oauth\/authorize\?/,
        ),
        expires_at: iso(START + 10 * 60_000),
      });
      const params = new URL(reply.body.authorization_url).searchParams;
      const client = [...world.clients.values()][0];
      expect(Object.fromEntries(params)).toEqual({
        response_type: 'code',
        client_id: client?.client_id,
        redirect_uri: serverCallback(BASE, world.issuer),
        state: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
        code_challenge: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
        code_challenge_method: 'S256',
        scope: 'read write offline_access',
        resource: 'https://mcp.example.test/mcp',
      });
      const connection = await h.call('GET', `/api/oauth/connections/${CONNECTION}`);
      expect(connection.body).toEqual({
        connection_id: CONNECTION,
        provider_id: 'linear',
        status: 'pending',
        scopes: ['read', 'write', 'offline_access'],
        refreshable: false,
        grant: 'authorization_code',
        metadata: {},
        token_response: null,
        token_expires_at: null,
        created_at: iso(START),
        updated_at: iso(START),
        authorized_at: null,
        last_refreshed_at: null,
        error: null,
        account: null,
        alias: null,
        tools: null,
      });
    });

    it('does not add offline_access unless the server lists it, and takes scopes from the call', async () => {
      await setup({ challengeScope: 'read' });
      const params = new URL((await authorize({ scopes: ['x', 'y'] })).body.authorization_url)
        .searchParams;
      expect(params.get('scope')).toBe('x y');
      const other = new URL((await authorize({ connection_id: 'acme/b' })).body.authorization_url)
        .searchParams;
      expect(other.get('scope')).toBe('read');
    });

    it('needs scopes covering both the connection and the provider', async () => {
      await setup();
      const onlyConnection = await h.mint('alice', ['acme/users/alice']);
      const both = await h.mint('both', ['acme/users/alice', 'linear']);
      expect((await authorize({}, onlyConnection)).status).toBe(403);
      expect((await authorize({ connection_id: 'acme/users/bob/linear' }, both)).status).toBe(403);
      expect((await authorize({}, both)).status).toBe(201);
    });

    it('refuses a redirect_to outside the allowed origins, and a connection of another provider', async () => {
      await setup();
      const bad = await authorize({ redirect_to: 'https://evil.example.test/done' });
      expect(bad.status).toBe(400);
      expect(bad.body.error).toBe('invalid_redirect');
      await connect();
      await h.call('PUT', '/api/admin/providers/other', {
        body: { template: 'mcp', configuration: { resource_url: world.resourceUrl } },
      });
      const conflict = await h.call('POST', '/api/oauth/authorize/other', {
        body: { connection_id: CONNECTION },
      });
      expect(conflict.status).toBe(409);
      expect(conflict.body.error).toBe('conflict');
    });

    it('answers 404 for an unknown provider and 400 for a bad body', async () => {
      await setup();
      expect(
        (await h.call('POST', '/api/oauth/authorize/nope', { body: { connection_id: 'a' } }))
          .status,
      ).toBe(404);
      expect((await authorize({ connection_id: 'a//b' })).body.error).toBe('invalid_path');
      expect((await authorize({ scopes: ['has space'] })).body.error).toBe('invalid_request');
      expect((await authorize({ extra: true })).body.error).toBe('invalid_request');
    });
  });

  describe('GET /api/oauth/callback', () => {
    it('exchanges the code and activates the connection, keeping tokens encrypted and out of every answer', async () => {
      await setup({ challengeScope: 'read' });
      const page = await callback(world.consent((await authorize()).body.authorization_url));
      expect(page.status).toBe(200);
      expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect(page.text).toContain('Connected');
      expect(world.stats.codeExchanges).toBe(1);
      const connection = await h.call('GET', `/api/oauth/connections/${CONNECTION}`);
      expect(connection.body).toMatchObject({
        status: 'active',
        scopes: ['read'],
        token_expires_at: iso(START + 3_600_000),
        authorized_at: iso(START),
        error: null,
      });
      expect(connection.text).not.toMatch(/at_|rt_/);
      // The token response described for the debugger: no token, the refresh token's
      // presence, every field by name.
      expect(connection.body.token_response).toEqual({
        received_at: iso(START),
        grant_type: 'authorization_code',
        token_type: 'bearer',
        expires_in: 3600,
        scope: 'read',
        refresh_token: 'present',
        fields: ['access_token', 'expires_in', 'refresh_token', 'scope', 'token_type'],
      });
      const raw = await factory.rawText(h.storage);
      // The exact values the world issued: a pattern such as at_… also matches random
      // base64url ciphertext now and then.
      if (raw !== null) {
        expect(raw).not.toMatch(/"at_|"rt_/);
        for (const secret of world.secrets()) expect(raw).not.toContain(secret);
      }
      expect(events.map((e) => e.type)).toEqual([
        'provider.created',
        'connection.created',
        'connection.authorized',
      ]);
      expect(events.at(-1)).toEqual({
        id: expect.stringMatching(/^evt_[0-9a-f]{28}$/),
        type: 'connection.authorized',
        time: iso(START),
        actor: 'system',
        resource: CONNECTION,
        data: { scopes: ['read'], token_expires_at: iso(START + 3_600_000), refreshable: true },
      });
      // A refresh that brings no new refresh token says so.
      world.set({ rotateRefreshTokens: false });
      const forced = await h.call('GET', `/api/oauth/credentials/${CONNECTION}?force_refresh=true`);
      expect(forced.status).toBe(200);
      const refreshed = await h.call('GET', `/api/oauth/connections/${CONNECTION}`);
      expect(refreshed.body.token_response).toEqual({
        received_at: iso(START),
        grant_type: 'refresh_token',
        token_type: 'bearer',
        expires_in: 3600,
        scope: 'read',
        refresh_token: 'absent',
        fields: ['access_token', 'expires_in', 'scope', 'token_type'],
      });
      expect(refreshed.body.refreshable).toBe(true);
    });

    it('exchanges the code with the redirect_uri of the authorization request, whoever handles the callback', async () => {
      await setup();
      const url = new URL(world.consent((await authorize()).body.authorization_url));
      // Regression: the exchange used the handling instance's own callback URL.
      const other = createBroker({
        rootKey: ROOT_KEY,
        storage: h.storage,
        vaultKeys: [VAULT_KEY],
        fetch: world.fetch,
        baseUrl: 'https://elsewhere.example.test',
        now: () => h.now,
        purgeIntervalMs: false,
      });
      // The response came back to the server's own callback: its key goes with it.
      const key = url.pathname.split('/').pop() ?? '';
      expect(url.href.startsWith(serverCallback(BASE, world.issuer))).toBe(true);
      const outcome = await other.connections.callback(url.searchParams, key);
      expect(outcome).toEqual({
        connection_id: CONNECTION,
        status: 'active',
        error: null,
        redirect_to: null,
      });
    });

    it('redirects to an allowed redirect_to with the outcome', async () => {
      await setup();
      const reply = await connect({ redirect_to: `${APP}/connected?x=1` });
      expect(reply.status).toBe(302);
      expect(reply.headers.get('location')).toBe(
        `${APP}/connected?x=1&connection_id=${encodeURIComponent(CONNECTION)}&status=active`,
      );
    });

    it('records a denied consent: the pending connection goes to error', async () => {
      await setup();
      const started = await authorize({ redirect_to: APP });
      const reply = await callback(world.consent(started.body.authorization_url, 'deny'));
      expect(reply.headers.get('location')).toBe(
        `${APP}/?connection_id=${encodeURIComponent(CONNECTION)}&status=error&error=access_denied`,
      );
      const connection = await h.call('GET', `/api/oauth/connections/${CONNECTION}`);
      expect(connection.body.status).toBe('error');
      expect(connection.body.error.code).toBe('access_denied');
      expect(world.stats.codeExchanges).toBe(0);
    });

    it('refuses a replayed state with 400, changing nothing', async () => {
      await setup();
      const url = world.consent((await authorize()).body.authorization_url);
      expect((await callback(url)).status).toBe(200);
      const before = await h.call('GET', `/api/oauth/connections/${CONNECTION}`);
      const replay = await callback(url);
      expect(replay.status).toBe(400);
      expect(replay.text).toContain('already used');
      expect((await h.call('GET', `/api/oauth/connections/${CONNECTION}`)).body).toEqual(
        before.body,
      );
      expect(world.stats.codeExchanges).toBe(1);
    });

    it('refuses an expired state with 400', async () => {
      await setup();
      const url = world.consent((await authorize()).body.authorization_url);
      h.now += 10 * 60_000;
      expect((await callback(url)).status).toBe(400);
      expect((await h.call('GET', `/api/oauth/connections/${CONNECTION}`)).body.status).toBe(
        'pending',
      );
    });

    it('refuses a state made by another broker, and a missing or doubled state', async () => {
      await setup();
      const other = createBroker({
        rootKey: ROOT_KEY,
        storage: memoryStorage(),
        vaultKeys: [VAULT_KEY],
        fetch: world.fetch,
        baseUrl: BASE,
        providerManagement: true,
        purgeIntervalMs: false,
      });
      const otherHandler = createHandler(other);
      await otherHandler(
        new Request(`${BASE}/api/admin/providers/linear`, {
          method: 'PUT',
          headers: { authorization: `Bearer ${ROOT_KEY}`, 'content-type': 'application/json' },
          body: JSON.stringify({
            template: 'mcp',
            configuration: { resource_url: world.resourceUrl },
          }),
        }),
      );
      const started = await other.connections.authorize({ kind: 'root' }, 'linear', {
        connection_id: CONNECTION,
      });
      expect((await callback(world.consent(started.authorization_url))).status).toBe(400);
      expect((await h.call('GET', '/api/oauth/callback?code=x', { token: null })).status).toBe(400);
      expect(
        (await h.call('GET', '/api/oauth/callback?state=a&state=b', { token: null })).status,
      ).toBe(400);
      await other.close();
    });

    it('rejects a mix-up: an iss other than the issuer', async () => {
      await setup();
      const url = new URL(world.consent((await authorize()).body.authorization_url));
      url.searchParams.set('iss', 'https://evil.example.test');
      const reply = await callback(url.href);
      expect(reply.text).toContain('Not connected');
      const connection = await h.call('GET', `/api/oauth/connections/${CONNECTION}`);
      expect(connection.body.status).toBe('error');
      expect(connection.body.error.code).toBe('invalid_response');
      expect(world.stats.codeExchanges).toBe(0);
    });

    it('requires iss when the server advertises it', async () => {
      await setup();
      const url = new URL(world.consent((await authorize()).body.authorization_url));
      url.searchParams.delete('iss');
      await callback(url.href);
      expect((await h.call('GET', `/api/oauth/connections/${CONNECTION}`)).body.status).toBe(
        'error',
      );
      expect(world.stats.codeExchanges).toBe(0);
    });

    it('records a token endpoint failure, and keeps an active connection active on a failed re-authorization', async () => {
      await setup();
      await connect();
      world.set({ failures: { token: 'server_error' } });
      const page = await callback(world.consent((await authorize()).body.authorization_url));
      expect(page.text).toContain('Not connected');
      const connection = await h.call('GET', `/api/oauth/connections/${CONNECTION}`);
      expect(connection.body.status).toBe('active');
      expect(connection.body.error.code).toBe('server_error');
    });

    it('never reflects the query unescaped', async () => {
      await setup();
      const started = await authorize();
      const state = new URL(started.body.authorization_url).searchParams.get('state') as string;
      const reply = await callback(
        `${serverCallback(BASE, world.issuer)}?state=${state}&iss=${encodeURIComponent(world.issuer)}&error=access_denied&error_description=${encodeURIComponent('<script>alert(1)</script>')}`,
      );
      expect(reply.text).not.toContain('<script>');
      expect(reply.text).toContain('&lt;script&gt;');
      expect(reply.headers.get('content-security-policy')).toContain("default-src 'none'");
    });
  });

  describe('reading, listing and deleting connections', () => {
    it('lists by prefix, provider and status within the caller’s scopes', async () => {
      await setup();
      await connect();
      await authorize({ connection_id: 'acme/users/bob/linear' });
      await authorize({ connection_id: 'other/x' });
      const all = await h.call('GET', '/api/oauth/connections');
      expect(all.body.items.map((c: any) => [c.connection_id, c.status])).toEqual([
        ['acme/users/alice/linear', 'active'],
        ['acme/users/bob/linear', 'pending'],
        ['other/x', 'pending'],
      ]);
      const pending = await h.call(
        'GET',
        '/api/oauth/connections?prefix=acme&status=pending&provider_id=linear',
      );
      expect(pending.body.items.map((c: any) => c.connection_id)).toEqual([
        'acme/users/bob/linear',
      ]);
      const token = await h.mint('acme', ['acme/users']);
      const scoped = await h.call('GET', '/api/oauth/connections', { token });
      expect(scoped.body.items.map((c: any) => c.connection_id)).toEqual([
        'acme/users/alice/linear',
        'acme/users/bob/linear',
      ]);
      expect((await h.call('GET', '/api/oauth/connections/other/x', { token })).status).toBe(403);
      expect((await h.call('GET', '/api/oauth/connections?status=done')).status).toBe(400);
    });

    it('deletes a connection, revoking its tokens at the authorization server', async () => {
      await setup();
      await connect();
      const deleted = await h.call('DELETE', `/api/oauth/connections/${CONNECTION}`);
      expect(deleted.status).toBe(204);
      expect(world.stats.revocations).toBe(2);
      expect((await h.call('GET', `/api/oauth/connections/${CONNECTION}`)).status).toBe(404);
      expect(await h.storage.getVaultEntry('connection_tokens', CONNECTION)).toBeNull();
      expect((await h.call('DELETE', `/api/oauth/connections/${CONNECTION}`)).status).toBe(404);
      expect(events.at(-1)).toMatchObject({
        type: 'connection.deleted',
        actor: 'root',
        resource: CONNECTION,
      });
    });

    it('deletes even when revocation fails', async () => {
      await setup({ failures: { revocation: 'server_error' } });
      await connect();
      expect((await h.call('DELETE', `/api/oauth/connections/${CONNECTION}`)).status).toBe(204);
      expect((await h.call('GET', `/api/oauth/connections/${CONNECTION}`)).status).toBe(404);
    });
  });
});
