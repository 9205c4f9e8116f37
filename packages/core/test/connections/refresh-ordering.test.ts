import { storageFactories } from '@keyway/test-storages';
import { connectInWorld, createTestWorld } from '@keyway/testing';
import { describe, expect, it } from 'vitest';
import type { Broker } from '../../src/broker/broker.js';
import type { KeywayEvent } from '../../src/events/log.js';
import type { ConnectionTokens } from '../../src/index.js';
import type { Storage } from '../../src/storage/contract.js';
import { brokerPerTest, ROOT } from '../support/spec.js';

/*
 * A refresh never overwrites a newer authorization (the generation of the tokens it started
 * from decides), and the lease of a slow refresh is renewed while it runs, so another
 * instance waits for it instead of refreshing again (docs/api.md §5).
 */

const CONNECTION = 'tenants/bob/linear';

/** A world whose token endpoint holds every refresh until `release()`. */
function gatedWorld(now: () => number) {
  const world = createTestWorld({ now });
  let release!: () => void;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  let arrived!: () => void;
  const reached = new Promise<void>((resolve) => {
    arrived = resolve;
  });
  const fetch = async (input: string | URL | Request, init: RequestInit = {}) => {
    if (String(init.body ?? '').includes('grant_type=refresh_token')) {
      arrived();
      await gate;
    }
    return world.fetch(input, init);
  };
  return { world, fetch, release, reached };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A connection's tokens as the vault holds them. */
async function storedTokens(broker: Broker, storage: Storage): Promise<ConnectionTokens> {
  const entry = await storage.getVaultEntry('connection_tokens', CONNECTION);
  if (entry === null) throw new Error(`no tokens for ${CONNECTION}`);
  return JSON.parse(await broker.vault.open(entry)) as ConnectionTokens;
}

describe.each(storageFactories)('refresh ordering ($name storage)', (factory) => {
  const spec = brokerPerTest();

  async function connected(gated: ReturnType<typeof gatedWorld>, broker: Broker) {
    const put = await broker.providers.put(ROOT, 'linear', {
      template: 'mcp',
      configuration: { resource_url: gated.world.resourceUrl },
    });
    expect(put.created).toBe(true);
    return connectInWorld(gated.world, broker, { providerId: 'linear', connectionId: CONNECTION });
  }

  it('drops the result of a refresh that finishes after a new authorization completed', async () => {
    const gated = gatedWorld(() => spec.now);
    const events: KeywayEvent[] = [];
    const storage = await factory.create();
    const broker = spec.open(storage, {
      fetch: gated.fetch,
      onEvent: (event) => {
        events.push(event);
      },
    });
    await connected(gated, broker);
    const slow = broker.connections.credentials(ROOT, CONNECTION, { force_refresh: true });
    await gated.reached;
    // The user authorizes again while the old refresh is still at the server.
    const again = await connectInWorld(gated.world, broker, {
      providerId: 'linear',
      connectionId: CONNECTION,
    });
    expect(again.status).toBe('active');
    const newer = await storedTokens(broker, storage);
    expect(newer.generation).toBe(2);
    gated.release();
    const reply = await slow;
    expect(reply.connection_id).toBe(CONNECTION);
    expect(reply.access_token).toBe(newer.access_token);
    const stored = await storedTokens(broker, storage);
    expect(stored.access_token).toBe(newer.access_token);
    expect(stored.refresh_token).toBe(newer.refresh_token);
    expect(gated.world.stats.refreshes).toBe(1);
    expect(events.filter((e) => e.type === 'connection.refreshed')).toEqual([]);
  });

  it('renews the lease of a slow refresh, so a second instance waits for it instead of refreshing again', async () => {
    const gated = gatedWorld(() => spec.now);
    const storage = await factory.create();
    const broker = spec.open(storage, { fetch: gated.fetch, refreshLeaseMs: 600 });
    await connected(gated, broker);
    // Another instance, on its own handle on the database where it has one.
    const other = spec.open(
      factory.reopen === undefined ? storage : await factory.reopen(storage),
      {
        fetch: gated.fetch,
        refreshLeaseMs: 600,
      },
    );
    const first = broker.connections.credentials(ROOT, CONNECTION, { force_refresh: true });
    await gated.reached;
    // Far past the lease's first expiry, on the broker's clock; renewals keep it held.
    spec.now += 5_000;
    await sleep(450);
    const second = other.connections.credentials(ROOT, CONNECTION, { force_refresh: true });
    await sleep(100);
    gated.release();
    const [a, b] = await Promise.all([first, second]);
    expect(gated.world.stats.refreshes).toBe(1);
    expect(b.access_token).toBe(a.access_token);
    expect(gated.world.isValidAccessToken(a.access_token)).toBe(true);
  });
});
