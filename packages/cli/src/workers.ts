import cluster, { type Worker } from 'node:cluster';
import { availableParallelism } from 'node:os';
import { clusterMetrics, shareWithPrimary } from '@keyway/http/metrics';
import { type MetricsServer, serveMetrics } from './observability.js';
import {
  checkServeOptions,
  DEFAULT_DATABASE,
  DEFAULT_HOST,
  defaultVaultKeys,
  generatedRootKeyLines,
  generateRootKey,
  openStorage,
  type RunningServer,
  type ServeOptions,
  serve,
} from './serve.js';

/*
 * `keyway serve` on every core (`KEYWAY_WORKERS`): a primary process that checks the
 * configuration, prepares the database once and forks N workers with `node:cluster`; the
 * workers share the listening port (the primary hands out connections in turn), the storage
 * (a SQLite file in WAL mode, or PostgreSQL) and the rate-limit counters (kept in it).
 */

/** Most workers `KEYWAY_WORKERS` may name. */
export const MAX_WORKERS = 256;

/** How many times in a minute the primary replaces workers that died before it gives up. */
const RESTARTS_PER_MINUTE = 5;

/**
 * Reads `KEYWAY_WORKERS`: a whole number from 1 to {@link MAX_WORKERS}, or `auto` for the
 * number of CPUs this process may use. Unset or empty: 1 (one process, no primary).
 *
 * @throws {TypeError} naming the variable and what it holds.
 */
export function workersFromEnv(
  env: Record<string, string | undefined>,
  cpus: () => number = availableParallelism,
): number {
  const text = env.KEYWAY_WORKERS?.trim();
  if (text === undefined || text === '') return 1;
  if (text.toLowerCase() === 'auto') return Math.min(MAX_WORKERS, Math.max(1, cpus()));
  const count = Number(text);
  if (!/^[0-9]+$/.test(text) || count < 1 || count > MAX_WORKERS) {
    throw new TypeError(
      `KEYWAY_WORKERS must be "auto" or a whole number from 1 to ${MAX_WORKERS}, not ` +
        `${JSON.stringify(env.KEYWAY_WORKERS)}`,
    );
  }
  return count;
}

/** What a worker tells its primary. */
type WorkerMessage = { keyway: 'log'; line: string } | { keyway: 'ready' };
/** What a primary tells its workers. */
type PrimaryMessage = { keyway: 'stop' };

const isWorkerMessage = (message: unknown): message is WorkerMessage =>
  typeof message === 'object' &&
  message !== null &&
  ((message as { keyway?: unknown }).keyway === 'log' ||
    (message as { keyway?: unknown }).keyway === 'ready');

/** Whether this process is a worker forked by a {@link startPrimary}. */
export const isWorkerProcess = (): boolean => cluster.isWorker;

/**
 * Runs the broker in a worker: `serve` with its lines sent to the primary (which prints one
 * worker's), the rate-limit counters in the storage every worker shares, and the metrics
 * collected for the primary to serve. `stop` is called once when the primary asks, or is
 * gone.
 */
export async function startWorker(options: ServeOptions, stop: () => void): Promise<RunningServer> {
  const send = (message: WorkerMessage) => process.send?.(message);
  const { metricsPort, ...rest } = options;
  const running = await serve({
    ...rest,
    log: (line) => send({ keyway: 'log', line }),
    // Which worker answered, in each request log line.
    logFields: { pid: process.pid },
    collectMetrics: metricsPort !== undefined,
    // One worker's counters alone would let an address fail N times the limit.
    rateLimits: options.rateLimits === false ? false : { ...options.rateLimits, shared: true },
  });
  if (running.metrics !== null) shareWithPrimary(running.metrics);
  process.on('message', (message: PrimaryMessage) => {
    if (message?.keyway === 'stop') stop();
  });
  process.once('disconnect', stop);
  send({ keyway: 'ready' });
  return running;
}

/** A running primary: `stop()` asks every worker to finish; `exited` gives the exit code. */
export interface Primary {
  stop(): void;
  readonly exited: Promise<number>;
}

/**
 * Starts the primary of `count` workers: checks `options` in full, creates the vault keys
 * file and applies migrations once, serves the workers' metrics when `metricsPort` is set,
 * forks the workers and resolves once every one listens (printing one worker's start lines
 * and then how many share the port). A worker that dies later is replaced (at most
 * {@link RESTARTS_PER_MINUTE} a minute); one that dies before all are listening stops the
 * rest.
 *
 * @throws {TypeError} for a configuration no worker could run (`:memory:` is not shared).
 */
export async function startPrimary(
  options: ServeOptions,
  count: number,
  io: { out: (line: string) => void; err: (line: string) => void },
): Promise<Primary> {
  if (process.versions.bun !== undefined || 'Deno' in globalThis) {
    throw new TypeError('KEYWAY_WORKERS above 1 needs Node (node:cluster); set KEYWAY_WORKERS=1');
  }
  const database = options.database ?? DEFAULT_DATABASE;
  if (database === ':memory:') {
    throw new TypeError(
      `KEYWAY_WORKERS=${count} needs a database every worker shares: a SQLite file or a postgres:// URL in ` +
        `KEYWAY_DATABASE, not :memory:`,
    );
  }
  const generated = options.rootKey === undefined;
  const rootKey = options.rootKey ?? generateRootKey();
  await checkServeOptions(options, rootKey);
  if (options.vaultKeys === undefined) defaultVaultKeys(database, io.out);
  // Migrations once, here, rather than N workers racing for the same lock.
  await (await openStorage(database)).close();
  let metricsServer: MetricsServer | null = null;
  if (options.metricsPort !== undefined) {
    metricsServer = await serveMetrics(
      clusterMetrics(),
      options.metricsHost ?? DEFAULT_HOST,
      options.metricsPort,
    );
  }

  // The workers run this same program; the root key (given or generated) reaches them here.
  const env = { KEYWAY_ROOT_KEY: rootKey };
  const workers = new Set<Worker>();
  let stopping = false;
  let exitCode = 0;
  let ready = 0;
  const lines: string[] = [];
  /** The first-generation worker whose start lines are printed. */
  let speaker: Worker | null = null;
  const restarts: number[] = [];
  let started!: () => void;
  let failedToStart!: (error: Error) => void;
  const allReady = new Promise<void>((resolve, reject) => {
    started = resolve;
    failedToStart = reject;
  });
  let exited!: (code: number) => void;
  const done = new Promise<number>((resolve) => {
    exited = resolve;
  });

  /** Once the last worker is gone: the metrics listener closes, then the exit code. */
  const finish = () => {
    if (metricsServer === null) exited(exitCode);
    else void metricsServer.close().finally(() => exited(exitCode));
  };
  const stop = () => {
    if (stopping) return;
    stopping = true;
    for (const worker of workers) {
      if (worker.isConnected()) worker.send({ keyway: 'stop' } satisfies PrimaryMessage);
    }
    if (workers.size === 0) finish();
  };

  const fork = (first: boolean) => {
    const worker = cluster.fork(env);
    workers.add(worker);
    worker.on('message', (message: unknown) => {
      if (!isWorkerMessage(message)) return;
      if (message.keyway === 'log') {
        // One worker's start lines are printed (the others say the same); later, every line.
        if (ready >= count) io.out(message.line);
        else if (first && (speaker ?? worker) === worker) {
          speaker = worker;
          lines.push(message.line);
        }
        return;
      }
      if (first) ready += 1;
      if (first && ready === count) {
        for (const line of lines) io.out(line);
        const pids = [...workers].map((w) => w.process.pid).join(', ');
        io.out(`${count} workers share the port (process ids ${pids})`);
        if (metricsServer !== null) io.out(`Metrics at ${metricsServer.url} (every worker's)`);
        if (generated) for (const line of generatedRootKeyLines(rootKey)) io.out(line);
        started();
      }
    });
    worker.on('exit', (code, signal) => {
      workers.delete(worker);
      if (stopping) {
        if (code !== 0) exitCode = 1;
        if (workers.size === 0) finish();
        return;
      }
      const how = signal === null ? `with code ${code}` : `on ${signal}`;
      if (ready < count) {
        exitCode = 1;
        failedToStart(new Error(`a worker exited ${how} before every worker was listening`));
        stop();
        return;
      }
      const now = Date.now();
      while (restarts.length > 0 && (restarts[0] as number) < now - 60_000) restarts.shift();
      if (restarts.length >= RESTARTS_PER_MINUTE) {
        io.err(
          `keyway: worker ${worker.process.pid} exited ${how}, the ${RESTARTS_PER_MINUTE + 1}th in a minute: stopping`,
        );
        exitCode = 1;
        stop();
        return;
      }
      restarts.push(now);
      io.err(`keyway: worker ${worker.process.pid} exited ${how}; starting another`);
      fork(false);
    });
  };
  for (let i = 0; i < count; i++) fork(true);
  try {
    await allReady;
  } catch (error) {
    await done;
    throw error;
  }
  return { stop, exited: done };
}
