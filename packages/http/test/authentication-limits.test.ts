import { createBroker } from '@keyway/core';
import { memoryStorage } from '@keyway/store-memory';
import { createTestWorld } from '@keyway/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { createHandler } from '../src/index.js';
import { toNodeHandler } from '../src/node/index.js';
import { Harness, listenOnLoopback, ROOT_KEY, storageFactories, VAULT_KEY } from './harness.js';
import { APP, probePerTest } from './probe-support.js';

/*
 * The limits of docs/api.md §12: failed authentications per client address, minting and
 * discovery per delegation tree, never the root key; per instance or shared in storage.
 */

describe.each(storageFactories)('rate limits ($name storage)', (factory) => {
  const suite = probePerTest(factory, { allowedRedirects: [APP] });

  describe('failed authentication and minting are rate limited', () => {
    const BAD = `kw1_${'A'.repeat(60)}`;
    const mintAs = (token: string | undefined, name: string) =>
      suite.h.call('POST', '/api/admin/tokens', {
        ...(token === undefined ? {} : { token }),
        body: { name, scopes: ['acme'], expires_in: 600 },
      });

    it('answers 429 with Retry-After to an address past 20 failures a minute, whatever it presents, and never resets on success', async () => {
      await suite.harness(createTestWorld({ now: () => suite.h.now }).fetch);
      const from = (clientAddress: string, token: string) =>
        suite.h.call('GET', '/api/admin/tokens', { token, clientAddress });
      for (let i = 0; i < 19; i++) expect((await from('203.0.113.7', BAD)).status).toBe(401);
      // A success in between neither counts nor resets the window.
      expect((await from('203.0.113.7', ROOT_KEY)).status).toBe(200);
      expect((await from('203.0.113.7', BAD)).status).toBe(401);
      suite.h.now += 15_000;
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
      expect((await suite.h.call('GET', '/api/admin/tokens')).status).toBe(200);
      suite.h.now += 45_000;
      expect((await from('203.0.113.7', ROOT_KEY)).status).toBe(200);
    });

    it('counts an IPv6 client by its /64, and an IPv4-mapped address as its IPv4 address', async () => {
      await suite.harness(createTestWorld({ now: () => suite.h.now }).fetch);
      for (let i = 0; i < 20; i++) {
        const address = `2001:db8:1:2:${i.toString(16)}::1`;
        expect(
          (await suite.h.call('GET', '/api/admin/tokens', { token: BAD, clientAddress: address }))
            .status,
        ).toBe(401);
      }
      const sameNetwork = await suite.h.call('GET', '/api/admin/tokens', {
        clientAddress: '2001:0db8:0001:0002:ffff::9',
      });
      expect(sameNetwork.status).toBe(429);
      const otherNetwork = await suite.h.call('GET', '/api/admin/tokens', {
        clientAddress: '2001:db8:1:3::1',
      });
      expect(otherNetwork.status).toBe(200);
      for (let i = 0; i < 20; i++) {
        await suite.h.call('GET', '/api/admin/tokens', {
          token: BAD,
          clientAddress: '198.51.100.4',
        });
      }
      const mapped = await suite.h.call('GET', '/api/admin/tokens', {
        clientAddress: '::ffff:198.51.100.4',
      });
      expect(mapped.status).toBe(429);
    });

    it('limits minting per scoped caller, never the root key', async () => {
      await suite.harness(createTestWorld({ now: () => suite.h.now }).fetch);
      const ci = await suite.h.mint('ci', ['acme']);
      for (let i = 0; i < 60; i++) {
        expect((await mintAs(ci, `ci.job-${i}`)).status).toBe(201);
      }
      suite.h.now += 59_000;
      const refused = await mintAs(ci, 'ci.job-60');
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(refused.body.error).toBe('rate_limited');
      expect((await suite.h.call('GET', '/api/admin/tokens/ci.job-60')).status).toBe(404);
      for (let i = 0; i < 70; i++) {
        expect((await mintAs(undefined, `root-${i}`)).status).toBe(201);
      }
      suite.h.now += 1_000;
      expect((await mintAs(ci, 'ci.job-60')).status).toBe(201);
    });

    it('turns limits off with rateLimits: false, or one of them, and takes other limits', async () => {
      suite.h = new Harness(await factory.create(), { rateLimits: false });
      for (let i = 0; i < 40; i++) {
        await suite.h.call('GET', '/api/admin/tokens', {
          token: BAD,
          clientAddress: '203.0.113.9',
        });
      }
      expect(
        (await suite.h.call('GET', '/api/admin/tokens', { clientAddress: '203.0.113.9' })).status,
      ).toBe(200);
      await suite.h.broker.close();
      suite.h = new Harness(await factory.create(), {
        rateLimits: { auth: { limit: 2, windowSeconds: 10 }, mint: false },
      });
      await suite.h.call('GET', '/api/admin/tokens', { token: BAD, clientAddress: '203.0.113.9' });
      await suite.h.call('GET', '/api/admin/tokens', { token: BAD, clientAddress: '203.0.113.9' });
      const limited = await suite.h.call('GET', '/api/admin/tokens', {
        clientAddress: '203.0.113.9',
      });
      expect(limited.status).toBe(429);
      expect(limited.headers.get('retry-after')).toBe('10');
      const ci = await suite.h.mint('ci', ['acme']);
      for (let i = 0; i < 70; i++) {
        expect((await mintAs(ci, `ci.j${i}`)).status).toBe(201);
      }
    });

    it('shares the counters of two instances on one database with shared: true, and keeps them per instance without', async () => {
      suite.h = new Harness(await factory.create(), { rateLimits: { shared: true } });
      const sameDatabase = async () =>
        factory.reopen === undefined ? suite.h.storage : factory.reopen(suite.h.storage);
      const instance = async (shared: boolean) => {
        const broker = createBroker({
          rootKey: ROOT_KEY,
          storage: await sameDatabase(),
          vaultKeys: [VAULT_KEY],
          now: () => suite.h.now,
          purgeIntervalMs: false,
          rateLimits: { shared },
        });
        suite.extraBrokers.push(broker);
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
        await suite.h.call('GET', '/api/admin/tokens', {
          token: BAD,
          clientAddress: '203.0.113.10',
        });
        expect((await other(BAD, '203.0.113.10')).status).toBe(401);
        expect((await alone(BAD, '203.0.113.10')).status).toBe(401);
      }
      const limited = await other(ROOT_KEY, '203.0.113.10');
      expect(limited.status).toBe(429);
      expect(limited.headers.get('retry-after')).toBe('60');
      expect(
        (await suite.h.call('GET', '/api/admin/tokens', { clientAddress: '203.0.113.10' })).status,
      ).toBe(429);
      // The instance that counts alone saw 10 failures only.
      expect((await alone(ROOT_KEY, '203.0.113.10')).status).toBe(200);
    });
  });

  describe('minting is counted per delegation tree, not per name', () => {
    const mintAs = (token: string, name: string) =>
      suite.h.call('POST', '/api/admin/tokens', {
        token,
        body: { name, scopes: ['acme'], expires_in: 600 },
      });

    it.each([
      ['this instance', false],
      ['the storage', true],
    ] as const)(
      'counts every name of a tree against its root, with counters in %s',
      async (_where, shared) => {
        await suite.harness(createTestWorld({ now: () => suite.h.now }).fetch, {
          rateLimits: { mint: { limit: 4, windowSeconds: 60 }, shared },
        });
        const ci = await suite.h.mint('ci', ['acme']);
        expect((await mintAs(ci, 'ci.a')).status).toBe(201);
        expect((await mintAs(ci, 'ci.b')).status).toBe(201);
        const a = await suite.h.mint('ci.a.worker', ['acme'], { by: ci });
        // Before: each child had a budget of its own, so two levels gave 4 + 4 × 4 mints.
        expect((await mintAs(a, 'ci.a.worker.1')).status).toBe(201);
        const refused = await mintAs(a, 'ci.a.worker.2');
        expect(refused.status).toBe(429);
        expect(refused.body.error).toBe('rate_limited');
        expect((await mintAs(ci, 'ci.c')).status).toBe(429);
        // Another tree has its own budget, and the root key none.
        const other = await suite.h.mint('other', ['acme']);
        expect((await mintAs(other, 'other.a')).status).toBe(201);
        expect((await mintAs(ROOT_KEY, 'ci.root-made')).status).toBe(201);
        suite.h.now += 60_000;
        expect((await mintAs(a, 'ci.a.worker.2')).status).toBe(201);
      },
    );
  });

  describe('discovery is counted per delegation tree, as it fetches what the caller names', () => {
    it('refuses the discoveries of a tree past its limit, never the root key’s', async () => {
      const world = createTestWorld({ now: () => suite.h.now });
      await suite.harness(world.fetch, {
        rateLimits: { discover: { limit: 2, windowSeconds: 60 } },
      });
      const probe = await suite.h.mint('probe', ['nothing']);
      const child = await suite.h.mint('probe.child', ['nothing'], { by: probe });
      const discover = (token: string) =>
        suite.h.call('POST', '/api/admin/discover', {
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
      suite.h.now += 60_000;
      expect((await discover(child)).status).toBe(200);
    });
  });
});

describe('over Node http: the client address comes from the socket, or from X-Forwarded-For only when trusted', () => {
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
