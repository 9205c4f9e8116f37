import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';

export const benchDir = join(dirname(fileURLToPath(import.meta.url)), '..');

/** A server process of the benchmark. */
export interface ServerProcess {
  readonly url: string;
  readonly child: ChildProcess;
  stop(): Promise<void>;
}

/** Stops a child process and waits for its exit. */
export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

/** Starts a reference server (`bare` or `hono`) answering the given canned responses. */
export async function startReferenceServer(
  kind: 'bare' | 'hono',
  routes: Record<string, { status: number; headers: Record<string, string>; body: string }>,
): Promise<ServerProcess> {
  const child = spawn(process.execPath, ['.build/reference-server.js', kind], {
    cwd: benchDir,
    env: { PATH: process.env.PATH ?? '', BENCH_ROUTES: JSON.stringify(routes) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<string>((resolve, reject) => {
    let text = '';
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      text += chunk;
      const found = text.match(/port (\d+)/)?.[1];
      if (found !== undefined) resolve(found);
    });
    child.once('exit', (code) => reject(new Error(`${kind} server exited with ${code}`)));
  });
  return { url: `http://127.0.0.1:${port}`, child, stop: () => stopChild(child) };
}

/** What a load run measured. */
export interface Load {
  requestsPerSecond: number;
  /** Latency percentiles, milliseconds. */
  p50: number;
  p99: number;
  /** Answers that were not 2xx, and socket errors and timeouts. */
  failures: number;
}

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
  return {
    requestsPerSecond: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    failures: result.non2xx + result.errors + result.timeouts,
  };
}

/** Resident set size now and at its peak, bytes, of a process (Linux `/proc`). */
export function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) =>
    Number(status.match(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm'))?.[1]) * 1024;
  return { rss: field('VmRSS'), peak: field('VmHWM') };
}
