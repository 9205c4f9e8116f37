import { createTestWorld, type TestWorld } from '@keyway/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { connectThroughConsent, Harness, putProvider, START, storageFactories } from './harness.js';

/*
 * What a refresh settles is read by every caller on every instance (docs/api.md §5): a
 * failure's verdict is recorded once with the refresh token it concerns, a still-valid token
 * is served while another instance refreshes, and the refresh margin follows the token's
 * lifetime. Two brokers share one storage here, as two instances share a database; the
 * process-level proofs against oidc-provider are in packages/cli/test/refresh-failures.test.ts.
 */

const BASE = 'https://keyway.example.test';
const CONNECTION = 'acme/users/alice/linear';

describe.each(storageFactories)('refresh verdicts across instances ($name storage)', (factory) => {
  let h: Harness;
  let second: Harness;
  let world: TestWorld;

  async function setup(lifetime = 120, extra: Record<string, unknown> = {}) {
    world = createTestWorld({ now: () => h?.now ?? START, accessTokenLifetime: lifetime });
    h = new Harness(await factory.create(), {
      fetch: world.fetch,
      baseUrl: BASE,
      providerManagement: true,
      ...extra,
    });
    second = new Harness(h.storage, {
      fetch: world.fetch,
      baseUrl: BASE,
      providerManagement: true,
      ...extra,
    });
    expect((await putProvider(h, world)).status).toBe(201);
    expect((await connectThroughConsent(h, world, CONNECTION)).status).toBe(200);
  }

  afterEach(async () => {
    expect(h.errors).toEqual([]);
    expect(second.errors).toEqual([]);
    // Not the second broker: closing it would close the storage the first one owns.
    await h.broker.close();
  });

  const both = (count: number, query = '') =>
    Promise.all(
      Array.from({ length: count }, (_, i) =>
        (i % 2 ? second : h).call('GET', `/api/oauth/credentials/${CONNECTION}${query}`),
      ),
    );
  const tokenRequests = () => world.requests.filter((r) => r.url.endsWith('/oauth/token')).length;
  const audit = async (type: string) =>
    (await h.call('GET', `/api/admin/audit?type=${type}&prefix=${CONNECTION}`)).body.items
      .length as number;

  it('records a server error once for a storm of callers on both instances, and tries again for a later one', async () => {
    await setup();
    world.set({ failures: { token: 'server_error' } });
    h.now = second.now = START + 121_000; // expired: every caller needs the refresh
    const before = tokenRequests();
    const storm = await both(10);
    expect(storm.map((answer) => answer.status)).toEqual(Array(10).fill(502));
    expect(storm[0]?.body).toEqual({
      error: 'upstream_error',
      error_description:
        'the token could not be refreshed: server_error (the authorization server answered HTTP 500)',
    });
    expect(tokenRequests() - before).toBe(1);
    expect(await audit('connection.failed')).toBe(1);
    const view = await h.call('GET', `/api/oauth/connections/${CONNECTION}`);
    expect(view.body.status).toBe('active');
    // The server is back: the next caller, who came after the verdict, tries once more.
    world.set({ failures: {} });
    const later = await both(4);
    expect(later.map((answer) => answer.status)).toEqual([200, 200, 200, 200]);
    expect(tokenRequests() - before).toBe(2);
    expect(await audit('connection.failed')).toBe(1);
    expect(await audit('connection.refreshed')).toBe(1);
  });

  it('holds callers with a still-valid token through the back-off of a failure, without asking the server', async () => {
    await setup();
    world.set({ failures: { token: 'server_error' } });
    h.now = second.now = START + 100_000; // 20 s left: due, still valid
    const current = (await h.storedTokens(CONNECTION)).access_token;
    const first = await h.call('GET', `/api/oauth/credentials/${CONNECTION}`);
    expect(first.body.access_token).toBe(current);
    const before = tokenRequests();
    const held = await both(6);
    expect(held.map((answer) => answer.body.access_token)).toEqual(Array(6).fill(current));
    expect(tokenRequests()).toBe(before);
    // A caller that must have a new token is not held: it asks, once.
    const forced = await second.call(
      'GET',
      `/api/oauth/credentials/${CONNECTION}?force_refresh=true`,
    );
    expect(forced.status).toBe(200);
    expect(forced.body.access_token).toBe(current);
    expect(tokenRequests() - before).toBe(1);
    // Past the back-off (10 s, then 20 s), a due token is refreshed again.
    world.set({ failures: {} });
    h.now = second.now = START + 100_000 + 21_000;
    const renewed = await both(2);
    expect(renewed.map((answer) => answer.status)).toEqual([200, 200]);
    expect(renewed[0]?.body.access_token).not.toBe(current);
    expect(tokenRequests() - before).toBe(2);
  });

  it('serves a still-valid token at once while another instance holds the refresh, and takes over for a caller that needs a new one', async () => {
    await setup(120, { refreshLeaseMs: 600 });
    h.now = second.now = START + 100_000;
    const current = (await h.storedTokens(CONNECTION)).access_token;
    // Another instance took the lease and died before it refreshed.
    expect(
      await h.storage.acquireLease(`refresh:${CONNECTION}`, 'dead-instance', h.now + 600, h.now),
    ).toBe(true);
    const before = tokenRequests();
    const served = await both(4);
    expect(served.map((answer) => answer.body.access_token)).toEqual(Array(4).fill(current));
    expect(tokenRequests()).toBe(before);
    // A forced caller waits for the lease to run out, then refreshes once.
    const waited = h.call('GET', `/api/oauth/credentials/${CONNECTION}?force_refresh=true`);
    h.now = second.now = h.now + 601;
    const forced = await waited;
    expect(forced.status).toBe(200);
    expect(forced.body.access_token).not.toBe(current);
    expect(tokenRequests() - before).toBe(1);
  });

  it('scales the refresh margin with the token’s lifetime: never more than half of it', async () => {
    await setup(60); // a server whose tokens live a minute
    const before = tokenRequests();
    h.now = START + 29_000; // 31 s left of 60: not due (a fixed 60 s margin would refresh now)
    expect((await h.call('GET', `/api/oauth/credentials/${CONNECTION}`)).status).toBe(200);
    expect(tokenRequests()).toBe(before);
    h.now = START + 31_000; // 29 s left: due
    expect((await h.call('GET', `/api/oauth/credentials/${CONNECTION}`)).status).toBe(200);
    expect(tokenRequests() - before).toBe(1);
  });
});
