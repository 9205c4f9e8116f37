import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import type { GatewayResult } from './gateway.js';
import type { HandOutResult } from './hand-outs.js';
import type { HandlerResult } from './handler.js';
import type { Compared } from './measure.js';
import type { PortalResult } from './portal.js';
import type { PrefixListRow } from './prefix-list.js';
import { countFailed, describeFailed, failedOf, type Load } from './processes.js';
import type { StormResult } from './refresh-storm.js';
import type { ScaleOutResult } from './scale-out.js';
import type { ServeOptions, ServeResult } from './serve.js';
import type { SinceResult } from './since.js';
import { IN_FLIGHT, type TokenCheckRow } from './token-check.js';
import type { WorstBodyRow } from './worst-bodies.js';

export interface Report {
  smoke: boolean;
  date: Date;
  seconds: number;
  tokenCheck: TokenCheckRow[];
  handler: HandlerResult;
  serve: ServeResult;
  prefixList: PrefixListRow[];
  storm: StormResult;
  handOuts: HandOutResult;
  since: SinceResult;
  gateway: GatewayResult;
  portal: PortalResult;
  scaleOut: ScaleOutResult;
  worstBodies: WorstBodyRow[];
  loopback: ServeOptions;
}

/** Everything after this line of docs/benchmarks.md is written by hand and kept. */
export const NOTES_MARKER = '<!-- Written by hand below this line; `pnpm bench` keeps it. -->';

const int = (n: number) => Math.round(n).toLocaleString('en-US');
const pct = (n: number) => `${(n * 100).toFixed(0)}%`;
const us = (n: number) => n.toFixed(1);
const ms = (n: number) => (n / 1000).toFixed(2);
const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(0)} MiB`;
const size = (n: number) =>
  n >= 1_000_000 ? `${n / 1_000_000}M` : n >= 1000 ? `${n / 1000}k` : `${n}`;
const verdict = (ok: boolean) => (ok ? 'met' : '**not met**');

/** The report as Markdown; written to `file` (keeping its hand-written notes) unless null. */
export function writeReport(report: Report, file: string | null): string {
  const cpu = cpus();
  const lines: string[] = [];
  const push = (...more: string[]) => lines.push(...more);
  push(
    '# Benchmarks',
    '',
    `Written by \`pnpm bench\` on ${report.date.toISOString().slice(0, 10)}: ${cpu.length} × ${cpu[0]?.model.trim() ?? 'unknown CPU'}, ${mib(totalmem())} of memory, Node ${process.version}, ${process.platform}/${process.arch}; the run took ${Math.round(report.seconds)} s.${report.smoke ? ' **Smoke run: tiny sizes, not figures to quote.**' : ''}`,
    '',
    'Every figure is set against a floor measured in the same run, in alternating rounds',
    '(medians of the rounds, and their ratio), so the ratios hold from machine to machine where',
    'the absolute numbers do not. Throughput and latency are per call, measured with',
    'tinybench in process and with autocannon over loopback HTTP.',
    '',
  );

  push(
    '## Token check',
    '',
    '`broker.authenticate(token)` then `broker.authorize(principal, path)`, over 1,000 real',
    'tokens in turn in a table of that many live tokens, with the default crypto (node:crypto',
    'on Node, as `keyway serve` runs). The floor is the same work written bare on node:crypto and the',
    "engine's driver: parse, HMAC-SHA-256, constant-time compare, SHA-256 of the id, one",
    'prepared point read of the columns Keyway reads (name, scopes, expiry, the endpoint a bound',
    'token is for, its tool globs: docs/api.md §17 and §18), expiry, the endpoint, scope match.',
    '',
    '| Storage | Live tokens | Keyway | Floor | Keyway / floor | Keyway p99 | Floor p99 |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: |',
  );
  for (const row of report.tokenCheck) {
    push(
      `| ${row.engine} | ${size(row.size)} | ${int(row.subject.opsPerSecond)}/s | ${int(row.floor.opsPerSecond)}/s | ${pct(row.ratio)} | ${us(row.subject.p99)} µs | ${us(row.floor.p99)} µs |`,
    );
  }
  push('');
  const engines = [...new Set(report.tokenCheck.map((row) => row.engine))];
  const growth = engines.map((engine) => {
    const rows = report.tokenCheck.filter((row) => row.engine === engine);
    const small = rows[0] as TokenCheckRow;
    const large = rows[rows.length - 1] as TokenCheckRow;
    return {
      engine,
      from: small.size,
      to: large.size,
      factor: large.subject.p99 / small.subject.p99,
    };
  });
  push(
    `p99 growth from ${size(growth[0]?.from ?? 0)} to ${size(growth[0]?.to ?? 0)} live tokens: ${growth.map((g) => `${g.engine} ${g.factor.toFixed(2)}×`).join(', ')}.`,
    '',
  );
  const inFlightRows = report.tokenCheck.filter((row) => row.inFlight !== undefined);
  if (inFlightRows.length > 0) {
    push(
      `On PostgreSQL one check at a time is a round trip to another process, and how soon each side is woken decides most of it: one run's rounds differ by a third. The same checks ${inFlightRows[0]?.inFlight?.inFlight} at a time, as a server's concurrent requests make them, Keyway's pool against a floor pool of the same size (10 connections):`,
      '',
      '| Live tokens | Keyway | Floor | Keyway / floor (median of the rounds) | Each round |',
      '| ---: | ---: | ---: | ---: | --- |',
    );
    for (const row of inFlightRows) {
      const flight = row.inFlight as NonNullable<TokenCheckRow['inFlight']>;
      push(
        `| ${size(row.size)} | ${int(flight.subject)}/s | ${int(flight.floor)}/s | ${pct(flight.ratio)} | ${flight.rounds.map(pct).join(', ')} |`,
      );
    }
    push('');
  }

  push(
    '## Handler in process',
    '',
    'An authenticated read, `GET /api/admin/tokens/<name>` with a broker token on SQLite,',
    'through `createHandler` (`Request` → `Response`, body read), against a bare function',
    'returning the same `Response` for the same `Request`; and the floor of the same work in',
    'process against the same bare function: the bearer from the headers, the token check’s',
    'floor, the route’s prepared point read of the token by name, its scopes decoded, the',
    'answer’s JSON written into the same `Response` (the least any handler of this read does).',
    '',
    '| Function | Calls/s | Bare function | Of the bare function | p99 |',
    '| --- | ---: | ---: | ---: | ---: |',
    `| Keyway's handler | ${int(report.handler.subject.opsPerSecond)}/s | ${int(report.handler.floor.opsPerSecond)}/s | ${pct(report.handler.ratio)} | ${us(report.handler.subject.p99)} µs |`,
    `| The same work, bare | ${int(report.handler.sameWork.subject.opsPerSecond)}/s | ${int(report.handler.sameWork.floor.opsPerSecond)}/s | ${pct(report.handler.sameWork.ratio)} | ${us(report.handler.sameWork.subject.p99)} µs |`,
    '',
  );

  push(
    '## Over loopback HTTP',
    '',
    `\`keyway serve\` on SQLite in its own process; autocannon in the benchmark's process with ${report.loopback.connections} connections for ${report.loopback.seconds} s per round, ${report.loopback.rounds} round(s). The reference servers, each in its own process, answer the same status, headers and body: a bare \`node:http\` server, Hono on \`@hono/node-server\`, and the floor: the bare server doing the same work — the token check's floor (HMAC-SHA-256 of the bearer, SHA-256 of its id, one prepared point read of its row in the same SQLite file, expiry, endpoint, scope), then the route's own prepared point read (the token by name, the connection by id), the JSON its row holds decoded, and the answer's JSON written: the least an authenticated read can do (its answers are checked to be Keyway's, byte for byte).`,
    '',
    '| Route (broker token) | Keyway | Floor | Bare node:http | Hono | Keyway / Hono | Floor / Hono | Keyway / floor | Keyway p99 |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  );
  for (const row of report.serve.reads) {
    const rate = (load: Load) => load.requestsPerSecond;
    push(
      `| \`${row.route}\` | ${int(rate(row.keyway))}/s | ${int(rate(row.floor))}/s | ${int(rate(row.bare))}/s | ${int(rate(row.hono))}/s | ${pct(rate(row.keyway) / rate(row.hono))} | ${pct(rate(row.floor) / rate(row.hono))} | ${pct(rate(row.keyway) / rate(row.floor))} | ${row.keyway.p99} ms |`,
    );
  }
  const failures = report.serve.reads.reduce(
    (sum, row) =>
      sum +
      countFailed(row.keyway.failed) +
      countFailed(row.bare.failed) +
      countFailed(row.hono.failed) +
      countFailed(row.floor.failed),
    0,
  );
  push('', `Failed requests (non-2xx, errors, timeouts): ${failures}.`, '');

  const { workers } = report.serve;
  const scaling = workers.many.requestsPerSecond / workers.one.requestsPerSecond;
  push(
    '## Every core: `KEYWAY_WORKERS`',
    '',
    `The first read above on \`keyway serve\` with one process and with \`KEYWAY_WORKERS=${workers.count}\` (one per CPU of this machine) over the same SQLite file, rounds interleaved. The load generator runs on the same ${cpus().length} CPUs.`,
    '',
    '| Processes | Requests/s | p99 | Of one process |',
    '| ---: | ---: | ---: | ---: |',
    `| 1 | ${int(workers.one.requestsPerSecond)}/s | ${workers.one.p99} ms | 100% |`,
    `| ${workers.count} workers | ${int(workers.many.requestsPerSecond)}/s | ${workers.many.p99} ms | ${pct(scaling)} |`,
    '',
    `Failed requests: ${countFailed(workers.one.failed) + countFailed(workers.many.failed)}.`,
    '',
  );

  const { quiet, logged, metered } = report.serve.observed;
  push(
    '## What watching it costs',
    '',
    'The first read above on three `keyway serve` processes over the same file, rounds interleaved: the request log off (`KEYWAY_LOG_LEVEL=silent`, as above), on (a JSON line per request, standard output to a file), and on with the Prometheus metrics (`KEYWAY_METRICS_PORT`).',
    '',
    '| Request log | Metrics | Requests/s | p99 | Of the quiet one |',
    '| --- | --- | ---: | ---: | ---: |',
    `| off | off | ${int(quiet.requestsPerSecond)}/s | ${quiet.p99} ms | 100% |`,
    `| on | off | ${int(logged.requestsPerSecond)}/s | ${logged.p99} ms | ${pct(logged.requestsPerSecond / quiet.requestsPerSecond)} |`,
    `| on | on | ${int(metered.requestsPerSecond)}/s | ${metered.p99} ms | ${pct(metered.requestsPerSecond / quiet.requestsPerSecond)} |`,
    '',
  );

  push(
    '## `keyway serve`: minting and memory',
    '',
    '| Mints (root key, `POST /api/admin/tokens`) | p99 | Failed | RSS idle | RSS peak | RSS after the load |',
    '| ---: | ---: | ---: | ---: | ---: | ---: |',
    `| ${int(report.serve.mint.requestsPerSecond)}/s | ${report.serve.mint.p99} ms | ${countFailed(report.serve.mint.failed)} | ${mib(report.serve.memory.idleRss)} | ${mib(report.serve.memory.peakRss)} | ${mib(report.serve.memory.rssAfterLoad)} |`,
    '',
  );

  push(
    '## Prefix list',
    '',
    'A 100-item page of one tenant (`prefix=t<k>`, each tenant 1,000 connections) in a table',
    "of connections, through `broker.connections.list`, against the adapter's own SQL for the",
    'page run straight on the driver.',
    '',
    '| Storage | Connections | Keyway p50 | Keyway p99 | Floor p50 | Keyway / floor |',
    '| --- | ---: | ---: | ---: | ---: | ---: |',
  );
  for (const row of report.prefixList) {
    push(
      `| ${row.engine} | ${size(row.size)} | ${ms(row.subject.p50)} ms | ${ms(row.subject.p99)} ms | ${ms(row.floor.p50)} ms | ${pct(row.ratio)} |`,
    );
  }
  push('');

  push(
    '## Refresh storm',
    '',
    `${report.storm.callers} concurrent credential requests for one connection whose access token is due, spread over ${report.storm.instances} broker instances (each with its own pool) on one PostgreSQL database; the authorization server counts the refresh grants it receives.`,
    '',
    '| Storm | Upstream refreshes | Wall time |',
    '| ---: | ---: | ---: |',
    ...report.storm.refreshes.map(
      (count, i) => `| ${i + 1} | ${count} | ${(report.storm.millis[i] ?? 0).toFixed(0)} ms |`,
    ),
    '',
  );

  push(
    '## Worst request bodies',
    '',
    'For every route that reads a body, the bodies that make validation work hardest, each',
    'just under the 1 MiB limit (a quarter million wrong list entries, sixty thousand unknown',
    'fields, arrays nested deeper than the parser goes): the median time of the handler’s',
    'answer in process with the root key, against `JSON.parse` of the same body alone, and the',
    'size of the answer. Before request bodies were bounded, a list of 250,000 wrong scopes took about',
    '8 s and answered 20 MiB.',
    '',
    '| Body | Size | Status | Answer | Answer time | `JSON.parse` alone |',
    '| --- | ---: | ---: | ---: | ---: | ---: |',
    ...report.worstBodies.map(
      (row) =>
        `| ${row.name} | ${int(row.bodyBytes)} B | ${row.status} | ${int(row.answerBytes)} B | ${row.answerMs.toFixed(2)} ms | ${row.parseMs.toFixed(2)} ms |`,
    ),
    '',
  );

  const { handOuts, since } = report;
  const groupGain = handOuts.grouped / handOuts.perRow;
  const sinceGain = 'skipped' in since ? Number.NaN : since.now.rate / since.then.rate;
  push(
    '## Audited reads: group commit',
    '',
    `Credential hand-outs in process on SQLite, ${handOuts.callers} concurrent callers: each hand-out's`,
    '`credentials.issued` row is committed before its token is returned (docs/api.md §11). The',
    'rows of hand-outs that arrive within one turn of the event loop, or while a commit is in',
    'flight, share one commit; the floor of comparison is the same work with one commit per',
    'row, as before (the same code otherwise: a stricter floor than the throughput #27 set its',
    '5× against, which the second table measures; see "What bounds each figure").',
    '',
    '| Grouped | One commit per row | Grouped / per row | Commits per 1,000 hand-outs, grouped |',
    '| ---: | ---: | ---: | ---: |',
    `| ${int(handOuts.grouped)}/s | ${int(handOuts.perRow)}/s | ${groupGain.toFixed(1)}× | ${int(handOuts.commitsPerThousand)} |`,
    '',
    `Against the code #27 was filed against (\`${since.commit.slice(0, 7)}\`): the same loop (${handOuts.callers} callers ×`,
    '500 hand-outs, 5 rounds after one unmeasured) bundled from this tree and from that',
    "commit's, run in turns on this machine (`pnpm bench:since`); medians of each tree's runs.",
    '',
    ...('skipped' in since
      ? [`Not measured in this run: ${since.skipped}.`]
      : [
          '| This tree | At that commit | This tree / then | CPU a hand-out, then → now |',
          '| ---: | ---: | ---: | ---: |',
          `| ${int(since.now.rate)}/s | ${int(since.then.rate)}/s | ${sinceGain.toFixed(1)}× | ${us(since.then.cpu)} → ${us(since.now.cpu)} µs |`,
        ]),
    '',
  );

  const { gateway } = report;
  const signedInDelta = (value: number, against: number) =>
    `${value >= against ? '+' : '−'}${pct(Math.abs(value / against - 1))}`;
  const added = gateway.roundTrip.gateway / gateway.roundTrip.direct - 1;
  const hopAdded = gateway.roundTrip.hop / gateway.roundTrip.direct - 1;
  // Under load, the time a call adds: from requests per second, against the bare hop's.
  const perCall = (load: Load) => 1 / load.requestsPerSecond;
  // The time a call through the gateway adds over the time a call through `hop` adds, or
  // null when the hop added none (it served as many as the direct path): no ratio then.
  const addedOver = (hop: Load): number | null => {
    const added = perCall(hop) - perCall(gateway.throughput.direct);
    return added > 0
      ? (perCall(gateway.throughput.gateway) - perCall(gateway.throughput.direct)) / added
      : null;
  };
  const loadAdded = addedOver(gateway.throughput.hop);
  // The same against a hop that does the gateway's work (same-work-hop.ts).
  const sameWorkAdded = gateway.roundTrip.sameWork / gateway.roundTrip.direct - 1;
  const sameWorkLoadAdded = addedOver(gateway.throughput.sameWork);
  const ratioRow = (ratio: number | null, goal: number) =>
    ratio === null
      ? 'the hop added nothing | not measurable'
      : `${ratio.toFixed(2)}× | ${verdict(ratio <= goal)}`;
  const idleMiB = (gateway.idle.after - gateway.idle.before) / 1024 / 1024;
  const slowMiB = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);
  push(
    '## MCP gateway',
    '',
    '`keyway serve` on SQLite in front of an MCP server of the official SDK (stateless, JSON',
    'answers, one `echo` tool) in another process, over loopback. The floor is the same',
    '`tools/call` sent to the server directly with the connection’s token. The floors of any',
    'extra hop are a bare node:http reverse proxy that swaps in a fixed token (no check, no',
    'storage, no parsing): in the server’s own process, and in a process of its own — the',
    'topology of the gateway, whose requests also cross from one process to another. Through',
    'the gateway the call carries a broker token, and Keyway checks it, reads the connection',
    'and its sealed tokens, and forwards the call through the guarded fetch. The same-work hop',
    '(same-work-hop.ts) is the bare hop in its own process doing that work first, bare: the',
    'token check’s floor, the gateway’s one read of the connection and its sealed tokens',
    'from the same SQLite file (not its provider), the tokens opened once per ciphertext as Keyway keeps',
    'them, the access token swapped in; then what docs/api.md §13 and the SSRF rule ask of every',
    'call (hop.ts `HopGuards`, at `keyway serve`’s defaults): a slot among the connection’s and',
    'the caller’s open upstream requests, the body held under its limit and the process’s (the',
    'one retry after a refresh sends it again), the endpoint held to the address policy, a',
    'deadline for the answer’s head, the challenge looked for, an idle limit on the answer.',
    '',
    '| Call | Direct, with the token | Bare hop, server’s process | Bare hop, own process | Same-work hop, own process | Through the gateway | Gateway / direct | Hops / direct |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    `| \`tools/call\`, one at a time (median round trip) | ${us(gateway.roundTrip.direct)} µs | ${us(gateway.roundTrip.proxy)} µs | ${us(gateway.roundTrip.hop)} µs | ${us(gateway.roundTrip.sameWork)} µs | ${us(gateway.roundTrip.gateway)} µs | +${pct(added)} | +${pct(gateway.roundTrip.proxy / gateway.roundTrip.direct - 1)}, +${pct(hopAdded)}, +${pct(sameWorkAdded)} |`,
    `| \`tools/call\` under load (${gateway.throughput.connections} connections) | ${int(gateway.throughput.direct.requestsPerSecond)}/s | ${int(gateway.throughput.proxy.requestsPerSecond)}/s | ${int(gateway.throughput.hop.requestsPerSecond)}/s | ${int(gateway.throughput.sameWork.requestsPerSecond)}/s | ${int(gateway.throughput.gateway.requestsPerSecond)}/s | ${pct(gateway.throughput.gateway.requestsPerSecond / gateway.throughput.direct.requestsPerSecond)} | ${pct(gateway.throughput.proxy.requestsPerSecond / gateway.throughput.direct.requestsPerSecond)}, ${pct(gateway.throughput.hop.requestsPerSecond / gateway.throughput.direct.requestsPerSecond)}, ${pct(gateway.throughput.sameWork.requestsPerSecond / gateway.throughput.direct.requestsPerSecond)} |`,
    '',
    'With the access token of an MCP client that signed in (docs/api.md §17), a broker token bound to the endpoint: the same check, one comparison more.',
    '',
    '| Credential at the gateway | One at a time (median round trip) | Under load |',
    '| --- | ---: | ---: |',
    `| Broker token | ${us(gateway.roundTrip.gateway)} µs | ${int(gateway.throughput.gateway.requestsPerSecond)}/s |`,
    `| Sign-in access token | ${us(gateway.roundTrip.signedIn)} µs (${signedInDelta(gateway.roundTrip.signedIn, gateway.roundTrip.gateway)}) | ${int(gateway.throughput.signedIn.requestsPerSecond)}/s (${signedInDelta(gateway.throughput.signedIn.requestsPerSecond, gateway.throughput.gateway.requestsPerSecond)}) |`,
    '',
    `**Idle event streams**: ${int(gateway.idle.streams)} GET streams held open through the gateway, after ${int(Math.ceil(gateway.idle.streams / 2))} such streams (unmeasured, so that the heap holds streams already), each figure the least of ten samples a second apart once idle, took a \`keyway serve\` of their own (on the same file, none of the loads above run in it) from ${mib(gateway.idle.before)} to ${mib(gateway.idle.after)} of resident memory: ${((gateway.idle.after - gateway.idle.before) / gateway.idle.streams / 1024).toFixed(1)} KiB a stream (its socket to the client, its socket to the server, and on Node the piped body between them).`,
    '',
    `**A slow reader**: the server writes 64 KiB events as fast as its socket takes them; the client reads one chunk every 20 ms for ${gateway.slow.seconds} s. The server wrote ${slowMiB(gateway.slow.written)} MiB, the client read ${slowMiB(gateway.slow.read)} MiB, and \`keyway serve\` went from ${mib(gateway.slow.rssBefore)} to ${mib(gateway.slow.rssAfter)}: what the reader did not take stayed in the sockets’ buffers, and the server waited.`,
    '',
  );

  const { scaleOut } = report;
  push(
    '## Scale-out on PostgreSQL',
    '',
    'Three `keyway serve` processes on one PostgreSQL database, in front of the same MCP server; the',
    'authenticated read (`GET /api/admin/tokens/<name>`) and a `tools/call` through the gateway loaded',
    'on one, two and three of them at once, the connections split among them (one autocannon per',
    'process, all in the benchmark’s process). Every process, the database, the MCP server and the load',
    'generator share this machine’s cores: the ratios say what a second and third process add here, not',
    'what they add on machines of their own.',
    '',
    '| Processes | Reads | Of one | `tools/call` | Of one |',
    '| ---: | ---: | ---: | ---: | ---: |',
    ...scaleOut.processes.map(
      (count, at) =>
        `| ${count} | ${int(scaleOut.read[at] ?? 0)}/s | ${pct((scaleOut.read[at] ?? 0) / (scaleOut.read[0] ?? 1))} | ${int(scaleOut.call[at] ?? 0)}/s | ${pct((scaleOut.call[at] ?? 0) / (scaleOut.call[0] ?? 1))} |`,
    ),
    '',
    `Failed requests: ${countFailed(failedOf([scaleOut.failed.read, scaleOut.failed.call]))} (reads: ${describeFailed(scaleOut.failed.read)}; \`tools/call\`: ${describeFailed(scaleOut.failed.call)}). The refresh storm on such a cluster (three processes, one refresh per expiry) is proved, counted and not timed, by packages/cli/test/refresh-failures.test.ts and server-quirks.test.ts; the storm above is two instances in one process.`,
    '',
  );

  const { portal } = report;
  const listRatio = portal.list.portal / portal.list.fanOut;
  const callRatio = portal.call.portal / portal.call.gateway;
  const relayRatio = portal.call.portal / portal.call.relay;
  const perSession = (portal.idle.after - portal.idle.before) / portal.idle.sessions / 1024;
  push(
    '## Portal',
    '',
    `\`keyway serve\` on SQLite in front of the same MCP server, reached through ${portal.connections} connections of one portal`,
    `(docs/api.md §18). The server answers \`tools/list\` in ${portal.listDelayMs} ms, as a remote server would; the portal asks`,
    'every server on every list here (`KEYWAY_PORTAL_LIST_CACHE_MS=0`: lists not kept), so the fan-out is what is',
    'measured. Each floor is measured in the same run: the ten servers asked at once directly (a client that asked',
    'them itself would wait for the slowest; they share one process here, as the portal’s requests to them do), one',
    'asked alone (shown), the same `tools/call` directly, through the gateway, and through a relay of the SDK.',
    '',
    '| Request | Floor | Through the portal | Portal / floor |',
    '| --- | ---: | ---: | ---: |',
    `| \`tools/list\` of ${portal.connections} servers (median round trip) against the slowest of them asked at once, directly (one alone: ${us(portal.list.direct)} µs) | ${us(portal.list.fanOut)} µs | ${us(portal.list.portal)} µs | ${listRatio.toFixed(2)}× |`,
    `| \`tools/call\` (median round trip) against the same call through the gateway | ${us(portal.call.gateway)} µs | ${us(portal.call.portal)} µs | ${callRatio.toFixed(2)}× |`,
    `| \`tools/call\` against a relay of the SDK’s own server and client, in a process of its own, with no gateway (the floor of any portal built on the SDK) | ${us(portal.call.relay)} µs | ${us(portal.call.portal)} µs | ${relayRatio.toFixed(2)}× |`,
    '',
    `What each hop adds to the call made directly (${us(portal.call.direct)} µs): the gateway ${us(portal.call.gateway - portal.call.direct)} µs, the SDK relay ${us(portal.call.relay - portal.call.direct)} µs, the portal ${us(portal.call.portal - portal.call.direct)} µs — the SDK's server and client layers on top of the gateway's.`,
    '',
    `**Idle sessions**: ${int(portal.idle.sessions)} portal sessions, each over ${portal.idle.connections} connections whose servers it listed (so each holds its ${portal.idle.connections} sessions with them), opened in a \`keyway serve\` of their own after ${int(Math.ceil(portal.idle.sessions / 2))} such sessions (unmeasured, so that the heap holds sessions already), each figure the least of ten samples a second apart once idle, took \`keyway serve\` from ${mib(portal.idle.before)} to ${mib(portal.idle.after)} of resident memory: ${perSession.toFixed(1)} KiB a session.`,
    '',
  );

  const worst = (rows: Compared[]) => Math.min(...rows.map((row) => row.ratio));
  const inProcess = report.tokenCheck.filter((row) => row.engine !== 'postgres');
  const onPostgres = report.tokenCheck.filter((row) => row.engine === 'postgres');
  const worstInFlight = Math.min(...onPostgres.map((row) => row.inFlight?.ratio ?? 0));
  const readsVsFloor = Math.min(
    ...report.serve.reads.map((row) => row.keyway.requestsPerSecond / row.floor.requestsPerSecond),
  );
  const readsVsHono = Math.min(
    ...report.serve.reads.map((row) => row.keyway.requestsPerSecond / row.hono.requestsPerSecond),
  );
  const slowestList = Math.max(...report.prefixList.map((row) => row.subject.p50));
  const largestAnswer = Math.max(...report.worstBodies.map((row) => row.answerBytes));
  const slowestAnswer = Math.max(...report.worstBodies.map((row) => row.answerMs));
  const worstBodiesOk = report.worstBodies.every(
    (row) => row.answerBytes <= 16 * 1024 && row.answerMs <= 10 + 3 * row.parseMs,
  );
  push(
    '## Targets',
    '',
    '| Target | This run | |',
    '| --- | --- | --- |',
    `| Token check ≥ 90% of the floor on memory and SQLite, every size | worst ${pct(worst(inProcess))} | ${verdict(worst(inProcess) >= 0.9)} |`,
    `| Token check ≥ 90% of the floor on PostgreSQL, every size, ${IN_FLIGHT} checks in flight (one at a time: worst ${pct(worst(onPostgres))}, shown) | worst ${pct(worstInFlight)} | ${verdict(worstInFlight >= 0.9)} |`,
    `| Token check p99 grows ≤ 1.5× from the smallest to the largest table | worst ${Math.max(...growth.map((g) => g.factor)).toFixed(2)}× | ${verdict(Math.max(...growth.map((g) => g.factor)) <= 1.5)} |`,
    `| Authenticated read over loopback ≥ 80% of the floor doing the same work, both routes | worst ${pct(readsVsFloor)} | ${verdict(readsVsFloor >= 0.8)} |`,
    `| Authenticated read over loopback against Hono (shown, no goal: a share of the host, see the notes) | worst ${pct(readsVsHono)} | shown |`,
    `| Handler in process ≥ 60% of a bare function (the same work bare: ${pct(report.handler.sameWork.ratio)}) | ${pct(report.handler.ratio)} | ${verdict(report.handler.ratio >= 0.6)} |`,
    `| Handler in process ≥ 80% of the same work bare (the same work over the bare function, as a floor) | ${pct(report.handler.ratio / report.handler.sameWork.ratio)} | ${verdict(report.handler.ratio / report.handler.sameWork.ratio >= 0.8)} |`,
    `| 100-item prefix list < 5 ms (p50) | slowest ${ms(slowestList)} ms | ${verdict(slowestList < 5000)} |`,
    `| Refresh storm: exactly 1 upstream refresh | ${report.storm.refreshes.join(', ')} | ${verdict(report.storm.refreshes.every((n) => n === 1))} |`,
    `| \`KEYWAY_WORKERS=${workers.count}\`: requests/s against one process (shown, no goal: the load generator shares the cores) | ${scaling.toFixed(2)}× | shown |`,
    `| Hand-outs on SQLite under ${handOuts.callers} callers ≥ 5× those of \`${since.commit.slice(0, 7)}\`, when #27 was filed (item 3) | ${'skipped' in since ? 'not measured' : `${sinceGain.toFixed(1)}×`} | ${'skipped' in since ? 'not measured' : verdict(sinceGain >= 5)} |`,
    `| Hand-outs grouped against one commit per row of the same code (shown, no goal: a stricter floor, bounded by the commit's share) | ${groupGain.toFixed(1)}× | shown |`,
    `| Gateway adds ≤ 1.5× what a bare hop in its own process adds to a \`tools/call\`, one at a time (+${pct(added)} against +${pct(hopAdded)}; the floor, the same work bare: ${(sameWorkAdded / hopAdded).toFixed(2)}×) | ${(added / hopAdded).toFixed(2)}× | ${added / hopAdded <= 1.5 ? 'met' : sameWorkAdded / hopAdded >= 1.5 ? '**not met: the floor is above the goal**' : '**not met**'} |`,
    `| The same under load (${gateway.throughput.connections} connections; time a call added, from requests/s) | ${ratioRow(loadAdded, 1.5)} |`,
    `| Gateway adds ≤ 1.25× what a hop doing the same work adds, one at a time (proposed for the two rows above; +${pct(added)} against +${pct(sameWorkAdded)}) | ${(added / sameWorkAdded).toFixed(2)}× | ${verdict(added / sameWorkAdded <= 1.25)} |`,
    `| The same under load (proposed) | ${ratioRow(sameWorkLoadAdded, 1.25)} |`,
    `| ${int(gateway.idle.streams)} idle gateway streams cost ≤ 64 KiB each | ${((idleMiB * 1024) / gateway.idle.streams).toFixed(1)} KiB | ${idleMiB <= 0 ? 'not measurable (the process shrank)' : verdict((idleMiB * 1024) / gateway.idle.streams <= 64)} |`,
    `| Portal \`tools/list\` over ${portal.connections} connections ≤ 1.2× the slowest server’s (asked at once) | ${listRatio.toFixed(2)}× | ${verdict(listRatio <= 1.2)} |`,
    `| Portal \`tools/call\` ≤ 1.1× the same call through the gateway | ${callRatio.toFixed(2)}× | ${verdict(callRatio <= 1.1)} |`,
    `| ${int(portal.idle.sessions)} idle portal sessions over ${portal.idle.connections} connections cost ≤ 64 KiB each | ${perSession.toFixed(1)} KiB | ${verdict(perSession <= 64)} |`,
    `| Scale-out on PostgreSQL, 1 → 2 → 3 processes (shown, no goal: the load generator shares the cores) | reads ${scaleOut.read.map((r) => `${(r / (scaleOut.read[0] ?? 1)).toFixed(2)}×`).join(', ')}; calls ${scaleOut.call.map((r) => `${(r / (scaleOut.call[0] ?? 1)).toFixed(2)}×`).join(', ')} | shown |`,
    `| Worst bodies: every answer ≤ 16 KiB and within 10 ms + 3× its \`JSON.parse\` | largest ${int(largestAnswer)} B, slowest ${slowestAnswer.toFixed(1)} ms | ${verdict(worstBodiesOk)} |`,
    '',
    'Run it: `pnpm bench` (about 20 minutes the first time, when it builds the 1M-row tables',
    'in `keyway-bench-cache` under the temporary directory, or `$KEYWAY_BENCH_CACHE`; about 17 minutes when it reuses them),',
    '`pnpm bench --token-check` for the token check alone (a few minutes; no report written: run it again to see how its rows vary),',
    '`pnpm bench --gateway-shares` for each process’s share of a gateway `tools/call` made one at a time, what the token check, the connection read and the rest cost the gateway and the same-work hop, and how far two processes of one build differ (Linux; about six minutes; no report written),',
    'or `pnpm bench --smoke` for a check in seconds that every benchmark still runs.',
    "`pnpm bench:since <commit> [--rounds N]` (which the run above makes for #27's commit) sets the hand-outs of this tree against those of an",
    'earlier commit, in alternating runs (about a minute a round; the earlier tree is checked out',
    'and installed under the temporary directory the first time).',
    '',
  );

  let text = lines.join('\n');
  if (file !== null) {
    const previous = existsSync(file) ? readFileSync(file, 'utf8') : '';
    const at = previous.indexOf(NOTES_MARKER);
    text += `\n${at === -1 ? `${NOTES_MARKER}\n` : previous.slice(at)}`;
    writeFileSync(file, text.endsWith('\n') ? text : `${text}\n`);
  }
  return text;
}
