import { createHash } from 'node:crypto';
import type { Storage } from '@keyway/core';
import type { PostgresStorage } from '@keyway/store-postgres';
import type { SqliteStorage } from '@keyway/store-sqlite';
import { createTestWorld, type TestWorld } from '@keyway/testing';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  connectThroughConsent,
  Harness,
  putProvider,
  type Reply,
  START,
  storageFactories,
} from './harness.js';

const BASE = 'https://keyway.example.test';
/** Written into every corrupted field: it must never reach a response. */
const MARKER = 'CORRUPT-MARKER-4f1d';

/** The generic answer of docs/api.md §1.2 to an internal error. */
const INTERNAL = {
  error: 'internal_error',
  error_description: 'the server failed to handle the request',
};

describe.each(storageFactories)(
  'stored state is checked on every read ($name storage)',
  (factory) => {
    let world: TestWorld;
    let h: Harness;

    beforeEach(async () => {
      world = createTestWorld({ now: () => h?.now ?? START });
      h = new Harness(await factory.create(), {
        fetch: world.fetch,
        baseUrl: BASE,
        providerManagement: true,
      });
      expect((await putProvider(h, world)).status).toBe(201);
      expect((await connectThroughConsent(h, world, 'acme/alice/linear')).status).toBe(200);
    });

    /** The request answers 500 internal_error, reported once, with nothing of the row. */
    function expectInternal(reply: Reply, what: RegExp): void {
      expect(reply.status).toBe(500);
      expect(reply.body).toEqual(INTERNAL);
      expect(reply.text).not.toContain(MARKER);
      expect(h.errors).toHaveLength(1);
      expect((h.errors[0] as Error).message).toMatch(what);
      expect((h.errors[0] as Error).message).not.toContain(MARKER);
    }

    it('a provider state of the wrong shape', async () => {
      const record = await h.storage.getProvider('linear');
      if (record === null) throw new Error('no provider');
      const state = { ...record.state, label: { [MARKER]: true } };
      expect(
        await h.storage.compareAndSetProvider({ ...record, state, version: 9 }, record.version),
      ).toBe(true);
      expectInternal(
        await h.call('GET', '/api/admin/providers/linear'),
        /state of provider linear/,
      );
    });

    it('a registration of the wrong shape', async () => {
      const record = await h.storage.getProvider('linear');
      if (record === null) throw new Error('no provider');
      const registrations = {
        [world.issuer]: { client_id: 'c', token_endpoint_auth_method: MARKER },
      };
      const state = { ...record.state, registrations };
      await h.storage.compareAndSetProvider({ ...record, state, version: 9 }, record.version);
      expectInternal(
        await h.call('POST', '/api/oauth/authorize/linear', {
          body: { connection_id: 'acme/bob/linear' },
        }),
        /state of provider linear is not valid \(at registrations\./,
      );
    });

    it('a provider whose hand_out is not a boolean refuses hand-outs with a 500, not a token', async () => {
      const record = await h.storage.getProvider('linear');
      if (record === null) throw new Error('no provider');
      // A hand-out reads this one field of the provider: it is checked there too.
      const state = { ...record.state, hand_out: MARKER };
      await h.storage.compareAndSetProvider({ ...record, state, version: 9 }, record.version);
      expectInternal(
        await h.call('GET', '/api/oauth/credentials/acme/alice/linear'),
        /state of provider linear is not valid \(at hand_out\)/,
      );
    });

    it('a connection state of the wrong shape', async () => {
      const record = await h.storage.getConnection('acme/alice/linear');
      if (record === null) throw new Error('no connection');
      const state = { ...record.state, scopes: MARKER };
      await h.storage.compareAndSetConnection({ ...record, state, version: 9 }, record.version);
      expectInternal(
        await h.call('GET', '/api/oauth/connections/acme/alice/linear'),
        /state of connection acme\/alice\/linear is not valid \(at scopes\)/,
      );
    });

    it('a pending authorization of the wrong shape', async () => {
      const started = await h.call('POST', '/api/oauth/authorize/linear', {
        body: { connection_id: 'acme/bob/linear' },
      });
      const back = new URL(world.consent(started.body.authorization_url));
      const state = back.searchParams.get('state') as string;
      const stateHash = createHash('sha256').update(state).digest('hex');
      const pending = await h.storage.takePendingAuthorization(stateHash, h.now);
      if (pending === null) throw new Error('no pending authorization');
      await h.storage.insertPendingAuthorization({
        ...pending,
        state: { ...pending.state, party: MARKER },
      });
      const reply = await h.call('GET', `${back.pathname}${back.search}`, { token: null });
      expectInternal(reply, /stored pending authorization is not valid/);
      // The state was taken: it is single-use, also when its record was corrupt.
      const again = await h.call('GET', `${back.pathname}${back.search}`, { token: null });
      expect(again.status).toBe(400);
    });

    it('sealed connection tokens of the wrong shape', async () => {
      const sealed = await h.broker.vault.seal(
        { kind: 'connection_tokens', key: 'acme/alice/linear' },
        JSON.stringify({ access_token: 42, note: MARKER }),
      );
      await h.storage.putVaultEntry(sealed, h.now);
      expectInternal(
        await h.call('GET', '/api/oauth/credentials/acme/alice/linear'),
        /stored tokens of connection acme\/alice\/linear is not valid \(at access_token\)/,
      );
    });

    it('sealed connection tokens that are not JSON', async () => {
      const sealed = await h.broker.vault.seal(
        { kind: 'connection_tokens', key: 'acme/alice/linear' },
        `{${MARKER}`,
      );
      await h.storage.putVaultEntry(sealed, h.now);
      expectInternal(
        await h.call('GET', '/api/oauth/credentials/acme/alice/linear'),
        /stored tokens of connection acme\/alice\/linear is not JSON/,
      );
    });
  },
);

/** Rewrites a connection's `state` column behind the adapter's back, as raw text. */
const rawWriters: Record<string, (storage: Storage, id: string, text: string) => Promise<void>> = {
  async sqlite(storage, id, text) {
    const { database } = storage as SqliteStorage;
    database.prepare('UPDATE keyway_connections SET state = ? WHERE id = ?').run(text, id);
  },
  async postgres(storage, id, text) {
    const { pool, schema } = storage as PostgresStorage;
    await pool.query(`UPDATE "${schema}".keyway_connections SET state = $1 WHERE id = $2`, [
      text,
      id,
    ]);
  },
};

describe.each(storageFactories.filter((factory) => factory.name in rawWriters))(
  'a row the SQL layer cannot read ($name storage)',
  (factory) => {
    it('is internal_error, reported once, naming the column and never its value', async () => {
      let h!: Harness;
      const world = createTestWorld({ now: () => h?.now ?? START });
      h = new Harness(await factory.create(), {
        fetch: world.fetch,
        baseUrl: BASE,
        providerManagement: true,
      });
      await putProvider(h, world);
      await connectThroughConsent(h, world, 'acme/alice/linear');
      await rawWriters[factory.name]?.(h.storage, 'acme/alice/linear', `{"${MARKER}"`);
      const reply = await h.call('GET', '/api/oauth/connections/acme/alice/linear');
      expect(reply.status).toBe(500);
      expect(reply.body).toEqual(INTERNAL);
      expect(reply.text).not.toContain(MARKER);
      expect(h.errors).toHaveLength(1);
      expect((h.errors[0] as Error).message).toBe('keyway_connections.state is not JSON');
    });
  },
);
