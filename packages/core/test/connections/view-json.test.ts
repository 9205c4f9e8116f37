import { storageFactories } from '@keyway/test-storages';
import { connectInWorld, createTestWorld, type TestWorld } from '@keyway/testing';
import { describe, expect, it } from 'vitest';
import type { Broker } from '../../src/broker/broker.js';
import { ConnectionViewCache } from '../../src/connections/view.js';
import { CONNECTION_VIEW_JSON } from '../../src/contract/view-json.js';
import type { Storage } from '../../src/storage/contract.js';
import type { ConnectionRecord } from '../../src/storage/record-types.js';
import { brokerPerTest, connectLinear, ROOT } from '../support/spec.js';

/*
 * The HTTP API's connection view as JSON (`GET /api/oauth/connections/<path>`) is made once
 * per stored record and served again while the record read is the same one. These specify
 * that it is never older than the record: a write on this instance or another, a
 * connection deleted and created again, and time alone (a token expiring without a refresh
 * token) each give a new view, always the one `connections.get` answers.
 */

const CONNECTION = 'acme/users/alice/linear';

describe.each(storageFactories)('the connection view as JSON ($name storage)', (factory) => {
  const spec = brokerPerTest();
  const START = spec.now;

  /**
   * Two instances on one storage. `reads.record` rewrites what a read of the connection
   * answers: a record the view made before cannot explain, or one only it can.
   */
  async function setup(options: { refreshTokens?: boolean } = {}) {
    spec.now = START;
    const world: TestWorld = createTestWorld({
      now: () => spec.now,
      accessTokenLifetime: 120,
      ...(options.refreshTokens === false ? { issueRefreshTokens: false } : {}),
    });
    const shared = await factory.create();
    const reads: { record: ((record: ConnectionRecord) => ConnectionRecord) | null } = {
      record: null,
    };
    const rewritten = (record: ConnectionRecord | null) =>
      record === null || reads.record === null ? record : reads.record(record);
    const storage: Storage = new Proxy(shared, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver);
        if (property === 'getConnection') {
          return async (id: string) => rewritten(await shared.getConnection(id));
        }
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const first = spec.open(storage, { fetch: world.fetch });
    const second = spec.another(storage, { fetch: world.fetch });
    await connectLinear(world, first, CONNECTION);
    return { world, first, second, reads, shared };
  }

  const viewJson = (broker: Broker) => broker.connections[CONNECTION_VIEW_JSON](ROOT, CONNECTION);
  const viewOf = async (broker: Broker) =>
    JSON.stringify(await broker.connections.get(ROOT, CONNECTION));

  it('answers the view connections.get answers, and serves it again for the same record', async () => {
    const { first, reads } = await setup();
    const made = await viewJson(first);
    expect(made).toBe(await viewOf(first));
    expect(JSON.parse(made)).toMatchObject({ connection_id: CONNECTION, alias: null });
    // The same record read again (its version, times and incarnation): the view made before,
    // even where what is read now differs (only that view can answer this alias).
    reads.record = (record) => ({ ...record, state: { ...record.state, alias: 'not-stored' } });
    expect(await viewJson(first)).toBe(made);
    expect(JSON.parse(await viewOf(first)).alias).toBe('not-stored');
  });

  it('makes the view again after a write, on this instance and on another', async () => {
    const { first, second } = await setup();
    const before = await viewJson(first);
    expect(JSON.parse(await viewJson(second)).alias).toBe(null);
    spec.now += 1_000;
    await second.connections.update(ROOT, CONNECTION, { alias: 'tracker' });
    const after = await viewJson(first);
    expect(after).not.toBe(before);
    expect(JSON.parse(after)).toMatchObject({
      alias: 'tracker',
      updated_at: new Date(spec.now).toISOString(),
    });
    expect(after).toBe(await viewOf(first));
    // A write within the same millisecond still moves the version.
    await first.connections.update(ROOT, CONNECTION, { alias: 'tracker-2' });
    expect(JSON.parse(await viewJson(second)).alias).toBe('tracker-2');
    expect(JSON.parse(await viewJson(first)).alias).toBe('tracker-2');
  });

  it.each([
    [
      'other times (a backup restored)',
      (record: ConnectionRecord) => ({ updatedAt: record.updatedAt + 1 }),
    ],
    ['another creation time', (record: ConnectionRecord) => ({ createdAt: record.createdAt - 1 })],
    [
      'another incarnation (created again within the millisecond)',
      () => ({ incarnation: 'another' }),
    ],
  ])('makes the view again for a record of the same version with %s', async (_, change) => {
    const { first, reads } = await setup();
    const made = JSON.parse(await viewJson(first));
    expect(made.alias).toBe(null);
    reads.record = (record) => {
      const changed = change(record) as Partial<ConnectionRecord> & { incarnation?: string };
      const { incarnation, ...fields } = changed;
      return {
        ...record,
        ...fields,
        state: {
          ...record.state,
          alias: 'elsewhere',
          ...(incarnation === undefined ? {} : { incarnation }),
        },
      };
    };
    const again = await viewJson(first);
    expect(JSON.parse(again).alias).toBe('elsewhere');
    expect(again).toBe(await viewOf(first));
  });

  it('makes the view of a connection deleted and created again anew, whatever its version', async () => {
    const { world, first, shared } = await setup();
    const before = JSON.parse(await viewJson(first));
    expect(before.created_at).toBe(new Date(START).toISOString());
    await first.connections.delete(ROOT, CONNECTION);
    spec.now += 5_000;
    const again = await connectInWorld(world, first, {
      providerId: 'linear',
      connectionId: CONNECTION,
    });
    expect(again.status).toBe('active');
    const record = await shared.getConnection(CONNECTION);
    const after = JSON.parse(await viewJson(first));
    expect(after.created_at).toBe(new Date(spec.now).toISOString());
    expect(after.created_at).toBe(new Date(record?.createdAt ?? 0).toISOString());
    expect(JSON.stringify(after)).toBe(await viewOf(first));
  });

  it('shows an expired token without a refresh token once it has expired, by time alone', async () => {
    const { first } = await setup({ refreshTokens: false });
    const fresh = JSON.parse(await viewJson(first));
    expect(fresh).toMatchObject({ refreshable: false, error: null });
    spec.now = START + 119_999; // the last millisecond of the token
    expect(JSON.parse(await viewJson(first)).error).toBe(null);
    spec.now = START + 120_000;
    const expired = await viewJson(first);
    expect(JSON.parse(expired).error).toEqual({
      code: 'token_expired',
      description:
        `the access token expired at ${new Date(START + 120_000).toISOString()} and the authorization ` +
        'server gave no refresh token: a new consent is needed (authorize again)',
    });
    expect(expired).toBe(await viewOf(first));
  });
});

describe('ConnectionViewCache', () => {
  const record = (n: number, alias?: string): ConnectionRecord => ({
    id: `acme/users/u${n}/linear`,
    providerId: 'linear',
    status: 'active',
    state: {
      scopes: ['read'],
      token_expires_at: null,
      authorized_at: 1_000,
      last_refreshed_at: null,
      error: null,
      ...(alias === undefined ? {} : { alias }),
    },
    version: 3,
    createdAt: 1_000,
    updatedAt: 2_000,
  });

  it('keeps the views of at most 1,000 connections, the first made dropped first', () => {
    const views = new ConnectionViewCache();
    const first = views.json(record(0), 5_000);
    expect(JSON.parse(first)).toMatchObject({ connection_id: 'acme/users/u0/linear', alias: null });
    for (let n = 1; n < 1_000; n++) views.json(record(n), 5_000);
    // A thousand kept: the first is still the view made before (only it says no alias).
    expect(views.json(record(0, 'read-later'), 5_000)).toBe(first);
    views.json(record(1_000), 5_000);
    expect(JSON.parse(views.json(record(0, 'read-later'), 5_000)).alias).toBe('read-later');
    expect(JSON.parse(views.json(record(1_000, 'read-later'), 5_000)).alias).toBe(null);
  });
});
