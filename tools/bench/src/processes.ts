import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServerProcess } from '@keyway/test-support/examples';
import autocannon from 'autocannon';
import { median } from './measure.js';

export const benchDir = join(dirname(fileURLToPath(import.meta.url)), '..');

/**
 * Starts a reference server (`bare`, `hono`, or `floor` with `env` naming its SQLite file and
 * root key) answering the given canned responses.
 */
export function startReferenceServer(
  kind: 'bare' | 'hono' | 'floor',
  routes: Record<string, { status: number; headers: Record<string, string>; body: string }>,
  env: Record<string, string> = {},
): Promise<{ base: string; stop: () => Promise<void> }> {
  return startServerProcess(process.execPath, ['.build/reference-server.js', kind], {
    cwd: benchDir,
    env: { ...env, BENCH_ROUTES: JSON.stringify(routes) },
    listening: /listening on (http:\/\/127\.0\.0\.1:\d+)/,
  });
}

/** The MCP server of the gateway's benchmarks (mcp-upstream.ts) in its own process: its base URL. */
export function startMcpUpstream(): Promise<{
  base: string;
  pid: number;
  stop: () => Promise<void>;
}> {
  return startServerProcess(process.execPath, ['.build/mcp-upstream.js'], {
    cwd: benchDir,
    env: {},
    listening: /listening on (http:\/\/127\.0\.0\.1:\d+) proxy/,
  });
}

/** What a load run measured. */
export interface Load {
  requestsPerSecond: number;
  /** Latency percentiles, milliseconds. */
  p50: number;
  p99: number;
  /**
   * Answers that were not 2xx, and socket errors and timeouts, by kind: each status that was
   * not 2xx, `errors`, `timeouts` (absent: none). {@link countFailed} counts them.
   */
  failed: Record<string, number>;
}

/** How many requests failed, of every kind ({@link Load.failed}). */
export const countFailed = (failed: Record<string, number>): number =>
  Object.values(failed).reduce((sum, count) => sum + count, 0);

/** Failures by kind ({@link Load.failed}), summed. */
export function failedOf(counts: Record<string, number>[]): Record<string, number> {
  const all: Record<string, number> = {};
  for (const one of counts) {
    for (const [kind, count] of Object.entries(one)) all[kind] = (all[kind] ?? 0) + count;
  }
  return all;
}

/** `502: 3, timeouts: 1`, or `none`. */
export const describeFailed = (failed: Record<string, number>): string =>
  Object.entries(failed)
    .map(([kind, count]) => `${kind}: ${count}`)
    .join(', ') || 'none';

/** The median of several load runs (failures summed by kind). */
export const pickLoad = (all: Load[]): Load => ({
  requestsPerSecond: median(all.map((l) => l.requestsPerSecond)),
  p50: median(all.map((l) => l.p50)),
  p99: median(all.map((l) => l.p99)),
  failed: failedOf(all.map((l) => l.failed)),
});

/** Runs autocannon against one URL. */
export async function load(options: {
  url: string;
  connections: number;
  seconds: number;
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  /** A fresh body per request (POST). */
  body?: () => string;
}): Promise<Load> {
  const result = await autocannon({
    url: options.url,
    connections: options.connections,
    duration: options.seconds,
    method: options.method ?? 'GET',
    headers: options.headers ?? {},
    ...(options.body === undefined
      ? {}
      : {
          requests: [
            {
              setupRequest: (request) => ({ ...request, body: (options.body as () => string)() }),
            },
          ],
        }),
  });
  const failed: Record<string, number> = {};
  for (const [status, stats] of Object.entries(result.statusCodeStats ?? {})) {
    const count = stats?.count ?? 0;
    if (!status.startsWith('2') && count > 0) failed[status] = count;
  }
  if (result.errors > 0) failed.errors = result.errors;
  if (result.timeouts > 0) failed.timeouts = result.timeouts;
  return {
    requestsPerSecond: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    failed,
  };
}

/** Resident set size now and at its peak, bytes, of a process (Linux `/proc`). */
export function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) =>
    Number(status.match(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm'))?.[1]) * 1024;
  return { rss: field('VmRSS'), peak: field('VmHWM') };
}

/**
 * What a process holds once idle, bytes: V8 collects an idle process's garbage within
 * seconds (its memory reducer), so the least of ten samples a second apart is taken, not
 * what the work before left to collect.
 */
export async function settledRss(pid: number): Promise<number> {
  let least = Number.POSITIVE_INFINITY;
  for (let sample = 0; sample < 10; sample++) {
    await sleep(1000);
    least = Math.min(least, memoryOf(pid).rss);
  }
  return least;
}

/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
