import { storageFactories } from '@keyway/test-storages';
import { createTestWorld, type TestWorld } from '@keyway/testing';
import { afterEach, describe, expect, it } from 'vitest';
import type { Broker } from '../../src/broker/broker.js';
import type { BrokerConfig } from '../../src/broker/config.js';
import { KeywayError } from '../../src/contract/errors.js';
import type { Storage } from '../../src/storage/contract.js';
import { brokerPerTest, connectLinear, ROOT } from '../support/spec.js';

/*
 * What a refresh settles is read by every caller on every instance (docs/api.md §5): a
 * failure's verdict is recorded once with the refresh token it concerns, a still-valid token
 * is served while another instance refreshes, and the refresh margin follows the token's
 * lifetime. Two brokers share one storage here, as two instances share a database; the
 * process-level proofs against oidc-provider are in packages/cli/test/refresh-failures.test.ts.
 */

const CONNECTION = 'acme/users/alice/linear';

describe.each(storageFactories)('refresh verdicts across instances ($name storage)', (factory) => {
  const spec = brokerPerTest();
  const START = spec.now;
  let first: Broker;
  let second: Broker;
  let storage: Storage;
  let world: TestWorld;

  /**
   * The storm's gate: the token requests it holds until every caller has joined a refresh
   * (`callers` of them have read the connection, then a turn of the event loop has passed)
   * and both instances have asked for the refresh lease. A storm is then a storm however
   * slowly a busy machine (or a PostgreSQL pool) brings each caller to its refresh: one that
   * came after the verdict was recorded would rightly ask the server again. A caller's path
   * from its read to its refresh has no I/O once its instance has opened the tokens it reads
   * (the storm's callers are served from that cache), so the turn is enough.
   */
  let gate: {
    callers: number;
    reads: number;
    joined: boolean;
    owners: Set<string>;
    open: () => void;
    opened: Promise<void>;
  } | null = null;
  const gateTokenRequests = (callers: number) => {
    let open = () => {};
    const opened = new Promise<void>((resolve) => {
      open = resolve;
    });
    gate = { callers, reads: 0, joined: false, owners: new Set(), open, opened };
  };
  const openWhenReady = () => {
    if (gate?.joined && gate.owners.size >= 2) gate.open();
  };

  /** A caller's read of the connection for its hand-out, counted for the gate. */
  const readDone = async () => {
    const counting = gate;
    if (counting === null) return;
    counting.reads += 1;
    if (counting.reads < counting.callers) return;
    await new Promise((resolve) => setImmediate(resolve));
    counting.joined = true;
    openWhenReady();
  };
  const countingReads = (fast: NonNullable<Storage['fastPaths']>) => {
    const counted = <A extends [string, ...unknown[]], R>(read: ((...args: A) => R) | undefined) =>
      read === undefined
        ? undefined
        : (...args: A): R => {
            const result = read(...args);
            const done = () => {
              if (args[0] === CONNECTION) void readDone();
            };
            if (result instanceof Promise) {
              return result.then((value) => {
                done();
                return value;
              }) as R;
            }
            done();
            return result;
          };
    if (fast.readForHandOut === undefined) return fast;
    return {
      ...fast,
      // A hand-out's read, and the gateway's (synchronous where the storage reads so).
      readForHandOut: counted(fast.readForHandOut),
      readForHandOutSync: counted(fast.readForHandOutSync),
      readWithTokens: counted(fast.readWithTokens),
      readWithTokensSync: counted(fast.readWithTokensSync),
    };
  };

  async function setup(lifetime = 120, extra: Partial<BrokerConfig> = {}) {
    spec.now = START;
    gate = null;
    world = createTestWorld({ now: () => spec.now, accessTokenLifetime: lifetime });
    const shared = await factory.create();
    // Every engine here reads a hand-out in one statement: the gate counts those reads.
    expect(typeof shared.fastPaths?.readForHandOut).toBe('function');
    storage = new Proxy(shared, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver);
        if (property === 'fastPaths' && value !== undefined) return countingReads(value);
        if (property !== 'acquireLease' || typeof value !== 'function') {
          return typeof value === 'function' ? value.bind(target) : value;
        }
        return (key: string, owner: string, expiresAt: number, now: number) => {
          if (gate !== null && key === `refresh:${CONNECTION}`) {
            gate.owners.add(owner);
            openWhenReady();
          }
          return shared.acquireLease(key, owner, expiresAt, now);
        };
      },
    });
    const fetch: typeof world.fetch = async (input, init) => {
      const url = input instanceof Request ? input.url : String(input);
      if (gate !== null && url.endsWith('/oauth/token')) await gate.opened;
      return world.fetch(input, init);
    };
    first = spec.open(storage, { fetch, ...extra });
    second = spec.another(storage, { fetch, ...extra });
    await connectLinear(world, first, CONNECTION);
  }

  /** A hand-out's outcome: its token, or the status and wire body of its refusal. */
  /** What each instance threw that is not a KeywayError: an internal error, none expected. */
  const unexpected = new Map<Broker, unknown[]>();
  afterEach(() => {
    expect(unexpected.get(first) ?? []).toEqual([]);
    expect(unexpected.get(second) ?? []).toEqual([]);
    unexpected.clear();
  });
  const handOut = (broker: Broker, force = false) =>
    broker.connections.credentials(ROOT, CONNECTION, force ? { force_refresh: true } : {}).then(
      (credentials) => ({ status: 200, body: { ...credentials } as Record<string, unknown> }),
      (error: unknown) => {
        if (!(error instanceof KeywayError)) {
          unexpected.set(broker, [...(unexpected.get(broker) ?? []), error]);
          return { status: 500, body: {} as Record<string, unknown> };
        }
        return { status: error.status, body: error.toJSON() as Record<string, unknown> };
      },
    );
  const both = (count: number) =>
    Promise.all(Array.from({ length: count }, (_, i) => handOut(i % 2 ? second : first)));
  const tokenRequests = () => world.requests.filter((r) => r.url.endsWith('/oauth/token')).length;
  const audit = async (type: 'connection.failed' | 'connection.refreshed') =>
    (await first.events.list(ROOT, { type, prefix: CONNECTION })).items.length;
  /** The connection's access token as the vault holds it. */
  const storedAccessToken = async () => {
    const entry = await storage.getVaultEntry('connection_tokens', CONNECTION);
    if (entry === null) throw new Error(`no tokens for ${CONNECTION}`);
    return (JSON.parse(await first.vault.open(entry)) as { access_token: string }).access_token;
  };

  it('records a server error once for a storm of callers on both instances, and tries again for a later one', async () => {
    await setup();
    world.set({ failures: { token: 'server_error' } });
    // Each instance opens the tokens once while they are fresh (nothing to refresh yet).
    const warm = [await handOut(first), await handOut(second)];
    expect(warm.map((answer) => answer.status)).toEqual([200, 200]);
    spec.now = START + 121_000; // expired: every caller needs the refresh
    const before = tokenRequests();
    gateTokenRequests(10);
    const storm = await both(10);
    gate = null;
    expect(storm.map((answer) => answer.status)).toEqual(Array(10).fill(502));
    expect(storm[0]?.body).toEqual({
      error: 'upstream_error',
      error_description:
        'the token could not be refreshed: server_error (the authorization server answered HTTP 500)',
    });
    expect(tokenRequests() - before).toBe(1);
    expect(await audit('connection.failed')).toBe(1);
    const view = await first.connections.get(ROOT, CONNECTION);
    expect(view.status).toBe('active');
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
    spec.now = START + 100_000; // 20 s left: due, still valid
    const current = await storedAccessToken();
    const served = await handOut(first);
    expect(served.body.access_token).toBe(current);
    const before = tokenRequests();
    const held = await both(6);
    expect(held.map((answer) => answer.body.access_token)).toEqual(Array(6).fill(current));
    expect(tokenRequests()).toBe(before);
    // A caller that must have a new token is not held: it asks, once.
    const forced = await handOut(second, true);
    expect(forced.status).toBe(200);
    expect(forced.body.access_token).toBe(current);
    expect(tokenRequests() - before).toBe(1);
    // Past the back-off (10 s, then 20 s), a due token is refreshed again.
    world.set({ failures: {} });
    spec.now = START + 100_000 + 21_000;
    const renewed = await both(2);
    expect(renewed.map((answer) => answer.status)).toEqual([200, 200]);
    expect(renewed[0]?.body.access_token).not.toBe(current);
    expect(tokenRequests() - before).toBe(2);
  });

  it('serves a still-valid token at once while another instance holds the refresh, and takes over for a caller that needs a new one', async () => {
    await setup(120, { refreshLeaseMs: 600 });
    spec.now = START + 100_000;
    const current = await storedAccessToken();
    // Another instance took the lease and died before it refreshed.
    expect(
      await storage.acquireLease(
        `refresh:${CONNECTION}`,
        'dead-instance',
        spec.now + 600,
        spec.now,
      ),
    ).toBe(true);
    const before = tokenRequests();
    const served = await both(4);
    expect(served.map((answer) => answer.body.access_token)).toEqual(Array(4).fill(current));
    expect(tokenRequests()).toBe(before);
    // A forced caller waits for the lease to run out, then refreshes once.
    const waited = handOut(first, true);
    spec.now += 601;
    const forced = await waited;
    expect(forced.status).toBe(200);
    expect(forced.body.access_token).not.toBe(current);
    expect(tokenRequests() - before).toBe(1);
  });

  it('scales the refresh margin with the token’s lifetime: never more than half of it', async () => {
    await setup(60); // a server whose tokens live a minute
    const before = tokenRequests();
    spec.now = START + 29_000; // 31 s left of 60: not due (a fixed 60 s margin would refresh now)
    expect((await handOut(first)).status).toBe(200);
    expect(tokenRequests()).toBe(before);
    spec.now = START + 31_000; // 29 s left: due
    expect((await handOut(first)).status).toBe(200);
    expect(tokenRequests() - before).toBe(1);
  });
});
