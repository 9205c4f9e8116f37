import { type Broker, type ConnectionTokens, createBroker, type Storage } from '@keyway/core';
import { createTestWorld, type TestWorld, type TestWorldOptions } from '@keyway/testing';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  connectThroughConsent,
  Harness,
  putProvider,
  ROOT_KEY,
  START,
  storageFactories,
  VAULT_KEY,
} from './harness.js';

const BASE = 'https://keyway.example.test';
const CONNECTION = 'acme/users/alice/linear';
const HOUR = 3_600_000;
const iso = (ms: number) => new Date(ms).toISOString();

describe.each(storageFactories)('credentials and refresh ($name storage)', (factory) => {
  let h: Harness;
  let world: TestWorld;
  const extraBrokers: Broker[] = [];

  async function setup(worldOptions: TestWorldOptions = {}) {
    world = createTestWorld({ now: () => h?.now ?? START, ...worldOptions });
    h = new Harness(await factory.create(), {
      fetch: world.fetch,
      baseUrl: BASE,
      providerManagement: true,
    });
    expect((await putProvider(h, world)).status).toBe(201);
    expect((await connectThroughConsent(h, world, CONNECTION)).status).toBe(200);
  }

  const credentials = (query = '', token?: string) =>
    h.call(
      'GET',
      `/api/oauth/credentials/${CONNECTION}${query}`,
      token === undefined ? {} : { token },
    );

  async function storedTokens(storage: Storage = h.storage): Promise<ConnectionTokens> {
    const entry = await storage.getVaultEntry('connection_tokens', CONNECTION);
    return JSON.parse(await h.broker.vault.open(entry as never)) as ConnectionTokens;
  }

  afterEach(async () => {
    expect(h.errors).toEqual([]);
    for (const broker of extraBrokers.splice(0)) await broker.close();
    await h.broker.close();
  });

  it('opens each sealed entry once, and never serves an opened token for another ciphertext (a moved row is refused)', async () => {
    await setup();
    // Two connections: the second's sealed row is copied over the first's once the first
    // was handed out (its opened tokens are then in memory).
    expect((await connectThroughConsent(h, world, 'acme/users/bob/linear')).status).toBe(200);
    const opens = vi.spyOn(h.broker.vault, 'open');
    const first = await credentials();
    expect(first.status).toBe(200);
    expect((await credentials()).body.access_token).toBe(first.body.access_token);
    expect((await credentials()).body.access_token).toBe(first.body.access_token);
    // Three hand-outs, one open at most (none when an earlier read opened them).
    expect(opens.mock.calls.length).toBeLessThanOrEqual(1);
    opens.mockRestore();
    const bob = await h.storage.getVaultEntry('connection_tokens', 'acme/users/bob/linear');
    if (bob === null) throw new Error('bob has no tokens');
    const { version: _version, createdAt: _created, updatedAt: _updated, ...sealed } = bob;
    await h.storage.putVaultEntry({ ...sealed, key: CONNECTION }, h.now);
    const moved = await credentials();
    expect(moved.status).toBe(500);
    expect(moved.text).not.toContain(first.body.access_token);
    expect(h.errors).toHaveLength(1);
    h.errors.length = 0;
  });

  it('answers the current token with no-store when it is not about to expire', async () => {
    await setup({ challengeScope: 'read' });
    const reply = await credentials();
    expect(reply.status).toBe(200);
    expect(reply.headers.get('cache-control')).toBe('no-store');
    expect(reply.body).toEqual({
      connection_id: CONNECTION,
      access_token: expect.stringMatching(/^at_/),
      token_type: 'Bearer',
      expires_at: iso(START + HOUR),
      scopes: ['read'],
    });
    expect(world.isValidAccessToken(reply.body.access_token)).toBe(true);
    expect(world.stats.refreshes).toBe(0);
  });

  it('refreshes within the margin (60 s) and on force_refresh=true', async () => {
    await setup();
    const first = (await credentials()).body.access_token;
    h.now = START + HOUR - 61_000;
    expect((await credentials()).body.access_token).toBe(first);
    h.now = START + HOUR - 60_000;
    const refreshed = await credentials();
    expect(refreshed.body.access_token).not.toBe(first);
    expect(refreshed.body.expires_at).toBe(iso(h.now + HOUR));
    expect(world.stats.refreshes).toBe(1);
    const forced = await credentials('?force_refresh=true');
    expect(forced.body.access_token).not.toBe(refreshed.body.access_token);
    expect(world.stats.refreshes).toBe(2);
    const connection = await h.call('GET', `/api/oauth/connections/${CONNECTION}`);
    expect(connection.body.last_refreshed_at).toBe(iso(h.now));
    expect(connection.body.token_expires_at).toBe(iso(h.now + HOUR));
    expect((await credentials('?force_refresh=maybe')).status).toBe(400);
  });

  it('stores a rotated refresh token, and keeps an unrotated one', async () => {
    await setup({ rotateRefreshTokens: true });
    const before = (await storedTokens()).refresh_token;
    await credentials('?force_refresh=true');
    const after = (await storedTokens()).refresh_token;
    expect(after).not.toBe(before);
    expect((await credentials('?force_refresh=true')).status).toBe(200);

    world.set({ rotateRefreshTokens: false });
    const kept = (await storedTokens()).refresh_token;
    await credentials('?force_refresh=true');
    expect((await storedTokens()).refresh_token).toBe(kept);
    expect((await credentials('?force_refresh=true')).status).toBe(200);
    expect(world.stats.refreshes).toBe(4);
  });

  it('puts the connection in error and answers 409 reauthorization_required on invalid_grant', async () => {
    await setup();
    const {
      refresh_token,
      party: { client_id },
    } = await storedTokens();
    const secret = world.clients.get(client_id)?.client_secret as string;
    await world.fetch('https://auth.example.test/oauth/revoke', {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${btoa(`${client_id}:${secret}`)}`,
      },
      body: new URLSearchParams({ token: refresh_token as string }).toString(),
    });
    const reply = await credentials('?force_refresh=true');
    expect(reply.status).toBe(409);
    expect(reply.body.error).toBe('reauthorization_required');
    const connection = await h.call('GET', `/api/oauth/connections/${CONNECTION}`);
    expect(connection.body.status).toBe('error');
    expect(connection.body.error.code).toBe('invalid_grant');
    expect((await credentials()).body.error).toBe('connection_not_active');
  });

  it('returns the current token on a transient failure while it is valid, and 502 once it has expired', async () => {
    await setup();
    const current = (await credentials()).body.access_token;
    world.set({ failures: { token: 'server_error' } });
    const kept = await credentials('?force_refresh=true');
    expect(kept.status).toBe(200);
    expect(kept.body.access_token).toBe(current);
    h.now = START + HOUR;
    const failed = await credentials();
    expect(failed.status).toBe(502);
    expect(failed.body.error).toBe('upstream_error');
    expect(failed.text).not.toContain(current);
    world.set({ failures: {} });
    expect((await credentials()).status).toBe(200);
  });

  it('answers 409 connection_not_active for a pending connection and 403 outside the scopes', async () => {
    await setup();
    await h.call('POST', '/api/oauth/authorize/linear', {
      body: { connection_id: 'acme/pending' },
    });
    const pending = await h.call('GET', '/api/oauth/credentials/acme/pending');
    expect(pending.status).toBe(409);
    expect(pending.body.error).toBe('connection_not_active');
    const bob = await h.mint('bob', ['acme/users/bob']);
    expect((await credentials('', bob)).status).toBe(403);
    expect((await h.call('GET', '/api/oauth/credentials/acme/none')).status).toBe(404);
  });

  it('refreshes once for 50 concurrent callers in one broker, all getting the new token', async () => {
    await setup({ rotateRefreshTokens: true });
    h.now = START + HOUR - 1000;
    const replies = await Promise.all(Array.from({ length: 50 }, () => credentials()));
    expect(world.stats.refreshes).toBe(1);
    const tokens = new Set(replies.map((reply) => reply.body.access_token));
    expect(replies.every((reply) => reply.status === 200)).toBe(true);
    expect(tokens.size).toBe(1);
    expect(world.isValidAccessToken([...tokens][0] as string)).toBe(true);
  });

  it('refreshes once for 50 concurrent callers spread over two brokers sharing the storage', async () => {
    await setup({ rotateRefreshTokens: true });
    const otherStorage = factory.reopen === undefined ? h.storage : await factory.reopen(h.storage);
    const other = createBroker({
      rootKey: ROOT_KEY,
      storage: otherStorage,
      vaultKeys: [VAULT_KEY],
      fetch: world.fetch,
      baseUrl: BASE,
      now: () => h.now,
      purgeIntervalMs: false,
    });
    extraBrokers.push(other);
    h.now = START + HOUR - 1000;
    const root = { kind: 'root' } as const;
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        (i % 2 ? other : h.broker).connections.credentials(root, CONNECTION),
      ),
    );
    expect(world.stats.refreshes).toBe(1);
    expect(new Set(results.map((r) => r.access_token)).size).toBe(1);
  });
});
