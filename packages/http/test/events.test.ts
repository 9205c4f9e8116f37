import type { ConnectionTokens, KeywayEvent } from '@keyway/core';
import { createTestWorld, type TestWorld } from '@keyway/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { Harness, ROOT_KEY, START, storageFactories } from './harness.js';

const BASE = 'https://keyway.example.test';
const CONNECTION = 'acme/users/alice/linear';
const DAY = 86_400_000;

/** The audit log as the root key reads it, every page, newest first. */
async function auditLog(h: Harness, query = '', token = ROOT_KEY): Promise<KeywayEvent[]> {
  const events: KeywayEvent[] = [];
  let cursor: string | null = null;
  do {
    const params = new URLSearchParams(query);
    params.set('limit', '3');
    if (cursor !== null) params.set('cursor', cursor);
    const reply = await h.call('GET', `/api/admin/audit?${params}`, { token });
    expect(reply.status, reply.text).toBe(200);
    events.push(...reply.body.items);
    cursor = reply.body.next_cursor;
  } while (cursor !== null);
  return events;
}

/** `type actor resource`, oldest first: the story the log tells. */
const story = (events: KeywayEvent[]) =>
  events.map((event) => `${event.type} ${event.actor} ${event.resource}`).reverse();

describe.each(storageFactories)('events and the audit log ($name storage)', (factory) => {
  let h: Harness;
  let world: TestWorld;
  const hooked: KeywayEvent[] = [];

  async function setup(extra: Record<string, unknown> = {}) {
    world = createTestWorld({ now: () => h?.now ?? START, rotateRefreshTokens: true });
    h = new Harness(await factory.create(), {
      fetch: world.fetch,
      baseUrl: BASE,
      providerManagement: true,
      onEvent: (event) => {
        hooked.push(event);
      },
      ...extra,
    });
  }

  async function connect(id = CONNECTION, decision: 'approve' | 'deny' = 'approve') {
    const started = await h.call('POST', '/api/oauth/authorize/linear', {
      body: { connection_id: id },
    });
    expect(started.status).toBe(201);
    const { pathname, search } = new URL(world.consent(started.body.authorization_url, decision));
    return h.call('GET', `${pathname}${search}`, { token: null });
  }

  afterEach(async () => {
    expect(h.errors).toEqual([]);
    hooked.splice(0);
    await h.broker.close();
  });

  it('records every change once, with its actor, resource and data, and nothing for a refused one', async () => {
    await setup();
    const ci = await h.mint('ci', ['acme'], { expires_in: 7200 });
    h.now += 1;
    expect(
      (await h.call('POST', '/api/admin/tokens', { body: { name: 'ci', scopes: ['x'] } })).status,
    ).toBe(409);
    await h.mint('ci.bot', ['acme/users'], { by: ci, expires_in: 600 });
    const widened = await h.call('PATCH', '/api/admin/tokens/ci', { body: { scopes: ['**'] } });
    expect(widened.status).toBe(400);
    expect(
      (await h.call('PATCH', '/api/admin/tokens/ci', { body: { scopes: ['acme/users'] } })).status,
    ).toBe(200);
    expect(
      (await h.call('PUT', '/api/vault/secrets/acme/users/a', { body: { value: 'v1' }, token: ci }))
        .status,
    ).toBe(201);
    expect(
      (
        await h.call('PUT', '/api/vault/secrets/acme/users/key', {
          body: { value: 'v1' },
          token: ci,
        })
      ).status,
    ).toBe(201);
    expect(
      (await h.call('PUT', '/api/vault/secrets/acme/users/key', { body: { value: 'v2' } })).status,
    ).toBe(200);
    expect((await h.call('GET', '/api/vault/secrets/acme/users/key', { token: ci })).status).toBe(
      200,
    );
    expect((await h.call('DELETE', '/api/vault/secrets/acme/users/key')).status).toBe(204);
    expect((await h.call('DELETE', '/api/vault/secrets/acme/users/key')).status).toBe(404);
    const provider = { template: 'mcp', configuration: { resource_url: world.resourceUrl } };
    expect((await h.call('PUT', '/api/admin/providers/linear', { body: provider })).status).toBe(
      201,
    );
    expect((await connect()).status).toBe(200);
    expect((await h.call('GET', `/api/oauth/credentials/${CONNECTION}`)).status).toBe(200);
    h.now += 3_600_000;
    expect((await h.call('GET', `/api/oauth/credentials/${CONNECTION}`)).status).toBe(200);
    expect((await h.call('DELETE', '/api/admin/providers/linear')).status).toBe(409);
    expect((await h.call('DELETE', `/api/oauth/connections/${CONNECTION}`)).status).toBe(204);
    expect((await h.call('DELETE', '/api/admin/providers/linear')).status).toBe(204);
    expect((await h.call('DELETE', '/api/admin/tokens/ci')).status).toBe(204);

    const log = await auditLog(h);
    expect(story(log)).toEqual([
      'token.created root ci',
      'token.created token:ci ci.bot',
      'token.narrowed root ci',
      'secret.created token:ci acme/users/a',
      'secret.created token:ci acme/users/key',
      'secret.updated root acme/users/key',
      'secret.read token:ci acme/users/key',
      'secret.deleted root acme/users/key',
      'provider.created root linear',
      'connection.created root acme/users/alice/linear',
      'connection.authorized system acme/users/alice/linear',
      'credentials.issued root acme/users/alice/linear',
      'connection.refreshed system acme/users/alice/linear',
      'credentials.issued root acme/users/alice/linear',
      'connection.deleted root acme/users/alice/linear',
      'provider.deleted root linear',
      'token.deleted root ci',
    ]);
    // The hook got the same events, in the order they happened.
    expect(hooked).toEqual([...log].reverse());
    const byType = (type: string) => [...log].reverse().filter((event) => event.type === type);
    expect(byType('token.created')[1]?.data).toEqual({
      scopes: ['acme/users/**'],
      expires_at: new Date(START + 1 + 600_000).toISOString(),
    });
    expect(byType('token.narrowed')[0]?.data).toEqual({
      scopes: ['acme/users/**'],
      expires_at: new Date(START + 7_200_000).toISOString(),
      descendants_narrowed: 0,
      descendants_deleted: 0,
    });
    expect(byType('connection.authorized')[0]?.data).toEqual({
      scopes: [],
      token_expires_at: new Date(START + 1 + 3_600_000).toISOString(),
      refreshable: true,
    });
    expect(byType('connection.refreshed')[0]?.data).toEqual({
      token_expires_at: new Date(START + 1 + 7_200_000).toISOString(),
      refresh_token_rotated: true,
    });
    expect(byType('secret.read')[0]?.data).toEqual({ version: 2 });
    expect(byType('provider.created')[0]?.data).toMatchObject({
      template: 'mcp',
      mode: 'register',
    });
    for (const event of log) {
      expect(event.id).toMatch(/^evt_[0-9a-f]{28}$/);
      expect(Date.parse(event.time)).toBeGreaterThanOrEqual(START);
    }
    expect(new Set(log.map((event) => event.id)).size).toBe(log.length);
  });

  it('records failures: a denied consent, a refresh that fails for now, a refresh token rejected', async () => {
    await setup();
    const provider = { template: 'mcp', configuration: { resource_url: world.resourceUrl } };
    await h.call('PUT', '/api/admin/providers/linear', { body: provider });
    expect((await connect('acme/denied', 'deny')).status).toBe(200);
    expect((await connect()).status).toBe(200);
    world.set({ failures: { token: 'server_error' } });
    expect(
      (await h.call('GET', `/api/oauth/credentials/${CONNECTION}?force_refresh=true`)).status,
    ).toBe(200);
    world.set({ failures: {} });
    const entry = await h.storage.getVaultEntry('connection_tokens', CONNECTION);
    const tokens = JSON.parse(await h.broker.vault.open(entry as never)) as ConnectionTokens;
    const client = world.clients.get(tokens.party.client_id);
    await world.fetch('https://auth.example.test/oauth/revoke', {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${btoa(`${client?.client_id}:${client?.client_secret}`)}`,
      },
      body: new URLSearchParams({ token: tokens.refresh_token as string }).toString(),
    });
    const rejected = await h.call('GET', `/api/oauth/credentials/${CONNECTION}?force_refresh=true`);
    expect(rejected.body.error).toBe('reauthorization_required');

    const log = await auditLog(h, 'prefix=acme');
    expect(log.map((event) => [event.type, event.resource, event.data]).reverse()).toEqual([
      ['connection.created', 'acme/denied', { provider_id: 'linear' }],
      ['connection.failed', 'acme/denied', { error: 'access_denied', phase: 'authorization' }],
      ['connection.created', CONNECTION, { provider_id: 'linear' }],
      ['connection.authorized', CONNECTION, expect.objectContaining({ refreshable: true })],
      [
        'connection.failed',
        CONNECTION,
        { error: 'server_error', phase: 'refresh', token_still_valid: true },
      ],
      ['credentials.issued', CONNECTION, expect.objectContaining({ forced_refresh: true })],
      ['connection.reauthorization_required', CONNECTION, { error: 'invalid_grant' }],
    ]);
  });

  it('shows a token the events of resources its scopes cover and of its descendants only', async () => {
    await setup();
    const alice = await h.mint('alice', ['acme/users/alice']);
    await h.mint('alice.bot', ['acme/users/alice/bot'], { by: alice, expires_in: 600 });
    await h.mint('alicex', ['acme']);
    await h.call('PUT', '/api/vault/secrets/acme/users/alice/key', { body: { value: 'a' } });
    await h.call('PUT', '/api/vault/secrets/acme/users/alice-x/key', { body: { value: 'b' } });
    await h.call('PUT', '/api/vault/secrets/acme/users/bob/key', { body: { value: 'c' } });
    await h.call('GET', '/api/vault/secrets/acme/users/alice/key', { token: alice });

    expect(story(await auditLog(h, '', alice))).toEqual([
      'token.created token:alice alice.bot',
      'secret.created root acme/users/alice/key',
      'secret.read token:alice acme/users/alice/key',
    ]);
    expect(story(await auditLog(h))).toHaveLength(7);
    // A prefix narrows to a subtree, and leaves token events out.
    expect(story(await auditLog(h, 'prefix=acme/users/alice', alice))).toEqual([
      'secret.created root acme/users/alice/key',
      'secret.read token:alice acme/users/alice/key',
    ]);
    expect(await auditLog(h, 'prefix=acme/users/bob', alice)).toEqual([]);
    expect(story(await auditLog(h, 'type=token.created'))).toEqual([
      'token.created root alice',
      'token.created token:alice alice.bot',
      'token.created root alicex',
    ]);
    h.now += 1;
    await h.call('DELETE', '/api/vault/secrets/acme/users/bob/key');
    const since = new Date(h.now).toISOString();
    expect(story(await auditLog(h, `since=${since}`))).toEqual([
      'secret.deleted root acme/users/bob/key',
    ]);
    const bad = await h.call('GET', '/api/admin/audit?type=token.renamed');
    expect([bad.status, bad.body.error]).toEqual([400, 'invalid_request']);
    const badSince = await h.call('GET', '/api/admin/audit?since=2026-13-01');
    expect([badSince.status, badSince.body.details[0].path]).toEqual([400, 'since']);
    const deliveries = await h.call('GET', '/api/admin/webhooks/deliveries', { token: alice });
    expect([deliveries.status, deliveries.body.error]).toEqual([403, 'insufficient_scope']);
  });

  it('keeps events for the retention, then the purge removes them', async () => {
    await setup({ auditRetentionDays: 2 });
    await h.mint('old', ['acme']);
    h.now += DAY;
    await h.mint('newer', ['acme']);
    h.now = START + 2 * DAY;
    await h.broker.purgeExpired();
    expect(story(await auditLog(h))).toEqual(['token.created root newer']);
    h.now = START + 3 * DAY;
    await h.broker.purgeExpired();
    expect(await auditLog(h)).toEqual([]);
  });
});
