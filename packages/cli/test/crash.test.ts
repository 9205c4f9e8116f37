import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase } from '@keyway/test-support/postgres';
import { type BrokerProcess, startBrokerProcess } from '@keyway/test-support/processes';
import type { TestWorld } from '@keyway/testing';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { freePort, serveWorld } from './peers.js';

/*
 * Crash durability: `keyway serve` under a write load (mints, tree deletes, narrowing
 * cascades, secret writes and deletes, provider writes, authorizations and callbacks,
 * refreshes), killed with SIGKILL at a random moment, restarted, and checked: every write
 * acknowledged with a 2xx is there and intact, nothing is half-applied, every vault entry
 * decrypts, every pending authorization is still single-use. KEYWAY_CRASH_KILLS sets the
 * kills per engine (default 20); the figures go to docs/reliability.md by hand.
 */

const KILLS = Number(process.env.KEYWAY_CRASH_KILLS ?? 20);
const WORKERS = 6;
/**
 * Writes acknowledged in each round before its kill may come: the harness proves nothing
 * without work, and waits for it (a busy machine only takes longer), up to WORK_LIMIT_MS.
 */
const ROUND_WRITES = 11;
const WORK_LIMIT_MS = 60_000;
const ROOT_KEY = 'crash-harness-root-key-0123456789abcdefgh';
const VAULT_KEY = 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8';
const dir = mkdtempSync(join(tmpdir(), 'keyway-crash-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A write's fate: acknowledged with a 2xx, or cut by the kill (either outcome is allowed). */
type Fate = 'acked' | 'cut';

/** What the harness knows must hold, and what may hold, after a restart. */
interface Model {
  /** Token name → its scopes, or `null` when it must not exist. */
  tokens: Map<string, string[] | null>;
  /** Trees whose delete or narrowing was cut: root name → the two allowed states. */
  cutTrees: { names: string[]; before: (string[] | null)[]; after: (string[] | null)[] }[];
  /** Secret path → the allowed values (`null`: absent). */
  secrets: Map<string, (string | null)[]>;
  /** Connections acknowledged active. */
  active: Set<string>;
  /** Callback URLs acknowledged (their state used). */
  usedCallbacks: string[];
  /** Callback URLs of acknowledged authorizations never called back. */
  pendingCallbacks: { connection: string; url: string }[];
  /** Tokens and connections written since the last check: each check reads those only. */
  touched: Set<string>;
}

class Cut extends Error {}

describe.each([
  {
    engine: 'SQLite',
    database: async () => ({ url: join(dir, 'crash.sqlite'), drop: async () => {} }),
  },
  { engine: 'PostgreSQL', database: () => createTestDatabase(inject('databaseUrl')) },
])('crash durability of keyway serve on $engine', ({ engine, database }) => {
  it(
    `keeps every acknowledged write and nothing half-applied through ${KILLS} SIGKILLs`,
    async () => {
      const served = await serveWorld({ accessTokenLifetime: 3600 });
      const world: TestWorld = served.world;
      const db = await database();
      const port = await freePort();
      const base = `http://127.0.0.1:${port}`;
      const env: Record<string, string> = {
        KEYWAY_ROOT_KEY: ROOT_KEY,
        KEYWAY_DATABASE: db.url,
        KEYWAY_VAULT_KEYS: VAULT_KEY,
        KEYWAY_ALLOWED_HOSTS: '127.0.0.1',
        KEYWAY_BASE_URL: base,
        KEYWAY_RATE_LIMITS: 'off',
        PORT: String(port),
      };
      const model: Model = {
        tokens: new Map(),
        cutTrees: [],
        secrets: new Map(),
        active: new Set(),
        usedCallbacks: [],
        pendingCallbacks: [],
        touched: new Set(),
      };
      let serial = 0;
      let broker: BrokerProcess | null = null;
      const figures = { acked: 0, cut: 0, checks: 0 };

      /** One request; a network failure (the kill) is a {@link Cut}. */
      async function call(method: string, path: string, body?: unknown) {
        let response: Response;
        try {
          response = await fetch(`${base}${path}`, {
            method,
            headers: {
              authorization: `Bearer ${ROOT_KEY}`,
              ...(body === undefined ? {} : { 'content-type': 'application/json' }),
            },
            body: body === undefined ? undefined : JSON.stringify(body),
          });
        } catch {
          throw new Cut();
        }
        let text: string;
        try {
          text = await response.text();
        } catch {
          throw new Cut();
        }
        return { status: response.status, body: text ? JSON.parse(text) : null };
      }

      async function callback(url: string) {
        try {
          const { pathname, search } = new URL(url);
          const response = await fetch(`${base}${pathname}${search}`, { redirect: 'manual' });
          await response.text();
          return response.status;
        } catch {
          throw new Cut();
        }
      }

      async function mint(name: string, scopes: string[]): Promise<Fate> {
        try {
          const reply = await call('POST', '/api/admin/tokens', {
            name,
            scopes,
            expires_in: 86_400,
          });
          expect(reply.status, JSON.stringify(reply.body)).toBe(201);
          model.tokens.set(name, reply.body.scopes);
          model.touched.add(name);
          return 'acked';
        } catch (error) {
          if (!(error instanceof Cut)) throw error;
          model.cutTrees.push({
            names: [name],
            before: [null],
            after: [[...scopes].map((s) => `${s}/**`)],
          });
          return 'cut';
        }
      }

      /** The secrets being written now (each by one worker). */
      const writingSecrets = new Set<string>();
      /** The operations of the load, each on keys of its own. */
      const operations: (() => Promise<Fate>)[] = [
        // A mint.
        () => mint(`m${++serial}`, ['acme']),
        // A tree (a root and six descendants), then its delete: all or nothing.
        async () => {
          const root = `d${++serial}`;
          const names = [root, ...['a', 'b', 'c', 'd', 'e', 'f'].map((x) => `${root}.${x}`)];
          for (const name of names) if ((await mint(name, ['acme'])) === 'cut') return 'cut';
          const before = names.map((name) => model.tokens.get(name) ?? null);
          try {
            const reply = await treeWrite(() => call('DELETE', `/api/admin/tokens/${root}`));
            expect(reply.status).toBe(204);
            for (const name of names) {
              model.tokens.set(name, null);
              model.touched.add(name);
            }
            return 'acked';
          } catch (error) {
            if (!(error instanceof Cut)) throw error;
            for (const name of names) model.tokens.delete(name);
            model.cutTrees.push({ names, before, after: names.map(() => null) });
            return 'cut';
          }
        },
        // A narrowing that cascades: children of acme/a narrowed with their root, the others
        // (acme/b) deleted.
        async () => {
          const root = `n${++serial}`;
          const children = ['a1', 'a2', 'a3', 'b1', 'b2', 'b3'];
          const names = [root, ...children.map((x) => `${root}.${x}`)];
          const scopesOf = (x: string) => [x.startsWith('a') ? 'acme/a' : 'acme/b'];
          if ((await mint(root, ['acme'])) === 'cut') return 'cut';
          for (const x of children) {
            if ((await mint(`${root}.${x}`, scopesOf(x))) === 'cut') return 'cut';
          }
          const before = names.map((name) => model.tokens.get(name) ?? null);
          const after = [
            ['acme/a/**'],
            ...children.map((x) => (x.startsWith('a') ? ['acme/a/**'] : null)),
          ];
          try {
            const reply = await treeWrite(() =>
              call('PATCH', `/api/admin/tokens/${root}`, { scopes: ['acme/a'] }),
            );
            expect(reply.status).toBe(200);
            names.forEach((name, i) => {
              model.tokens.set(name, after[i] as string[] | null);
              model.touched.add(name);
            });
            return 'acked';
          } catch (error) {
            if (!(error instanceof Cut)) throw error;
            for (const name of names) model.tokens.delete(name);
            model.cutTrees.push({ names, before, after });
            return 'cut';
          }
        },
        // A secret written, rewritten or deleted: one write at a time on a path, or the
        // order of two acknowledgements would not be the order of their commits.
        async () => {
          const free = [0, 1, 2, 3, 4, 5, 6]
            .map((i) => `acme/secrets/s${(serial + i) % 7}`)
            .find((candidate) => !writingSecrets.has(candidate));
          if (free === undefined) return mint(`m${++serial}`, ['acme']);
          const path = free;
          writingSecrets.add(path);
          const known = model.secrets.get(path) ?? [null];
          const remove = Math.random() < 0.25;
          const value = remove ? null : `value-${++serial}-${'x'.repeat(serial % 50)}`;
          try {
            const reply =
              value === null
                ? await call('DELETE', `/api/vault/secrets/${path}`)
                : await call('PUT', `/api/vault/secrets/${path}`, { value });
            expect([200, 201, 204, 404]).toContain(reply.status);
            model.secrets.set(path, [value]);
            return 'acked';
          } catch (error) {
            if (!(error instanceof Cut)) throw error;
            model.secrets.set(path, [...known, value]);
            return 'cut';
          } finally {
            writingSecrets.delete(path);
          }
        },
        // An authorization, then (mostly) its consent and callback.
        async () => {
          const connection = `acme/users/u${++serial}/linear`;
          let url: string;
          try {
            const reply = await call('POST', '/api/oauth/authorize/linear', {
              connection_id: connection,
            });
            expect(reply.status, JSON.stringify(reply.body)).toBe(201);
            url = world.consent(reply.body.authorization_url);
          } catch (error) {
            if (!(error instanceof Cut)) throw error;
            return 'cut';
          }
          if (Math.random() < 0.3) {
            model.pendingCallbacks.push({ connection, url });
            return 'acked';
          }
          try {
            expect(await callback(url)).toBe(200);
            model.active.add(connection);
            model.touched.add(connection);
            model.usedCallbacks.push(url);
            return 'acked';
          } catch (error) {
            if (!(error instanceof Cut)) throw error;
            return 'cut';
          }
        },
        // A forced refresh of an active connection.
        async () => {
          const connections = [...model.active];
          const connection = connections[serial++ % Math.max(1, connections.length)];
          if (connection === undefined) return 'acked';
          try {
            const reply = await call(
              'GET',
              `/api/oauth/credentials/${connection}?force_refresh=true`,
            );
            expect(reply.status, JSON.stringify(reply.body)).toBe(200);
            return 'acked';
          } catch (error) {
            if (!(error instanceof Cut)) throw error;
            // The server may have rotated the refresh token before the kill, and the new one
            // never reached storage: the connection may need authorizing again.
            model.active.delete(connection);
            return 'cut';
          }
        },
        // A provider rewritten (its label), through discovery.
        async () => {
          try {
            const reply = await call('PUT', '/api/admin/providers/linear', {
              template: 'mcp',
              label: `Linear ${++serial}`,
              configuration: { resource_url: world.resourceUrl },
            });
            // Two workers writing it at once: one of them is told to retry.
            expect([200, 409]).toContain(reply.status);
            return 'acked';
          } catch (error) {
            if (!(error instanceof Cut)) throw error;
            return 'cut';
          }
        },
      ];

      /** Tree writes in flight: the killer aims at them (a random moment inside one). */
      let treeWrites = 0;
      async function treeWrite<T>(write: () => Promise<T>): Promise<T> {
        treeWrites++;
        try {
          return await write();
        } finally {
          treeWrites--;
        }
      }

      /**
       * Waits a random 150–750 ms, then, half of the time, on until a tree write is in flight
       * and a random 0–2 ms more: a kill inside a delete or narrowing of a whole tree.
       */
      async function killMoment() {
        await new Promise((resolve) => setTimeout(resolve, 150 + Math.random() * 600));
        if (Math.random() < 0.5) return;
        for (let spins = 0; treeWrites === 0 && spins < 20_000; spins++) {
          await new Promise((resolve) => setImmediate(resolve));
        }
        const until = performance.now() + Math.random() * 2;
        while (performance.now() < until) {}
      }

      /** Everything the model says, checked against the restarted broker. */
      /** Checks what changed since the last check; everything when `all`. */
      async function verify(all = false) {
        const touched = new Set(model.touched);
        model.touched.clear();
        const checked = (key: string) => all || touched.has(key);
        for (const [name, scopes] of model.tokens) {
          if (!checked(name)) continue;
          const reply = await call('GET', `/api/admin/tokens/${name}`);
          if (scopes === null) expect(reply.status, `${name} must be gone`).toBe(404);
          else {
            expect(reply.status, `${name} must be there`).toBe(200);
            expect(reply.body.scopes).toEqual(scopes);
          }
          figures.checks++;
        }
        // A cut tree write: all of it before, or all of it after; then it is known.
        for (const tree of model.cutTrees.splice(0)) {
          const seen: (string[] | null)[] = [];
          for (const name of tree.names) {
            const reply = await call('GET', `/api/admin/tokens/${name}`);
            seen.push(reply.status === 200 ? reply.body.scopes : null);
          }
          expect([tree.before, tree.after], `${tree.names[0]} half-applied`).toContainEqual(seen);
          tree.names.forEach((name, i) => {
            model.tokens.set(name, seen[i] ?? null);
          });
          figures.checks++;
        }
        for (const [path, allowed] of model.secrets) {
          const reply = await call('GET', `/api/vault/secrets/${path}`);
          const value = reply.status === 200 ? reply.body.value : null;
          expect(reply.status === 200 || reply.status === 404).toBe(true);
          expect(allowed, `secret ${path}`).toContain(value);
          model.secrets.set(path, [value]);
          figures.checks++;
        }
        for (const connection of model.active) {
          if (!checked(connection)) continue;
          const view = await call('GET', `/api/oauth/connections/${connection}`);
          expect(view.body.status, connection).toBe('active');
          const credentials = await call('GET', `/api/oauth/credentials/${connection}`);
          expect(credentials.status, JSON.stringify(credentials.body)).toBe(200);
          expect(world.isValidAccessToken(credentials.body.access_token)).toBe(true);
          expect(credentials.body.scopes).toEqual(view.body.scopes);
          figures.checks++;
        }
        // A used state stays used; a pending one works exactly once.
        for (const url of model.usedCallbacks.splice(0)) {
          expect(await callback(url)).toBe(400);
          figures.checks++;
        }
        for (const { connection, url } of model.pendingCallbacks.splice(0)) {
          expect(await callback(url), connection).toBe(200);
          expect(await callback(url)).toBe(400);
          model.active.add(connection);
          model.touched.add(connection);
          figures.checks++;
        }
      }

      try {
        broker = await startBrokerProcess(env);
        const provider = await call('PUT', '/api/admin/providers/linear', {
          template: 'mcp',
          configuration: { resource_url: world.resourceUrl },
        });
        expect(provider.status).toBe(201);
        for (let kill = 0; kill < KILLS; kill++) {
          let running = true;
          let roundAcked = 0;
          const failures: unknown[] = [];
          const workers = Array.from({ length: WORKERS }, async () => {
            while (running) {
              const operation = operations[Math.floor(Math.random() * operations.length)];
              try {
                const fate = await (operation as () => Promise<Fate>)();
                figures[fate]++;
                if (fate === 'acked') roundAcked++;
                if (fate === 'cut') return;
              } catch (error) {
                failures.push(error);
                return;
              }
            }
          });
          const workLimit = Date.now() + WORK_LIMIT_MS;
          while (roundAcked < ROUND_WRITES && failures.length === 0 && Date.now() < workLimit) {
            await new Promise((resolve) => setTimeout(resolve, 20));
          }
          expect(failures).toEqual([]);
          expect(roundAcked, `writes acknowledged before kill ${kill + 1}`).toBeGreaterThanOrEqual(
            ROUND_WRITES,
          );
          await killMoment();
          (broker as BrokerProcess).child.kill('SIGKILL');
          await once((broker as BrokerProcess).child, 'exit');
          running = false;
          await Promise.all(workers);
          expect(failures).toEqual([]);
          broker = await startBrokerProcess(env);
          await verify();
        }
        await verify(true);
        process.stdout.write(
          `crash (${engine}): ${KILLS} kills, ${figures.acked} writes acknowledged, ${figures.cut} cut, ${figures.checks} checks passed\n`,
        );
        expect(figures.acked).toBeGreaterThan(KILLS * 10);
      } finally {
        await broker?.stop();
        await served.close();
        await db.drop();
      }
    },
    60_000 + KILLS * (25_000 + WORK_LIMIT_MS),
  );
});
