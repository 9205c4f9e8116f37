import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase } from '@keyway/test-support/postgres';
import { type BrokerProcess, startBrokerProcess } from '@keyway/test-support/processes';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { listen, serveWorld } from './peers.js';

/*
 * Instances that race: two and three `keyway serve` processes on one PostgreSQL database,
 * two on one SQLite file, under a concurrent mixed load. Revocation is seen by every
 * instance on the next request; one winner per token name, per authorization state, per
 * refresh lease; webhook attempts and (on PostgreSQL) rate limits are shared.
 * KEYWAY_RACE_ROUNDS sets the rounds of each check (default 5).
 */

const ROUNDS = Number(process.env.KEYWAY_RACE_ROUNDS ?? 5);
const ROOT_KEY = 'racing-instances-root-key-0123456789abcdef';
const VAULT_KEY = 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8';
const SECRET = 'whsec_fBq2m8c0ZkT1wN7yH3rLp5Qx9sVd4Jg6';
const dir = mkdtempSync(join(tmpdir(), 'keyway-race-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function call(
  base: string,
  method: string,
  path: string,
  token = ROOT_KEY,
  body?: unknown,
  headers: Record<string, string> = {},
) {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...headers,
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

const count = (values: number[], value: number) => values.filter((v) => v === value).length;

describe.each([
  {
    engine: 'SQLite',
    instances: 2,
    database: async () => ({ url: join(dir, 'race.sqlite'), drop: async () => {} }),
  },
  { engine: 'PostgreSQL', instances: 2, database: () => createTestDatabase(inject('databaseUrl')) },
  { engine: 'PostgreSQL', instances: 3, database: () => createTestDatabase(inject('databaseUrl')) },
])(
  '$instances keyway serve processes racing on one $engine database',
  ({ engine, instances, database }) => {
    it('agree on every race under a mixed load: revocation, names, states, refresh, webhooks, rate limits', async () => {
      const served = await serveWorld();
      const { world } = served;
      const db = await database();
      // A webhook endpoint that counts what it receives, by webhook-id.
      const received = new Map<string, number>();
      const hook = createServer((request, response) => {
        const id = String(request.headers['webhook-id']);
        received.set(id, (received.get(id) ?? 0) + 1);
        request.resume();
        request.on('end', () => response.writeHead(204).end());
      });
      const hookOrigin = await listen(hook);
      const shared = engine === 'PostgreSQL';
      const env: Record<string, string> = {
        KEYWAY_ROOT_KEY: ROOT_KEY,
        KEYWAY_DATABASE: db.url,
        KEYWAY_VAULT_KEYS: VAULT_KEY,
        KEYWAY_ALLOWED_HOSTS: '127.0.0.1',
        KEYWAY_BASE_URL: 'http://localhost:8787',
        KEYWAY_WEBHOOK_URL: `${hookOrigin}/hooks`,
        KEYWAY_WEBHOOK_SECRET: SECRET,
        // Failed authentications per client address: shared through PostgreSQL.
        KEYWAY_RATE_LIMITS: 'auth=12/60,mint=off',
        // The rate-limit check below comes from an address of its own.
        KEYWAY_TRUST_PROXY: 'true',
      };
      const brokers: BrokerProcess[] = await Promise.all(
        Array.from({ length: instances }, () => startBrokerProcess(env)),
      );
      const bases = brokers.map((broker) => broker.url);
      const on = (i: number) => bases[i % bases.length] as string;
      let load = true;
      let loadRequests = 0;
      const loadErrors: string[] = [];
      try {
        const provider = await call(on(0), 'PUT', '/api/admin/providers/linear', ROOT_KEY, {
          template: 'mcp',
          configuration: { resource_url: world.resourceUrl },
        });
        expect(provider.status).toBe(201);

        // The mixed load, on every instance, for the whole test: mints, secret writes and
        // reads, token lists.
        const loaders = Array.from({ length: 4 }, async (_, worker) => {
          for (let i = 0; load; i++) {
            const base = on(worker + i);
            const kind = i % 4;
            const reply =
              kind === 0
                ? await call(base, 'POST', '/api/admin/tokens', ROOT_KEY, {
                    name: `load-${worker}-${i}`,
                    scopes: ['acme/load'],
                  })
                : kind === 1
                  ? await call(base, 'PUT', `/api/vault/secrets/acme/load/${worker}`, ROOT_KEY, {
                      value: `v${i}`,
                    })
                  : kind === 2
                    ? await call(base, 'GET', `/api/vault/secrets/acme/load/${worker}`)
                    : await call(base, 'GET', '/api/admin/tokens?limit=5');
            loadRequests++;
            if (reply.status >= 300 && !(kind === 2 && reply.status === 404)) {
              loadErrors.push(`${kind} ${reply.status}`);
            }
          }
        });

        for (let round = 0; round < ROUNDS; round++) {
          // Revocation: deleted through one instance, refused by every instance at once.
          const minted = await call(on(round), 'POST', '/api/admin/tokens', ROOT_KEY, {
            name: `revoked-${round}`,
            scopes: ['acme'],
          });
          const token = minted.body.access_token as string;
          for (const base of bases) {
            expect((await call(base, 'GET', '/api/admin/tokens?limit=1', token)).status).toBe(200);
          }
          expect(
            (await call(on(round + 1), 'DELETE', `/api/admin/tokens/revoked-${round}`)).status,
          ).toBe(204);
          // (From an address of their own: these failures count against it, not the load's.)
          const prober = { 'x-forwarded-for': `203.0.113.${round + 1}` };
          const after = await Promise.all(
            bases.map((base) =>
              call(base, 'GET', '/api/admin/tokens?limit=1', token, undefined, prober),
            ),
          );
          expect(after.map((reply) => reply.status)).toEqual(bases.map(() => 401));

          // One winner per name.
          const names = await Promise.all(
            Array.from({ length: 24 }, (_, i) =>
              call(on(i), 'POST', '/api/admin/tokens', ROOT_KEY, {
                name: `contended-${round}`,
                scopes: ['acme'],
              }).then((reply) => reply.status),
            ),
          );
          expect([count(names, 201), count(names, 409)], JSON.stringify(names)).toEqual([1, 23]);

          // One winner per state: one callback URL, sent to every instance at once.
          const connection = `acme/users/u${round}/linear`;
          // A token of one second, expired when the callers come: none has a valid token to
          // be served while the one refresh runs, so every one gets its result.
          world.set({ accessTokenLifetime: 1 });
          const started = await call(on(round), 'POST', '/api/oauth/authorize/linear', ROOT_KEY, {
            connection_id: connection,
          });
          const back = new URL(world.consent(started.body.authorization_url));
          const callbacks = await Promise.all(
            Array.from({ length: 12 }, (_, i) =>
              fetch(`${on(i)}${back.pathname}${back.search}`).then(async (response) => {
                await response.text();
                return response.status;
              }),
            ),
          );
          expect([count(callbacks, 200), count(callbacks, 400)]).toEqual([1, 11]);

          // One refresh per storm; the refreshed token is outside the margin.
          world.set({ accessTokenLifetime: 3600 });
          await new Promise((resolve) => setTimeout(resolve, 1_100));
          const refreshes = world.stats.refreshes;
          const storm = await Promise.all(
            Array.from({ length: 30 }, (_, i) =>
              call(on(i), 'GET', `/api/oauth/credentials/${connection}`),
            ),
          );
          expect(storm.map((reply) => reply.status)).toEqual(Array(30).fill(200));
          expect(world.stats.refreshes - refreshes).toBe(1);
          expect(new Set(storm.map((reply) => reply.body.access_token)).size).toBe(1);
        }

        // Rate limits: 12 failed authentications from one address, spread over the instances.

        const attacker = { 'x-forwarded-for': '198.51.100.7' };

        const failures: number[] = [];

        for (let i = 0; i < 12; i++) {
          const reply = await call(
            on(i),
            'GET',
            '/api/admin/tokens',
            `nope-${i}`,
            undefined,
            attacker,
          );

          failures.push(reply.status);
        }

        expect(failures).toEqual(Array(12).fill(401));

        const next = await Promise.all(
          bases.map((base) =>
            call(base, 'GET', '/api/admin/tokens', ROOT_KEY, undefined, attacker),
          ),
        );

        // Shared through PostgreSQL: every instance now refuses even the right key. On SQLite
        // each instance counts its own (6 of 12 each): both still answer.
        expect(next.map((reply) => reply.status)).toEqual(bases.map(() => (shared ? 429 : 200)));

        load = false;
        await Promise.all(loaders);
        expect(loadErrors).toEqual([]);

        // Webhooks: every event of the audit log arrives once, whichever instance sent it.
        const events: string[] = [];
        for (
          let cursor: string | null = null, first = true;
          first || cursor !== null;
          first = false
        ) {
          const page: { body: { items: { id: string }[]; next_cursor: string | null } } =
            await call(
              on(0),
              'GET',
              `/api/admin/audit?limit=500${cursor === null ? '' : `&cursor=${cursor}`}`,
            );
          events.push(...page.body.items.map((event) => event.id));
          cursor = page.body.next_cursor;
        }
        for (let waited = 0; received.size < events.length && waited < 30_000; waited += 100) {
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        expect(received.size).toBe(events.length);
        expect([...received.values()].every((n) => n === 1)).toBe(true);
        expect(new Set(events)).toEqual(new Set(received.keys()));
        process.stdout.write(
          `race (${engine}, ${instances} instances): ${ROUNDS} rounds, ${loadRequests} load requests, ${events.length} events delivered once each\n`,
        );
      } finally {
        load = false;
        for (const broker of brokers) await broker.stop();
        hook.closeAllConnections();
        hook.close();
        await once(hook, 'close');
        await served.close();
        await db.drop();
      }
    }, 300_000);
  },
);
