import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServerProcess } from '@keyway/test-support/examples';
import { startBrokerProcess } from '@keyway/test-support/processes';
import { ROOT_KEY } from './fixtures.js';
import {
  CONNECTION,
  mintAgentToken,
  roundTrip,
  seedGatewayFile,
  startSameWorkHop,
} from './gateway.js';
import { median } from './measure.js';
import { benchDir, startMcpUpstream } from './processes.js';

/*
 * `pnpm bench --gateway-shares`: where the time of one `tools/call` goes, made one at a time
 * directly, through the bare hop, through the same-work hop and through the gateway (the
 * setup of gateway.ts). Around each round it reads the scheduler's account of each process
 * (Linux `/proc/<pid>/task/<tid>/schedstat`: time on a core, time waiting for one, times
 * woken), so that the round trip is set beside what each process spent on it. Prints a
 * table; writes no report.
 */

/** One path's medians per call over the rounds. */
export interface Share {
  path: 'direct' | 'bare hop' | 'same-work hop' | 'gateway';
  /** Median round trip, µs. */
  roundTrip: number;
  /** The middle process's main thread (none direct): CPU, wait for a core, wake-ups. */
  middle: { cpu: number; wait: number; wakeUps: number } | null;
  /** CPU of the client (this process) and of the MCP server, all their threads, µs. */
  client: number;
  server: number;
}

/** A thread's (or, summed, a process's) account: ns on a core, ns waiting, wake-ups. */
type Account = [number, number, number];

/** The account of `thread` of process `pid`, or of all its threads summed. */
function accountOf(pid: number, thread?: number): Account {
  const tids = thread === undefined ? readdirSync(`/proc/${pid}/task`) : [String(thread)];
  const sum: Account = [0, 0, 0];
  for (const tid of tids) {
    try {
      const fields = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ');
      for (let i = 0; i < 3; i++) sum[i] = (sum[i] as number) + Number(fields[i]);
    } catch {
      // A thread that ended between the listing and the read.
    }
  }
  return sum;
}

/** Each path's share of a call, `calls` one at a time per round, the paths interleaved. */
export async function benchGatewayShares(options: {
  calls: number;
  rounds: number;
}): Promise<Share[]> {
  if (process.platform !== 'linux') throw new Error('--gateway-shares reads /proc (Linux)');
  const dir = mkdtempSync(join(tmpdir(), 'keyway-bench-shares-'));
  const stops: (() => Promise<void>)[] = [];
  try {
    const upstream = await startMcpUpstream();
    stops.push(() => upstream.stop());
    const port = new URL(upstream.base).port;
    const hop = await startServerProcess(process.execPath, ['.build/proxy-hop.js', port], {
      cwd: benchDir,
      env: {},
      listening: /hop listening on (http:\/\/127\.0\.0\.1:\d+)/,
    });
    stops.push(() => hop.stop());
    const { file, vaultKey, upstreamToken } = await seedGatewayFile(dir, upstream.base);
    const keyway = await startBrokerProcess({
      KEYWAY_ROOT_KEY: ROOT_KEY,
      KEYWAY_DATABASE: file,
      KEYWAY_LOG_LEVEL: 'silent',
      KEYWAY_ALLOWED_HOSTS: '127.0.0.1',
    });
    stops.push(() => keyway.stop());
    const sameWork = await startSameWorkHop(port, file, vaultKey);
    stops.push(() => sameWork.stop());
    const brokerToken = await mintAgentToken(keyway.url);
    const paths = [
      {
        path: 'direct',
        url: `${upstream.base}/mcp`,
        authorization: `Bearer ${upstreamToken}`,
        pid: null,
      },
      { path: 'bare hop', url: `${hop.base}/mcp`, authorization: 'Bearer caller', pid: hop.pid },
      {
        path: 'same-work hop',
        url: `${sameWork.base}/mcp/${CONNECTION}`,
        authorization: `Bearer ${brokerToken}`,
        pid: sameWork.pid,
      },
      {
        path: 'gateway',
        url: `${keyway.url}/mcp/${CONNECTION}`,
        authorization: `Bearer ${brokerToken}`,
        pid: keyway.child.pid as number,
      },
    ] as const;
    for (const side of paths) await roundTrip(side.url, side.authorization, 500);
    const samples = paths.map(() => ({
      trips: [] as number[],
      cpu: [] as number[],
      wait: [] as number[],
      wakeUps: [] as number[],
      client: [] as number[],
      server: [] as number[],
    }));
    for (let round = 0; round < options.rounds; round++) {
      // Interleaved, and in the other order every second round: drift hits every path.
      const order = paths.map((_, index) => index);
      if (round % 2 === 1) order.reverse();
      for (const index of order) {
        const side = paths[index] as (typeof paths)[number];
        const sample = samples[index] as (typeof samples)[number];
        const middle = side.pid === null ? null : accountOf(side.pid, side.pid);
        const server = accountOf(upstream.pid);
        const client = process.cpuUsage();
        const trip = await roundTrip(side.url, side.authorization, options.calls);
        const clientUsed = process.cpuUsage(client);
        const serverAfter = accountOf(upstream.pid);
        sample.trips.push(trip);
        sample.client.push((clientUsed.user + clientUsed.system) / options.calls);
        sample.server.push((serverAfter[0] - server[0]) / 1000 / options.calls);
        if (middle !== null && side.pid !== null) {
          const after = accountOf(side.pid, side.pid);
          sample.cpu.push((after[0] - middle[0]) / 1000 / options.calls);
          sample.wait.push((after[1] - middle[1]) / 1000 / options.calls);
          sample.wakeUps.push((after[2] - middle[2]) / options.calls);
        }
      }
    }
    return paths.map((side, index) => {
      const sample = samples[index] as (typeof samples)[number];
      return {
        path: side.path,
        roundTrip: median(sample.trips),
        middle:
          side.pid === null
            ? null
            : {
                cpu: median(sample.cpu),
                wait: median(sample.wait),
                wakeUps: median(sample.wakeUps),
              },
        client: median(sample.client),
        server: median(sample.server),
      };
    });
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The shares as a Markdown table, with what each hop added and the ratios of goal 3. */
export function sharesTable(shares: Share[], rounds: number, calls: number): string {
  const us = (value: number) => `${value.toFixed(0)} µs`;
  const direct = shares[0]?.roundTrip ?? 0;
  const added = (path: Share['path']) =>
    (shares.find((share) => share.path === path)?.roundTrip ?? 0) - direct;
  const lines = [
    `One \`tools/call\` at a time, medians of ${rounds} interleaved rounds of ${calls} calls:`,
    '',
    '| Path | Round trip | Added | Middle process: main thread’s CPU a call | Its wait for a core | Its wake-ups | The client’s CPU | The server’s CPU |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...shares.map(({ path, roundTrip, middle, client, server }) => {
      const hop =
        middle === null
          ? '— | — | — | —'
          : `${us(roundTrip - direct)} | ${us(middle.cpu)} | ${us(middle.wait)} | ${middle.wakeUps.toFixed(2)}`;
      return `| ${path} | ${us(roundTrip)} | ${hop} | ${us(client)} | ${us(server)} |`;
    }),
    '',
    `The gateway added ${(added('gateway') / added('bare hop')).toFixed(2)}× what the bare hop added, ` +
      `${(added('gateway') / added('same-work hop')).toFixed(2)}× what the same-work hop added; ` +
      `the same work alone ${(added('same-work hop') / added('bare hop')).toFixed(2)}× the bare hop.`,
  ];
  return lines.join('\n');
}
