import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleCliEntry } from '@keyway/test-support/processes';
import { afterAll, describe, expect, it } from 'vitest';
import { serveWorld } from './peers.js';

/*
 * Load that holds: `keyway serve` on SQLite under 200 concurrent keep-alive connections of
 * mixed traffic — 70% authenticated reads, 20% credentials (refreshed against a local
 * authorization server as they come due), 10% writes — until KEYWAY_SOAK_REQUESTS requests
 * were answered after warm-up (default 40,000; `pnpm soak`: 1,000,000) and every
 * connection was refreshed twice. The harness counts work, not time: a busy machine takes
 * longer, within a generous limit. Zero errors; every connection and token consistent
 * afterwards. Rates, latencies and the heap after a full GC are reported: the heap's growth
 * is a figure of the long form, which `pnpm soak` (scripts/reliability.mjs) holds to its
 * bound — a few MiB for caches settling and 64 bytes a request beyond — since the short form
 * cannot show the leaks that bound is for (a backlog that drains only while the load pauses
 * showed at 300,000 requests, not at 40,000: docs/reliability.md).
 */

const REQUESTS = Number(process.env.KEYWAY_SOAK_REQUESTS ?? 40_000);
/** Requests before the first memory sample: caches, prepared statements and JIT settled. */
const WARM_UP_REQUESTS = 10_000;
/** The server's heap is sampled every this many requests. */
const SAMPLE_REQUESTS = Math.max(10_000, Math.floor(REQUESTS / 10));
/** Generous: ten minutes, and 10 ms a request beyond (this machine does about 2,000 a second). */
const LIMIT_MS = 600_000 + REQUESTS * 10;
const CLIENTS = 200;
const CONNECTIONS = 10;
/** Every connection's token refreshed twice (due 5 s after each refresh). */
const MIN_REFRESHES = CONNECTIONS * 2;
const ROOT_KEY = 'soak-test-root-key-0123456789abcdefghijk';
const VAULT_KEY = 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8';
const dir = mkdtempSync(join(tmpdir(), 'keyway-soak-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Memory {
  rss: number;
  heapUsed: number;
}

/** One request on a keep-alive agent: status and parsed body. */
function send(
  agent: Agent,
  base: URL,
  method: string,
  path: string,
  token: string,
  body?: unknown,
): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = request(
      {
        agent,
        host: base.hostname,
        port: base.port,
        method,
        path,
        headers: {
          authorization: `Bearer ${token}`,
          ...(payload === undefined
            ? {}
            : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) }),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : null });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? 0;

describe('soak: keyway serve on SQLite under 200 connections of mixed traffic', () => {
  it(
    `answers ${REQUESTS} requests without error, and holds its heap`,
    async () => {
      // Access tokens of 65 s inside a 60 s margin: due 5 s after each refresh.
      const served = await serveWorld({ accessTokenLifetime: 65 });
      const { world } = served;
      const entry = await bundleCliEntry(
        fileURLToPath(new URL('./soak-server.ts', import.meta.url)),
        'soak-server',
      );
      const child: ChildProcess = fork(entry, [], {
        execArgv: ['--expose-gc'],
        env: {
          PATH: process.env.PATH ?? '',
          PORT: '0',
          HOST: '127.0.0.1',
          KEYWAY_ROOT_KEY: ROOT_KEY,
          KEYWAY_DATABASE: join(dir, 'soak.sqlite'),
          KEYWAY_VAULT_KEYS: VAULT_KEY,
          KEYWAY_ALLOWED_HOSTS: '127.0.0.1',
          KEYWAY_MAX_CONNECTIONS: '1000',
          // The mint limit of scoped callers (60 a minute) would refuse the load's writes.
          KEYWAY_RATE_LIMITS: 'mint=off',
        },
        // Its request log (a line per request) is written, and dropped here.
        stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      });
      const ask = async <T>(message: string): Promise<T> => {
        child.send(message);
        const [answer] = (await once(child, 'message')) as [T];
        return answer;
      };
      const [{ url }] = (await once(child, 'message')) as [{ url: string }];
      const base = new URL(url);
      const setupAgent = new Agent({ keepAlive: true, maxSockets: 4 });
      try {
        // The fixtures: a provider, active connections, secrets, a scoped token per reader.
        const root = (method: string, path: string, body?: unknown) =>
          send(setupAgent, base, method, path, ROOT_KEY, body);
        expect(
          (
            await root('PUT', '/api/admin/providers/linear', {
              template: 'mcp',
              configuration: { resource_url: world.resourceUrl },
            })
          ).status,
        ).toBe(201);
        const connections: string[] = [];
        for (let i = 0; i < CONNECTIONS; i++) {
          const id = `acme/users/u${i}/linear`;
          const started = await root('POST', '/api/oauth/authorize/linear', { connection_id: id });
          const back = new URL(world.consent(started.body.authorization_url));
          const done = await fetch(`${url}${back.pathname}${back.search}`);
          await done.text();
          expect(done.status).toBe(200);
          connections.push(id);
        }
        for (let i = 0; i < 20; i++) {
          await root('PUT', `/api/vault/secrets/acme/shared/s${i}`, { value: `value-${i}` });
        }
        const reader = await root('POST', '/api/admin/tokens', {
          name: 'reader',
          scopes: ['acme'],
          expires_in: 86_400,
        });
        const token = reader.body.access_token as string;

        // The load.
        const latencies: number[] = [];
        const errors: string[] = [];
        const minted = new Set<string>();
        const deleted = new Set<string>();
        let counter = 0;
        let answered = 0;
        let running = true;
        let measuring = false;
        /** While set, clients start no request: the heap is sampled with the load idle. */
        let paused = false;
        let inFlight = 0;
        const clients = Array.from({ length: CLIENTS }, async (_, client) => {
          const agent = new Agent({ keepAlive: true, maxSockets: 1 });
          const mine: string[] = [];
          const call = async (method: string, path: string, body?: unknown) => {
            inFlight++;
            try {
              return await send(agent, base, method, path, token, body);
            } finally {
              inFlight--;
              answered++;
            }
          };
          while (running) {
            while (paused && running) await new Promise((resolve) => setTimeout(resolve, 5));
            if (!running) break;
            const roll = Math.random();
            const n = counter++;
            const started = performance.now();
            let expected: number[];
            let reply: { status: number; body: any };
            try {
              if (roll < 0.7) {
                const read = n % 3;
                expected = [200];
                reply =
                  read === 0
                    ? await call('GET', `/api/vault/secrets/acme/shared/s${n % 20}`)
                    : read === 1
                      ? await call('GET', `/api/oauth/connections/${connections[n % CONNECTIONS]}`)
                      : await call('GET', '/api/admin/tokens?limit=10');
              } else if (roll < 0.9) {
                expected = [200];
                reply = await call('GET', `/api/oauth/credentials/${connections[n % CONNECTIONS]}`);
                if (reply.status === 200 && !world.isValidAccessToken(reply.body.access_token)) {
                  errors.push(`an invalid access token for ${connections[n % CONNECTIONS]}`);
                }
              } else {
                const write = n % 3;
                if (write === 0) {
                  expected = [200, 201];
                  reply = await call('PUT', `/api/vault/secrets/acme/c${client}`, {
                    value: `v${n}`,
                  });
                } else if (write === 1) {
                  const name = `reader.c${client}-${n}`;
                  expected = [201];
                  reply = await call('POST', '/api/admin/tokens', {
                    name,
                    scopes: ['acme/users'],
                    expires_in: 3600,
                  });
                  if (reply.status === 201) {
                    minted.add(name);
                    mine.push(name);
                  }
                } else {
                  const name = mine.pop();
                  if (name === undefined) continue;
                  minted.delete(name);
                  expected = [204];
                  reply = await call('DELETE', `/api/admin/tokens/${name}`);
                  if (reply.status === 204) deleted.add(name);
                }
              }
            } catch (error) {
              errors.push(`network: ${(error as Error).message}`);
              continue;
            }
            if (!expected.includes(reply.status)) {
              errors.push(`${reply.status} ${JSON.stringify(reply.body).slice(0, 200)}`);
            }
            if (measuring) latencies.push(performance.now() - started);
          }
          agent.destroy();
        });

        const startedAt = Date.now();
        /** Waits, checking every 50 ms, until `done` or the limit; answers whether done. */
        const until = async (done: () => boolean) => {
          while (!done() && errors.length === 0 && Date.now() - startedAt < LIMIT_MS) {
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
          return done();
        };
        /** The server's memory after a full GC, with no request in flight. */
        const idleMemory = async () => {
          paused = true;
          await until(() => inFlight === 0);
          const memory = await ask<Memory>('memory');
          paused = false;
          return memory;
        };

        expect(await until(() => answered >= WARM_UP_REQUESTS), 'warm-up requests').toBe(true);
        const warm = await idleMemory();
        const measuredFrom = Date.now();
        measuring = true;
        const samples: Memory[] = [warm];
        const enough = () => latencies.length >= REQUESTS && world.stats.refreshes >= MIN_REFRESHES;
        // Requests a second in each stretch between samples (the pauses left out): flat
        // from the first to the last, or something grows with the work done.
        const rates: number[] = [];
        while (!enough() && errors.length === 0 && Date.now() - startedAt < LIMIT_MS) {
          const [from, count] = [performance.now(), latencies.length];
          const next = count + SAMPLE_REQUESTS;
          await until(() => latencies.length >= next || enough());
          rates.push(((latencies.length - count) * 1000) / (performance.now() - from));
          if (!enough()) samples.push(await idleMemory());
        }
        measuring = false;
        running = false;
        await Promise.all(clients);
        // The heap that stays: the least of a few readings after full collections, a quarter
        // second apart. A transient (a buffer still draining, a timer's work on a busy
        // machine) lifts one reading, not all; a leak lifts every one.
        const readings: Memory[] = [];
        for (let i = 0; i < 3; i++) {
          if (i > 0) await new Promise((resolve) => setTimeout(resolve, 250));
          readings.push(await ask<Memory>('memory'));
        }
        const end = readings.reduce((least, reading) =>
          reading.heapUsed < least.heapUsed ? reading : least,
        );
        const seconds = (Date.now() - measuredFrom) / 1000;

        const sorted = latencies.sort((a, b) => a - b);
        const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);
        process.stdout.write(
          `soak: ${latencies.length} requests measured over ${CLIENTS} connections in ${seconds.toFixed(0)} s ` +
            `(${Math.round(latencies.length / seconds)}/s), ` +
            `p50 ${percentile(sorted, 50).toFixed(1)} ms, p99 ${percentile(sorted, 99).toFixed(1)} ms, ` +
            `${world.stats.refreshes} refreshes, errors ${errors.length}; ` +
            `heap after GC ${mib(warm.heapUsed)} → ${mib(end.heapUsed)} MiB, RSS ${mib(warm.rss)} → ${mib(end.rss)} MiB ` +
            `(heap every ${SAMPLE_REQUESTS} requests: ${[...samples, end].map((m) => mib(m.heapUsed)).join(', ')}); ` +
            `requests/s in each stretch: ${rates.map((rate) => Math.round(rate)).join(', ')}\n`,
        );
        expect(errors.slice(0, 5)).toEqual([]);
        // The work was done (not a rate: the harness waited for it).
        expect(latencies.length).toBeGreaterThanOrEqual(REQUESTS);
        expect(world.stats.refreshes).toBeGreaterThan(CONNECTIONS);
        expect(world.stats.refreshes).toBeGreaterThanOrEqual(MIN_REFRESHES);

        // Consistent afterwards: every connection active with a valid token, every token as
        // the load left it.
        for (const id of connections) {
          const view = await root('GET', `/api/oauth/connections/${id}`);
          expect(view.body.status).toBe('active');
          const credentials = await root('GET', `/api/oauth/credentials/${id}`);
          expect(world.isValidAccessToken(credentials.body.access_token)).toBe(true);
        }
        for (const name of minted)
          expect((await root('GET', `/api/admin/tokens/${name}`)).status).toBe(200);
        for (const name of deleted)
          expect((await root('GET', `/api/admin/tokens/${name}`)).status).toBe(404);
      } finally {
        setupAgent.destroy();
        child.send('stop');
        await once(child, 'exit');
        await served.close();
      }
    },
    LIMIT_MS + 120_000,
  );
});
