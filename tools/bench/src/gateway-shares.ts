import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServerProcess } from '@keyway/test-support/examples';
import { startBrokerProcess } from '@keyway/test-support/processes';
import { bundleAblated, type GatewayPart } from './ablation.js';
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

/**
 * What a path leaves out of its work, to weigh that part: nothing for the paths compared.
 * `guards` (the same-work hop only): the limits and the address policy (hop.ts `HopGuards`).
 */
export type Skipped = readonly (GatewayPart | 'guards')[];

/** One path's medians per call over the rounds. */
export interface Share {
  path: 'direct' | 'bare hop' | 'same-work hop' | 'gateway';
  /** The parts of the work this path leaves out (the same-work hop) or answers from memory (the gateway). */
  skipped: Skipped;
  /** The gateway's own build again, in a process of its own: how far two processes differ. */
  again?: true;
  /** Median round trip, µs. */
  roundTrip: number;
  /**
   * The middle process (none direct): its main thread's CPU, wait for a core and wake-ups,
   * and the CPU of its other threads (V8's compiler and collector, libuv's pool).
   */
  middle: { cpu: number; wait: number; wakeUps: number; others: number } | null;
  /** CPU of the client (this process) and of the MCP server, all their threads, µs. */
  client: number;
  server: number;
}

/** What each path leaves out, in the order run: all of the work, then each part, then both. */
const PARTS: (readonly GatewayPart[])[] = [[], ['check'], ['read'], ['check', 'read']];

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
    const gatewayEnv = {
      KEYWAY_ROOT_KEY: ROOT_KEY,
      KEYWAY_DATABASE: file,
      KEYWAY_LOG_LEVEL: 'silent',
      KEYWAY_ALLOWED_HOSTS: '127.0.0.1',
    };
    const keyway = await startBrokerProcess(gatewayEnv);
    stops.push(() => keyway.stop());
    const brokerToken = await mintAgentToken(keyway.url);
    type Path = {
      path: Share['path'];
      skipped: Skipped;
      again?: true;
      url: string;
      authorization: string;
      pid: number | null;
    };
    const paths: Path[] = [
      {
        path: 'direct',
        skipped: [],
        url: `${upstream.base}/mcp`,
        authorization: `Bearer ${upstreamToken}`,
        pid: null,
      },
      {
        path: 'bare hop',
        skipped: [],
        url: `${hop.base}/mcp`,
        authorization: 'Bearer caller',
        pid: hop.pid,
      },
    ];
    // Each part of the work weighed on both sides: the same-work hop without it, the
    // gateway with it answered from memory (ablation.ts). The hop's guards on its side only.
    for (const skipped of [...PARTS, ['guards'] as const]) {
      const sameWork = await startSameWorkHop(port, file, vaultKey, [...skipped]);
      stops.push(() => sameWork.stop());
      paths.push({
        path: 'same-work hop',
        skipped,
        url: `${sameWork.base}/mcp/${CONNECTION}`,
        authorization: `Bearer ${brokerToken}`,
        pid: sameWork.pid,
      });
    }
    for (const skipped of PARTS) {
      const gateway =
        skipped.length === 0
          ? keyway
          : await startBrokerProcess(gatewayEnv, [], await bundleAblated(skipped));
      if (gateway !== keyway) stops.push(() => gateway.stop());
      paths.push({
        path: 'gateway',
        skipped,
        url: `${gateway.url}/mcp/${CONNECTION}`,
        authorization: `Bearer ${brokerToken}`,
        pid: gateway.child.pid as number,
      });
    }
    // The same build in a second process: the run's own measure of how far processes differ.
    const second = await startBrokerProcess(gatewayEnv);
    stops.push(() => second.stop());
    paths.push({
      path: 'gateway',
      skipped: [],
      again: true,
      url: `${second.url}/mcp/${CONNECTION}`,
      authorization: `Bearer ${brokerToken}`,
      pid: second.child.pid as number,
    });
    for (const side of paths) await roundTrip(side.url, side.authorization, 500);
    const samples = paths.map(() => ({
      trips: [] as number[],
      cpu: [] as number[],
      wait: [] as number[],
      wakeUps: [] as number[],
      others: [] as number[],
      client: [] as number[],
      server: [] as number[],
    }));
    for (let round = 0; round < options.rounds; round++) {
      // Interleaved, and in the other order every second round: drift hits every path.
      const order = paths.map((_, index) => index);
      if (round % 2 === 1) order.reverse();
      for (const index of order) {
        const side = paths[index] as Path;
        const sample = samples[index] as (typeof samples)[number];
        const middle = side.pid === null ? null : accountOf(side.pid, side.pid);
        const whole = side.pid === null ? null : accountOf(side.pid);
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
          const wholeAfter = accountOf(side.pid);
          const others = wholeAfter[0] - (whole as Account)[0] - (after[0] - middle[0]);
          sample.others.push(others / 1000 / options.calls);
        }
      }
    }
    return paths.map((side, index) => {
      const sample = samples[index] as (typeof samples)[number];
      return {
        path: side.path,
        skipped: side.skipped,
        ...(side.again === true ? { again: true as const } : {}),
        roundTrip: median(sample.trips),
        middle:
          side.pid === null
            ? null
            : {
                cpu: median(sample.cpu),
                wait: median(sample.wait),
                wakeUps: median(sample.wakeUps),
                others: median(sample.others),
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

/** A path's name in the tables: what it leaves out (the hop) or answers from memory (the gateway). */
function nameOf({ path, skipped, again }: Pick<Share, 'path' | 'skipped' | 'again'>): string {
  if (again === true) return `${path}, the same build in a second process`;
  if (skipped.length === 0) return path;
  const parts = skipped.map((part) =>
    part === 'check'
      ? 'the token check'
      : part === 'read'
        ? 'the connection read'
        : 'its limits and address policy',
  );
  const named = parts.join(' and ');
  return path === 'gateway' ? `gateway, ${named} from memory` : `same-work hop without ${named}`;
}

/**
 * The shares as Markdown: each path's table row; what each part of the work costs each side
 * (the round trip with it less the round trip without it; the rest over the bare hop); and
 * the ratios of goal 3.
 */
export function sharesTable(shares: Share[], rounds: number, calls: number): string {
  const us = (value: number) => `${value.toFixed(0)} µs`;
  const direct = shares[0]?.roundTrip ?? 0;
  const find = (path: Share['path'], skipped: Skipped = []) =>
    shares.find(
      (share) =>
        share.path === path &&
        share.again !== true &&
        share.skipped.length === skipped.length &&
        skipped.every((part) => share.skipped.includes(part)),
    );
  const added = (path: Share['path'], skipped: Skipped = []) =>
    (find(path, skipped)?.roundTrip ?? 0) - direct;
  const cpu = (path: Share['path'], skipped: Skipped = []) => find(path, skipped)?.middle?.cpu ?? 0;
  const both: Skipped = ['check', 'read'];
  const again = (shares.find((share) => share.again === true)?.roundTrip ?? 0) - direct;
  const part = (label: string, of: (path: Share['path']) => [number, number]) => {
    const [hopAdded, hopCpu] = of('same-work hop');
    const [gatewayAdded, gatewayCpu] = of('gateway');
    return `| ${label} | ${us(hopAdded)} (${us(hopCpu)}) | ${us(gatewayAdded)} (${us(gatewayCpu)}) |`;
  };
  const lines = [
    `One \`tools/call\` at a time, medians of ${rounds} interleaved rounds of ${calls} calls:`,
    '',
    '| Path | Round trip | Added | Middle process: main thread’s CPU a call | Its wait for a core | Its wake-ups | Its other threads’ CPU | The client’s CPU | The server’s CPU |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...shares.map((share) => {
      const { roundTrip, middle, client, server } = share;
      const hop =
        middle === null
          ? '— | — | — | — | —'
          : `${us(roundTrip - direct)} | ${us(middle.cpu)} | ${us(middle.wait)} | ${middle.wakeUps.toFixed(2)} | ${us(middle.others)}`;
      return `| ${nameOf(share)} | ${us(roundTrip)} | ${hop} | ${us(client)} | ${us(server)} |`;
    }),
    '',
    'What each part costs a call, added round trip (main thread’s CPU): the side with it less the side without it; the rest is what the side adds without either, over the bare hop. Each part alone is the side with it less the side without it, the other part kept: the two need not add up to both.',
    '',
    '| Part | Same-work hop | Gateway |',
    '| --- | ---: | ---: |',
    part('The token check and the connection read', (path) => [
      added(path) - added(path, both),
      cpu(path) - cpu(path, both),
    ]),
    part('The token check alone', (path) => [
      added(path) - added(path, ['check']),
      cpu(path) - cpu(path, ['check']),
    ]),
    part('The connection read alone', (path) => [
      added(path) - added(path, ['read']),
      cpu(path) - cpu(path, ['read']),
    ]),
    part('The rest, over the bare hop', (path) => [
      added(path, both) - added('bare hop'),
      cpu(path, both) - cpu('bare hop'),
    ]),
    `| The limits and the address policy alone (hop.ts \`HopGuards\`) | ${us(added('same-work hop') - added('same-work hop', ['guards']))} (${us(cpu('same-work hop') - cpu('same-work hop', ['guards']))}) | — |`,
    '',
    `The gateway added ${(added('gateway') / added('bare hop')).toFixed(2)}× what the bare hop added, ` +
      `${(added('gateway') / added('same-work hop')).toFixed(2)}× what the same-work hop added; ` +
      `the same work alone ${(added('same-work hop') / added('bare hop')).toFixed(2)}× the bare hop ` +
      `(${(added('same-work hop', ['guards']) / added('bare hop')).toFixed(2)}× without its limits and address policy).`,
    `Two processes of the gateway's one build added ${us(added('gateway'))} and ${us(again)}: ` +
      `they differ by ${us(Math.abs(added('gateway') - again))}, and a difference of that size between two processes is not the code's.`,
  ];
  return lines.join('\n');
}
