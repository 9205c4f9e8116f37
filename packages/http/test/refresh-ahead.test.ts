import type { KeywayEvent, Storage } from '@keyway/core';
import { createTestWorld, type TestWorld, type TestWorldOptions } from '@keyway/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { Harness, storageFactories } from './harness.js';

/*
 * Refresh ahead and the expiring notice (docs/connections.md "Refresh ahead"): the sweep
 * refreshes a connection whose server rotates refresh tokens before its access token
 * expires, and says once when a refresh token's known end comes near.
 */

const BASE = 'https://keyway.example.test';
const CONNECTION = 'acme/users/alice/server';
const MINUTE = 60_000;
const DAY = 86_400_000;

describe.each(storageFactories)('refresh ahead ($name storage)', (factory) => {
  let h: Harness;
  let world: TestWorld;
  const events: KeywayEvent[] = [];

  async function connected(
    options: TestWorldOptions,
    extra: Record<string, unknown>,
    provider: Record<string, unknown> = {},
    prepare: (storage: Storage) => void = () => {},
  ) {
    events.length = 0;
    world = createTestWorld({ now: () => h.now, ...options });
    const storage = await factory.create();
    prepare(storage);
    h = new Harness(storage, {
      fetch: world.fetch,
      baseUrl: BASE,
      providerManagement: true,
      onEvent: (event) => {
        events.push(event);
      },
      ...extra,
    });
    const created = await h.call('PUT', '/api/admin/providers/server', {
      body: { template: 'mcp', configuration: { resource_url: world.resourceUrl }, ...provider },
    });
    expect(created.status).toBe(201);
    const started = await h.call('POST', '/api/oauth/authorize/server', {
      body: { connection_id: CONNECTION },
    });
    const back = new URL(world.consent(started.body.authorization_url));
    expect((await h.call('GET', `${back.pathname}${back.search}`, { token: null })).status).toBe(
      200,
    );
  }

  /** Runs once, after a round's list has read its page and before the round goes on. */
  let between: (() => Promise<void>) | null = null;
  /** Makes the storage's next list run `between` once it has read its page. */
  const interleaved = (storage: Storage) => {
    const list = storage.listConnections.bind(storage);
    storage.listConnections = async (query) => {
      const page = await list(query);
      const other = between;
      between = null;
      await other?.();
      return page;
    };
  };

  const view = async () => (await h.call('GET', `/api/oauth/connections/${CONNECTION}`)).body;
  const typed = (type: string) => events.filter((event) => event.type === type);

  afterEach(async () => {
    await h.broker.close();
  });

  it('refreshes a rotating connection within twice the margin of its expiry, once, and not before', async () => {
    await connected({ accessTokenLifetime: 3600 }, { refreshAhead: 'rotating' });
    // Not known to rotate yet: nothing is due, however close the expiry.
    h.now += 59 * MINUTE;
    expect(await h.broker.connections.refreshAhead()).toEqual({
      due: 0,
      refreshed: 0,
      failed: 0,
      expiring: 0,
    });
    // A caller's refresh shows the rotation.
    expect(
      (await h.call('GET', `/api/oauth/credentials/${CONNECTION}?force_refresh=true`)).status,
    ).toBe(200);
    expect(world.stats.refreshes).toBe(1);
    // Outside the window (2 × 60 s before the new expiry): nothing.
    h.now += 57 * MINUTE;
    expect((await h.broker.connections.refreshAhead()).due).toBe(0);
    // Inside it: one refresh, before any caller asked.
    h.now += 1 * MINUTE + 1;
    expect(await h.broker.connections.refreshAhead()).toEqual({
      due: 1,
      refreshed: 1,
      failed: 0,
      expiring: 0,
    });
    expect(world.stats.refreshes).toBe(2);
    expect((await view()).last_refreshed_at).toBe(new Date(h.now).toISOString());
    expect(await h.broker.connections.refreshAhead()).toEqual({
      due: 0,
      refreshed: 0,
      failed: 0,
      expiring: 0,
    });
    expect(typed('connection.refreshed').map((event) => event.data.refresh_token_rotated)).toEqual([
      true,
      true,
    ]);
  });

  it('does not refresh again the tokens another instance refreshed after the sweep read the connection', async () => {
    // The sweep judges a connection due on the record its list read; another instance may
    // refresh it before the sweep gets to it. The tokens then read are the new ones, valid
    // for an hour: refreshing them is a second refresh of one expiry (a flake of the
    // three-process test showed it, 3 refreshes for 2).
    await connected({ accessTokenLifetime: 3600 }, { refreshAhead: 'rotating' }, {}, interleaved);
    expect(
      (await h.call('GET', `/api/oauth/credentials/${CONNECTION}?force_refresh=true`)).status,
    ).toBe(200);
    h.now += 59 * MINUTE;
    // Read by the sweep's list, then refreshed by "another instance" (a caller's forced
    // refresh), then reached by the sweep.
    between = async () => {
      const forced = await h.call('GET', `/api/oauth/credentials/${CONNECTION}?force_refresh=true`);
      expect(forced.status).toBe(200);
    };
    expect(await h.broker.connections.refreshAhead()).toEqual({
      due: 1,
      refreshed: 0,
      failed: 0,
      expiring: 0,
    });
    expect([world.stats.refreshes, world.stats.refreshTokenReuses]).toEqual([2, 0]);
    // Its next round reads the new tokens, not due.
    expect((await h.broker.connections.refreshAhead()).due).toBe(0);
    expect(world.stats.refreshes).toBe(2);
  });

  it('does not refresh an idle connection again that another instance refreshed after the round read it', async () => {
    // Idle refresh judges on the record its list read too (docs/connections.md "Idle refresh":
    // instances that do this at once refresh a connection once).
    await connected({ accessTokenLifetime: 3600 }, { refreshIdleAfter: DAY }, {}, interleaved);
    h.now += DAY + 1;
    between = async () => {
      const forced = await h.call('GET', `/api/oauth/credentials/${CONNECTION}?force_refresh=true`);
      expect(forced.status).toBe(200);
    };
    expect(await h.broker.connections.refreshIdle()).toEqual({ due: 1, refreshed: 0, failed: 0 });
    expect([world.stats.refreshes, world.stats.refreshTokenReuses]).toEqual([1, 0]);
    // The forced refresh touched it: the next round finds nothing idle.
    expect(await h.broker.connections.refreshIdle()).toEqual({ due: 0, refreshed: 0, failed: 0 });
    expect(world.stats.refreshes).toBe(1);
  });

  it('leaves a connection whose refresh tokens do not rotate to its callers, unless told all', async () => {
    for (const [mode, due] of [
      ['rotating', 0],
      ['all', 1],
    ] as const) {
      await connected(
        { accessTokenLifetime: 3600, rotateRefreshTokens: false },
        { refreshAhead: mode },
      );
      await h.call('GET', `/api/oauth/credentials/${CONNECTION}?force_refresh=true`);
      h.now += 59 * MINUTE;
      expect((await h.broker.connections.refreshAhead()).due).toBe(due);
      expect(world.stats.refreshes).toBe(1 + due);
      await h.broker.close();
    }
    h = new Harness(await factory.create(), {});
  });

  it('knows from its catalog profile that a server rotates, before any refresh (Notion)', async () => {
    await connected(
      { resourceUrl: 'https://mcp.notion.com/mcp', accessTokenLifetime: 3600 },
      { refreshAhead: 'rotating' },
      { profile: 'notion-mcp' },
    );
    h.now += 59 * MINUTE;
    expect(await h.broker.connections.refreshAhead()).toEqual({
      due: 1,
      refreshed: 1,
      failed: 0,
      expiring: 0,
    });
    expect(world.stats.refreshes).toBe(1);
    expect(world.stats.refreshTokenReuses).toBe(0);
  });

  it('says once that a refresh token with a stated end expires, within the notice, and again for the next one', async () => {
    await connected(
      {
        accessTokenLifetime: 3600,
        rotateRefreshTokens: false,
        refreshTokenLifetimeSeconds: 30 * 86_400,
      },
      { refreshAhead: 'rotating', expiringNotice: '7d' },
    );
    const authorizedAt = h.now;
    expect((await view()).token_response.refresh_token_expires_in).toBe(30 * 86_400);
    h.now += 22 * DAY;
    expect((await h.broker.connections.refreshAhead()).expiring).toBe(0);
    h.now += 1 * DAY + 1;
    expect((await h.broker.connections.refreshAhead()).expiring).toBe(1);
    expect((await h.broker.connections.refreshAhead()).expiring).toBe(0);
    expect(
      typed('connection.expiring').map(({ type, actor, resource, data }) => ({
        type,
        actor,
        resource,
        data,
      })),
    ).toEqual([
      {
        type: 'connection.expiring',
        actor: 'system',
        resource: CONNECTION,
        data: {
          refresh_token_expires_at: new Date(authorizedAt + 30 * DAY).toISOString(),
          source: 'token_response',
          action: 'authorize the connection again before then (POST /api/oauth/authorize)',
        },
      },
    ]);
    // Authorized again: a new refresh token, a new end, told again when it comes near.
    const started = await h.call('POST', '/api/oauth/authorize/server', {
      body: { connection_id: CONNECTION },
    });
    const back = new URL(world.consent(started.body.authorization_url));
    await h.call('GET', `${back.pathname}${back.search}`, { token: null });
    expect((await h.broker.connections.refreshAhead()).expiring).toBe(0);
    h.now += 23 * DAY + 1;
    expect((await h.broker.connections.refreshAhead()).expiring).toBe(1);
    expect(typed('connection.expiring')).toHaveLength(2);
  });

  it('counts a refresh token’s end from its profile’s documented lifetime (Miro, 60 days)', async () => {
    await connected(
      { resourceUrl: 'https://mcp.miro.com/', accessTokenLifetime: 200 * 86_400 },
      { refreshAhead: 'rotating' },
      { profile: 'miro-mcp' },
    );
    const authorizedAt = h.now;
    h.now += 53 * DAY - MINUTE;
    expect(await h.broker.connections.refreshAhead()).toEqual({
      due: 0,
      refreshed: 0,
      failed: 0,
      expiring: 0,
    });
    h.now += MINUTE;
    expect(await h.broker.connections.refreshAhead()).toEqual({
      due: 0,
      refreshed: 0,
      failed: 0,
      expiring: 1,
    });
    expect(typed('connection.expiring').map((event) => event.data)).toEqual([
      {
        refresh_token_expires_at: new Date(authorizedAt + 60 * DAY).toISOString(),
        source: 'profile',
        action: 'authorize the connection again before then (POST /api/oauth/authorize)',
      },
    ]);
  });

  it('refreshes a due connection instead of announcing the end of a refresh token it is about to replace', async () => {
    await connected(
      { resourceUrl: 'https://mcp.miro.com/', accessTokenLifetime: 3600 },
      { refreshAhead: 'rotating' },
      { profile: 'miro-mcp' },
    );
    h.now += 55 * DAY;
    expect(await h.broker.connections.refreshAhead()).toEqual({
      due: 1,
      refreshed: 1,
      failed: 0,
      expiring: 0,
    });
    // The rotated refresh token ends 60 days from now: nothing to announce.
    expect((await h.broker.connections.refreshAhead()).expiring).toBe(0);
    expect(typed('connection.expiring')).toEqual([]);
  });

  it('refuses a refreshAhead or expiringNotice it cannot read, naming the option', async () => {
    h = new Harness(await factory.create(), {});
    for (const [extra, message] of [
      [{ refreshAhead: 'sometimes' }, '"refreshAhead" must be false, "rotating" or "all"'],
      [
        { expiringNotice: 1000 },
        '"expiringNotice" must be milliseconds (at least 60000) or a duration such as "7d"',
      ],
    ] as const) {
      expect(() => new Harness(h.storage, extra as Record<string, unknown>)).toThrow(message);
    }
  });
});
