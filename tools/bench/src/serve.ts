import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateVaultKey } from '@keyway/core';
import { sqliteStorage } from '@keyway/store-sqlite';
import { bundleCli, startBrokerProcess } from '@keyway/test-support/processes';
import { createTestBroker, createTestWorld } from '@keyway/testing';
import { activeConnection, ROOT_KEY } from './fixtures.js';
import { type Load, load, memoryOf, pickLoad, startReferenceServer } from './processes.js';

const CONNECTION = 'acme/alice/demo';

/** The sizes of a loopback run. */
export interface ServeOptions {
  connections: number;
  seconds: number;
  rounds: number;
}

/** One read route over loopback: Keyway against the two reference servers. */
export interface LoopbackRow {
  route: string;
  keyway: Load;
  bare: Load;
  hono: Load;
  /**
   * node:http doing the same work: the floor of a token check (HMAC, id hash, one point
   * read), then the route's own point read, its row's JSON decoded and the answer's written.
   */
  floor: Load;
}

export interface ServeResult {
  reads: LoopbackRow[];
  /**
   * The first read again, on `keyway serve` with the request log off (as above), on (a JSON
   * line per request to a pipe), and on with the metrics too: what watching it costs.
   */
  observed: { quiet: Load; logged: Load; metered: Load };
  mint: Load;
  /**
   * The first read on `keyway serve` with one process (as above) and with `KEYWAY_WORKERS`
   * set to the CPU count, on the same file, rounds interleaved.
   */
  workers: { count: number; one: Load; many: Load };
  /** `keyway serve`'s memory, bytes: idle after start, and at its peak after the load. */
  memory: { idleRss: number; peakRss: number; rssAfterLoad: number };
}

/** Headers the server writes itself; the reference servers write their own. */
const TRANSPORT_HEADERS = new Set(['date', 'connection', 'keep-alive', 'content-length']);

/**
 * `keyway serve` with its standard output in a file, as an operator would redirect it: the
 * request log then costs what it costs the broker, not the benchmark's own process (which
 * would otherwise read every line while it generates the load).
 */
async function startLoggingBroker(
  env: Record<string, string>,
  logFile: string,
): Promise<{ url: string; stop(): Promise<void> }> {
  const child = spawn(process.execPath, [await bundleCli(), 'serve'], {
    env: { PATH: process.env.PATH ?? '', PORT: '0', HOST: '127.0.0.1', ...env },
    stdio: ['ignore', openSync(logFile, 'w'), 'inherit'],
  });
  for (let attempt = 0; attempt < 600; attempt++) {
    const port = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(
      readFileSync(logFile, 'utf8'),
    )?.[1];
    if (port !== undefined) {
      return {
        url: `http://127.0.0.1:${port}`,
        async stop() {
          if (child.exitCode !== null) return;
          child.kill('SIGTERM');
          await once(child, 'exit');
        },
      };
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  child.kill('SIGKILL');
  throw new Error(`keyway serve did not start: ${readFileSync(logFile, 'utf8')}`);
}

/**
 * Builds a SQLite file with one active connection (authorized against the in-memory test
 * world, in this process), so `keyway serve` on it has something to read.
 */
async function seed(file: string, vaultKey: string): Promise<void> {
  const world = createTestWorld();
  const storage = sqliteStorage(file);
  const broker = createTestBroker(world, { rootKey: ROOT_KEY, storage, vaultKeys: [vaultKey] });
  await activeConnection(world, broker, CONNECTION);
  await broker.close();
}

/**
 * Loads each server in `bases` with the same GET of `path`, in alternating rounds, and keeps
 * the median round of each (so a drift of the machine falls on all of them alike).
 */
async function interleaved<K extends string>(
  options: ServeOptions,
  bases: Record<K, string>,
  path: string,
  headers: Record<string, string>,
): Promise<Record<K, Load>> {
  const names = Object.keys(bases) as K[];
  const runs = new Map<K, Load[]>(names.map((name) => [name, []]));
  for (let round = 0; round < options.rounds; round++) {
    for (const name of names) {
      runs.get(name)?.push(
        await load({
          url: bases[name] + path,
          connections: options.connections,
          seconds: options.seconds,
          headers,
        }),
      );
    }
  }
  return Object.fromEntries(names.map((name) => [name, pickLoad(runs.get(name) ?? [])])) as Record<
    K,
    Load
  >;
}

/**
 * `keyway serve` on SQLite over loopback HTTP: authenticated reads against a bare
 * node:http server and Hono on @hono/node-server answering the same bytes, minting
 * throughput, and the process's memory.
 */
export async function benchServe(options: ServeOptions): Promise<ServeResult> {
  const dir = mkdtempSync(join(tmpdir(), 'keyway-bench-serve-'));
  const stops: (() => Promise<void>)[] = [];
  try {
    const file = join(dir, 'keyway.sqlite');
    const vaultKey = generateVaultKey();
    writeFileSync(`${file}.vault-keys`, `${vaultKey}\n`, { mode: 0o600 });
    await seed(file, vaultKey);

    const keyway = await startBrokerProcess({
      KEYWAY_ROOT_KEY: ROOT_KEY,
      KEYWAY_DATABASE: file,
      // The reference servers log nothing; the request log's cost is its own row.
      KEYWAY_LOG_LEVEL: 'silent',
    });
    stops.push(() => keyway.stop());
    const pid = keyway.child.pid as number;
    await new Promise((resolve) => setTimeout(resolve, 500));
    const idleRss = memoryOf(pid).rss;

    const minted = await fetch(`${keyway.url}/api/admin/tokens`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ROOT_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'bench', scopes: ['acme'], expires_in: 86_400 }),
    });
    if (minted.status !== 201) throw new Error(`mint answered ${minted.status}`);
    const { access_token: token } = (await minted.json()) as { access_token: string };
    const authorization = { authorization: `Bearer ${token}` };

    const paths = ['/api/admin/tokens/bench', `/api/oauth/connections/${CONNECTION}`];
    const canned: Record<
      string,
      { status: number; headers: Record<string, string>; body: string }
    > = {};
    for (const path of paths) {
      const response = await fetch(keyway.url + path, { headers: authorization });
      if (response.status !== 200) throw new Error(`GET ${path} answered ${response.status}`);
      const headers: Record<string, string> = {};
      response.headers.forEach((value, key) => {
        if (!TRANSPORT_HEADERS.has(key)) headers[key] = value;
      });
      canned[path] = { status: response.status, headers, body: await response.text() };
    }
    const bare = await startReferenceServer('bare', canned);
    stops.push(() => bare.stop());
    const hono = await startReferenceServer('hono', canned);
    stops.push(() => hono.stop());
    const floor = await startReferenceServer('floor', canned, {
      BENCH_FLOOR_DB: file,
      BENCH_FLOOR_ROOT_KEY: ROOT_KEY,
    });
    stops.push(() => floor.stop());
    // The floor does the route's work: its answers are Keyway's, byte for byte.
    for (const path of paths) {
      const response = await fetch(floor.base + path, { headers: authorization });
      const text = await response.text();
      if (response.status !== 200 || text !== canned[path]?.body) {
        throw new Error(`the floor answered ${path} with ${response.status} ${text}`);
      }
    }

    const reads: LoopbackRow[] = [];
    for (const path of paths) {
      const bases = { bare: bare.base, hono: hono.base, floor: floor.base, keyway: keyway.url };
      reads.push({
        route: `GET ${path.replace(CONNECTION, '<path>').replace('/bench', '/<name>')}`,
        ...(await interleaved(options, bases, path, authorization)),
      });
    }

    // What the request log and the metrics cost: the same read, three ways, interleaved.
    const logged = await startLoggingBroker(
      { KEYWAY_ROOT_KEY: ROOT_KEY, KEYWAY_DATABASE: file, KEYWAY_LOG_LEVEL: 'info' },
      join(dir, 'logged.log'),
    );
    stops.push(() => logged.stop());
    const metered = await startLoggingBroker(
      {
        KEYWAY_ROOT_KEY: ROOT_KEY,
        KEYWAY_DATABASE: file,
        KEYWAY_LOG_LEVEL: 'info',
        KEYWAY_METRICS_PORT: '0',
      },
      join(dir, 'metered.log'),
    );
    stops.push(() => metered.stop());
    // The two new processes are warmed as the first was by the reads above.
    for (const base of [logged.url, metered.url]) {
      await load({
        url: base + paths[0],
        connections: options.connections,
        seconds: options.seconds * paths.length,
        headers: authorization,
      });
    }
    const observed = await interleaved(
      options,
      { quiet: keyway.url, logged: logged.url, metered: metered.url },
      paths[0] as string,
      authorization,
    );

    // Every core: the same read on N workers (rate-limit counters then in the database).
    const count = availableParallelism();
    const many = await startBrokerProcess({
      KEYWAY_ROOT_KEY: ROOT_KEY,
      KEYWAY_DATABASE: file,
      KEYWAY_LOG_LEVEL: 'silent',
      KEYWAY_WORKERS: String(count),
    });
    stops.push(() => many.stop());
    await load({
      url: many.url + paths[0],
      connections: options.connections,
      seconds: options.seconds * paths.length,
      headers: authorization,
    });
    const scaled = await interleaved(
      options,
      { one: keyway.url, many: many.url },
      paths[0] as string,
      authorization,
    );
    await many.stop();
    const workers = { count, ...scaled };

    let counter = 0;
    const mint = await load({
      url: `${keyway.url}/api/admin/tokens`,
      connections: options.connections,
      seconds: options.seconds,
      method: 'POST',
      headers: { authorization: `Bearer ${ROOT_KEY}`, 'content-type': 'application/json' },
      body: () =>
        JSON.stringify({ name: `load.${++counter}`, scopes: ['acme/load'], expires_in: 600 }),
    });
    const after = memoryOf(pid);
    return {
      reads,
      observed,
      workers,
      mint,
      memory: { idleRss, peakRss: after.peak, rssAfterLoad: after.rss },
    };
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
}
