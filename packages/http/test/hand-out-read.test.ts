import { type BrokerConfig, rootPrincipal, type Storage } from '@keyway/core';
import { memoryStorage } from '@keyway/store-memory';
import { createTestWorld, type TestWorld } from '@keyway/testing';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  connectThroughConsent,
  Harness,
  START,
  type StorageFactory,
  storageFactories,
} from './harness.js';

const BASE = 'https://keyway.example.test';
const CONNECTION = 'acme/alice/linear';

/** A memory storage without the optional joined reads: core makes the three reads. */
const withoutJoinedRead: StorageFactory = {
  name: 'memory without readForHandOut',
  create: async () => {
    const storage = memoryStorage();
    const {
      readForHandOut: _,
      readForHandOutSync: __,
      readWithTokens: ___,
      readWithTokensSync: ____,
      ...rest
    } = storage.fastPaths ?? {};
    return { ...storage, fastPaths: rest };
  },
  rawText: async () => null,
};

/**
 * A hand-out reads the connection, its tokens and its provider's `hand_out` in one storage
 * read where the adapter offers it (`readForHandOut`), and one at a time where it does not:
 * the answers are the same either way.
 */
describe.each([...storageFactories, withoutJoinedRead])(
  "a hand-out's reads ($name storage)",
  (factory) => {
    let world: TestWorld;
    let storage: Storage;

    beforeEach(async () => {
      world = createTestWorld({ now: () => START });
      storage = await factory.create();
    });

    const harness = (extra: Partial<BrokerConfig>) =>
      new Harness(storage, { fetch: world.fetch, baseUrl: BASE, ...extra });

    const mcp = (extra: Record<string, unknown> = {}) => ({
      template: 'mcp' as const,
      configuration: { resource_url: world.resourceUrl },
      ...extra,
    });

    it('hands out the token of a provider that allows it, and refuses an inject-only one', async () => {
      const h = harness({ providerManagement: true });
      expect(factory.name === withoutJoinedRead.name).toBe(
        storage.fastPaths?.readForHandOut === undefined,
      );
      expect((await h.call('PUT', '/api/admin/providers/linear', { body: mcp() })).status).toBe(
        201,
      );
      expect((await connectThroughConsent(h, world, CONNECTION)).status).toBe(200);
      const stored = await h.storedTokens(CONNECTION);
      const given = await h.call('GET', `/api/oauth/credentials/${CONNECTION}`);
      expect(given.status).toBe(200);
      expect(given.body).toMatchObject({
        connection_id: CONNECTION,
        access_token: stored.access_token,
        token_type: 'Bearer',
      });

      const inject = await h.call('PUT', '/api/admin/providers/linear', {
        body: mcp({ hand_out: false }),
      });
      expect(inject.status).toBe(200);
      const refused = await h.call('GET', `/api/oauth/credentials/${CONNECTION}`);
      expect(refused.status).toBe(403);
      expect(refused.body.error).toBe('credentials_not_exportable');
      expect(refused.text).not.toContain(stored.access_token);

      expect((await h.call('PUT', '/api/admin/providers/linear', { body: mcp() })).status).toBe(
        200,
      );
      expect((await h.call('GET', `/api/oauth/credentials/${CONNECTION}`)).status).toBe(200);
      const audit = await h.call('GET', '/api/admin/audit?type=credentials.issued');
      expect(audit.body.items).toHaveLength(2);
    });

    it("follows a declared provider's declaration as it changes between brokers", async () => {
      const open = harness({ providers: { linear: mcp() } });
      expect((await connectThroughConsent(open, world, CONNECTION)).status).toBe(200);
      expect((await open.call('GET', `/api/oauth/credentials/${CONNECTION}`)).status).toBe(200);

      // The same storage, a broker whose declaration now keeps the tokens in.
      const closed = harness({ providers: { linear: mcp({ hand_out: false }) } });
      const refused = await closed.call('GET', `/api/oauth/credentials/${CONNECTION}`);
      expect(refused.status).toBe(403);
      expect(refused.body.error).toBe('credentials_not_exportable');
      const rewritten = await storage.getProvider('linear');
      expect(rewritten?.state.hand_out).toBe(false);
      // Written once for the change, not again at each read.
      for (let i = 0; i < 3; i++) {
        expect((await closed.call('GET', `/api/oauth/credentials/${CONNECTION}`)).status).toBe(403);
      }
      expect((await storage.getProvider('linear'))?.version).toBe(rewritten?.version);

      const reopened = harness({ providers: { linear: mcp() } });
      expect((await reopened.call('GET', `/api/oauth/credentials/${CONNECTION}`)).status).toBe(200);
    });

    it('stores a declaration once, however often it is read, and again when a setting changes', async () => {
      const declared = (scopes: string[]) =>
        mcp({
          label: 'Linear',
          configuration: {
            resource_url: world.resourceUrl,
            scopes,
            authorization_params: { audience: 'linear' },
            token_params: { tenant: 'acme' },
          },
        });
      const first = harness({ providers: { linear: declared(['read']) } });
      expect((await connectThroughConsent(first, world, CONNECTION)).status).toBe(200);
      for (let i = 0; i < 3; i++) {
        expect((await first.call('GET', `/api/oauth/credentials/${CONNECTION}`)).status).toBe(200);
      }
      const again = harness({ providers: { linear: declared(['read']) } });
      expect((await again.call('GET', `/api/oauth/credentials/${CONNECTION}`)).status).toBe(200);
      expect((await storage.getProvider('linear'))?.version).toBe(1);
      expect(world.stats.registrations).toBe(1);

      const wider = harness({ providers: { linear: declared(['read', 'write']) } });
      expect((await wider.call('GET', `/api/oauth/credentials/${CONNECTION}`)).status).toBe(200);
      const stored = await storage.getProvider('linear');
      expect(stored?.version).toBe(2);
      expect(stored?.state.configuration).toMatchObject({ scopes: ['read', 'write'] });
      expect(world.stats.registrations).toBe(1);
    });

    it("stores a declared provider's own client once, and again when its client id changes", async () => {
      const declared = (clientId: string) =>
        mcp({ credentials: { mode: 'custom', client_id: clientId, client_secret: 'a-secret' } });
      const first = harness({ providers: { linear: declared('client-one') } });
      // Each authorization reads the provider, storing it first when its declaration changed.
      const authorize = (h: Harness, n: number) =>
        h.broker.connections.authorize(rootPrincipal(), 'linear', { connection_id: `c/${n}` });
      for (let i = 0; i < 3; i++) await authorize(first, i);
      const again = harness({ providers: { linear: declared('client-one') } });
      await authorize(again, 3);
      expect((await storage.getProvider('linear'))?.version).toBe(1);
      const other = harness({ providers: { linear: declared('client-two') } });
      await authorize(other, 4);
      const stored = await storage.getProvider('linear');
      expect(stored?.version).toBe(2);
      expect(stored?.state.mode).toBe('custom');
      expect(Object.values(stored?.state.registrations ?? {})).toMatchObject([
        { client_id: 'client-two' },
      ]);
    });

    it('answers 404 for a connection that does not exist, before anything else', async () => {
      const h = harness({ providerManagement: true });
      const missing = await h.call('GET', '/api/oauth/credentials/acme/nobody/linear');
      expect(missing.status).toBe(404);
      expect(missing.body.error).toBe('not_found');
    });
  },
);
