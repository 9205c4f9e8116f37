import { createTestDatabase } from '@keyway/test-support/postgres';
import { type BrokerProcess, startBrokerProcess } from '@keyway/test-support/processes';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { callApi, serveWorld } from './peers.js';

/*
 * Refresh ahead across three keyway serve processes on one PostgreSQL: a connection whose
 * server rotates refresh tokens and revokes the family on reuse (Notion's behaviour) is
 * refreshed before its access token expires, by one process, and its callers then find the
 * new token without refreshing.
 */

const ROOT_KEY = 'refresh-ahead-root-key-0123456789abcdefghij';
const VAULT_KEY = 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8';
const CONNECTION = 'acme/users/alice/notion';

describe('refresh ahead, three keyway serve processes on one PostgreSQL', () => {
  let brokers: BrokerProcess[] = [];
  let drop: () => Promise<void> = async () => {};
  const on = (i: number) => (brokers[i % brokers.length] as BrokerProcess).url;
  const call = (i: number, method: string, path: string, body?: unknown) =>
    callApi(on(i), ROOT_KEY, method, path, body);

  beforeAll(async () => {
    const db = await createTestDatabase(inject('databaseUrl'));
    drop = db.drop;
    const env = {
      KEYWAY_ROOT_KEY: ROOT_KEY,
      KEYWAY_DATABASE: db.url,
      KEYWAY_VAULT_KEYS: VAULT_KEY,
      KEYWAY_ALLOWED_HOSTS: '127.0.0.1',
      KEYWAY_BASE_URL: 'http://localhost:8787',
      KEYWAY_REFRESH_AHEAD: 'rotating',
      // A sweep every second, a window of four seconds before expiry.
      KEYWAY_REFRESH_MARGIN_MS: '2000',
    };
    brokers = await Promise.all([0, 1, 2].map(() => startBrokerProcess(env)));
  }, 120_000);

  afterAll(async () => {
    await Promise.all(brokers.map((broker) => broker.stop()));
    await drop();
  });

  it('refreshes a rotating connection before it expires, once, and no caller refreshes it again', async () => {
    // The authorization's token lasts an hour, the first refresh's (the forced one) 8 s, and
    // every later one an hour again: the world switches back itself, as it answers the first
    // refresh, so the lifetimes do not hang on how fast this test runs. (A third refresh,
    // seen on busy machines, was a sweep refreshing the tokens another process had just
    // refreshed: http's refresh-ahead test holds that it no longer does.)
    const served = await serveWorld(
      {
        accessTokenLifetime: 3600,
        refreshTokenReuse: 'revoke-family',
        invalidGrantDescription: 'OAuth grant revoked',
      },
      (world) => {
        if (world.stats.refreshes === 1) world.set({ accessTokenLifetime: 3600 });
      },
    );
    const { world } = served;
    try {
      expect(
        (
          await call(0, 'PUT', '/api/admin/providers/notion', {
            template: 'mcp',
            configuration: { resource_url: world.resourceUrl },
          })
        ).status,
      ).toBe(201);
      const started = await call(1, 'POST', '/api/oauth/authorize/notion', {
        connection_id: CONNECTION,
      });
      const back = new URL(world.consent(started.body.authorization_url));
      const landed = await fetch(`${on(2)}${back.pathname}${back.search}`);
      expect(landed.status).toBe(200);
      await landed.text();
      // A caller's refresh shows the server rotates; its token lasts 8 s.
      world.set({ accessTokenLifetime: 8 });
      const forced = await call(
        0,
        'GET',
        `/api/oauth/credentials/${CONNECTION}?force_refresh=true`,
      );
      expect(forced.status).toBe(200);
      const expiresAt = Date.parse(forced.body.expires_at);
      // Waits for the broker to store the sweep's refresh, the token of an hour (the server
      // counts the refresh before the broker writes the new token).
      const stored = async () =>
        Date.parse(
          (await call(2, 'GET', `/api/oauth/connections/${CONNECTION}`)).body.token_expires_at,
        );
      await expect
        .poll(stored, { timeout: 20_000, interval: 100 })
        .toBeGreaterThan(expiresAt + 600_000);
      const after = await call(2, 'GET', `/api/oauth/connections/${CONNECTION}`);
      expect(world.stats.refreshes).toBe(2);
      // Ahead of the expiry, by the sweep: no caller asked.
      expect(Date.parse(after.body.last_refreshed_at)).toBeLessThan(expiresAt);
      const answers = await Promise.all(
        [0, 1, 2].map((i) => call(i, 'GET', `/api/oauth/credentials/${CONNECTION}`)),
      );
      expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200]);
      expect(new Set(answers.map((answer) => answer.body.access_token)).size).toBe(1);
      expect(answers[0]?.body.access_token).not.toBe(forced.body.access_token);
      expect([world.stats.refreshes, world.stats.refreshTokenReuses]).toEqual([2, 0]);
      expect(after.body.status).toBe('active');
    } finally {
      await served.close();
    }
  }, 60_000);
});
