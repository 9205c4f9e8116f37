// `pnpm bench`: every benchmark of docs/benchmarks.md, each figure a ratio against a floor
// measured in the same run. `--smoke` runs tiny sizes in seconds (CI proves the benchmarks
// still run); `--out <file>` writes the report elsewhere; `--token-check` runs the token
// check alone and writes no report (its rows, run after run: how they vary);
// `--gateway-shares` each process's share of a gateway call made one at a time, and what each
// part of its work costs (no report).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startPostgres, startTestPostgres } from '@keyway/test-support/postgres';
import { benchGateway } from './gateway.js';
import { benchGatewayShares, sharesTable } from './gateway-shares.js';
import { benchHandOuts } from './hand-outs.js';
import { benchHandler } from './handler.js';
import { benchPortal } from './portal.js';
import { benchPrefixList } from './prefix-list.js';
import { benchRefreshStorm } from './refresh-storm.js';
import { type Report, writeReport } from './report.js';
import { benchScaleOut } from './scale-out.js';
import { benchServe } from './serve.js';
import { benchSince, HAND_OUT_GOAL_COMMIT } from './since.js';
import { benchTokenCheck } from './token-check.js';
import { benchWorstBodies } from './worst-bodies.js';

const args = process.argv.slice(2);
const smoke = args.includes('--smoke');
const outAt = args.indexOf('--out');
const repo = join(import.meta.dirname ?? '.', '..', '..', '..');
const out =
  outAt === -1 ? (smoke ? null : join(repo, 'docs', 'benchmarks.md')) : (args[outAt + 1] ?? null);

const SIZES = smoke
  ? { tokens: [200, 2_000], connections: 3_000, handler: 2_000 }
  : { tokens: [10_000, 1_000_000], connections: 1_000_000, handler: 10_000 };
const BUDGET = smoke ? { timeMs: 50, rounds: 1 } : { timeMs: 500, rounds: 9 };
const LOOPBACK = smoke
  ? { connections: 32, seconds: 1, rounds: 1 }
  : { connections: 32, seconds: 5, rounds: 3 };
const STORM = smoke ? { callers: 10, storms: 1 } : { callers: 50, storms: 3 };
const HAND_OUTS = smoke
  ? { callers: 32, perCaller: 5, rounds: 1 }
  : { callers: 32, perCaller: 200, rounds: 5 };
const PORTAL = smoke
  ? { connections: 3, listDelayMs: 5, calls: 20, rounds: 1, sessions: 20, sessionConnections: 2 }
  : {
      connections: 10,
      listDelayMs: 20,
      calls: 200,
      rounds: 3,
      sessions: 1_000,
      sessionConnections: 5,
    };
const GATEWAY = smoke
  ? { calls: 50, rounds: 1, connections: 8, seconds: 1, streams: 50, slowSeconds: 1 }
  : { calls: 2_000, rounds: 3, connections: 32, seconds: 5, streams: 1_000, slowSeconds: 5 };

const SCALE_OUT = smoke
  ? { connections: 6, seconds: 1, rounds: 1 }
  : { connections: 48, seconds: 5, rounds: 3 };

if (args.includes('--gateway-shares')) {
  const sizes = smoke ? { calls: 50, rounds: 2 } : { calls: 3_000, rounds: 10 };
  console.log(sharesTable(await benchGatewayShares(sizes), sizes.rounds, sizes.calls));
  process.exit(0);
}

// The large tables are built once and kept outside the repository; a smoke run keeps nothing.
const cacheDir = smoke
  ? mkdtempSync(join(tmpdir(), 'keyway-bench-'))
  : (process.env.KEYWAY_BENCH_CACHE ?? join(tmpdir(), 'keyway-bench-cache'));
const log = (line: string) => console.log(line);
log(`keyway bench${smoke ? ' (smoke)' : ''}: tables cached in ${cacheDir}`);

const postgres = smoke
  ? await startTestPostgres()
  : await startPostgres({ dataDir: join(cacheDir, 'pg') });
try {
  const started = Date.now();
  const tokenCheck = await benchTokenCheck({
    sizes: SIZES.tokens,
    cacheDir,
    postgresUrl: postgres.url,
    budget: BUDGET,
    log,
  });
  if (args.includes('--token-check')) {
    log(`token check alone: ${((Date.now() - started) / 1000).toFixed(0)} s, no report written`);
  } else {
    const handler = await benchHandler({ cacheDir, size: SIZES.handler, budget: BUDGET });
    log(
      `handler in process: ${(handler.ratio * 100).toFixed(0)}% of a bare function (the same work bare: ${(handler.sameWork.ratio * 100).toFixed(0)}%)`,
    );
    const serve = await benchServe(LOOPBACK);
    for (const row of serve.reads) {
      log(
        `${row.route}: ${Math.round(row.keyway.requestsPerSecond)} req/s, bare ${Math.round(row.bare.requestsPerSecond)}, Hono ${Math.round(row.hono.requestsPerSecond)}`,
      );
    }
    log(
      `request log and metrics: ${Math.round(serve.observed.quiet.requestsPerSecond)} req/s quiet, ${Math.round(serve.observed.logged.requestsPerSecond)} logged, ${Math.round(serve.observed.metered.requestsPerSecond)} logged and metered`,
    );
    log(
      `workers: ${Math.round(serve.workers.one.requestsPerSecond)} req/s with 1 process, ${Math.round(serve.workers.many.requestsPerSecond)} with ${serve.workers.count} workers`,
    );
    log(`minting: ${Math.round(serve.mint.requestsPerSecond)} tokens/s`);
    const prefixList = await benchPrefixList({
      cacheDir,
      postgresUrl: postgres.url,
      size: SIZES.connections,
      budget: BUDGET,
      log,
    });
    const storm = await benchRefreshStorm({ postgresUrl: postgres.url, ...STORM });
    log(`refresh storm: ${storm.refreshes.join(', ')} upstream refresh(es) per storm`);
    const handOuts = await benchHandOuts(HAND_OUTS);
    log(
      `hand-outs: ${Math.round(handOuts.grouped)}/s grouped, ${Math.round(handOuts.perRow)}/s with one commit per row`,
    );
    const since = benchSince({
      repo,
      commit: process.env.KEYWAY_BENCH_SINCE ?? HAND_OUT_GOAL_COMMIT,
      rounds: 5,
      smoke,
    });
    log(
      'skipped' in since
        ? `hand-outs since ${since.commit}: ${since.skipped}`
        : `hand-outs since ${since.commit.slice(0, 12)}: ${Math.round(since.now.rate)}/s now, ${Math.round(since.then.rate)}/s then`,
    );
    const gateway = await benchGateway(GATEWAY);
    log(
      `gateway: tools/call ${gateway.roundTrip.gateway.toFixed(0)} µs through it, ${gateway.roundTrip.direct.toFixed(0)} µs direct; ${gateway.idle.streams} idle streams +${((gateway.idle.after - gateway.idle.before) / 1024 / 1024).toFixed(1)} MiB`,
    );
    const portal = await benchPortal(PORTAL);
    log(
      `portal: tools/list of ${portal.connections} ${portal.list.portal.toFixed(0)} µs against ${portal.list.direct.toFixed(0)} µs of one; tools/call ${portal.call.portal.toFixed(0)} µs against ${portal.call.gateway.toFixed(0)} µs through the gateway; ${portal.idle.sessions} idle sessions +${((portal.idle.after - portal.idle.before) / 1024 / 1024).toFixed(1)} MiB`,
    );
    const scaleOut = await benchScaleOut(postgres.url, SCALE_OUT);
    log(
      `scale-out on PostgreSQL: reads ${scaleOut.read.map(Math.round).join(' / ')} req/s, tools/call ${scaleOut.call.map(Math.round).join(' / ')} req/s with 1 / 2 / 3 processes`,
    );
    const worstBodies = await benchWorstBodies({ budget: BUDGET });
    const slowest = worstBodies.reduce((a, b) => (b.answerMs > a.answerMs ? b : a));
    log(
      `worst bodies: ${worstBodies.length}, slowest answer ${slowest.answerMs.toFixed(1)} ms (${slowest.name}), largest ${Math.max(...worstBodies.map((row) => row.answerBytes))} bytes`,
    );
    const report: Report = {
      smoke,
      date: new Date(),
      seconds: (Date.now() - started) / 1000,
      tokenCheck,
      handler,
      serve,
      prefixList,
      storm,
      handOuts,
      since,
      gateway,
      portal,
      scaleOut,
      worstBodies,
      loopback: LOOPBACK,
    };
    const text = writeReport(report, out);
    if (out === null) console.log(`\n${text}`);
    else log(`wrote ${out}`);
  }
} finally {
  await postgres.stop();
  if (smoke) rmSync(cacheDir, { recursive: true, force: true });
}
