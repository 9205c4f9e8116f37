import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateVaultKey, rootPrincipal } from '@keyway/core';
import { sqliteStorage } from '@keyway/store-sqlite';
import { startServerProcess } from '@keyway/test-support/examples';
import { startBrokerProcess } from '@keyway/test-support/processes';
import { ROOT_KEY, upstreamConnection } from './fixtures.js';
import { median } from './measure.js';
import { benchDir, type Load, load, memoryOf, pickLoad, settledRss, sleep } from './processes.js';

export const CONNECTION = 'acme/alice/demo';
export const CALL = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params: { name: 'echo', arguments: { text: 'hello' } },
});
export const MCP_HEADERS = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': '2025-11-25',
};

/**
 * The status a hop answers to a `tools/call` whose declared length is past 4 MiB, before any
 * of its body is sent. Sending the body whole would race the hop's close after its answer: a
 * client still writing then fails with `EPIPE` instead of reading the 413.
 */
function declaredPastLimit(url: string, authorization: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, {
      method: 'POST',
      headers: { ...MCP_HEADERS, authorization, 'content-length': String(4 * 1024 * 1024 + 1) },
    });
    req.once('response', (answer) => {
      answer.resume();
      req.destroy();
      resolve(answer.statusCode ?? 0);
    });
    req.once('error', reject);
    req.flushHeaders();
  });
}

/** The sizes of the gateway's run. */
export interface GatewayOptions {
  /** Sequential calls per round for the round trip. */
  calls: number;
  rounds: number;
  /** Autocannon's connections and seconds for the throughput. */
  connections: number;
  seconds: number;
  /** Idle event streams held open at once. */
  streams: number;
  /** How long the slow reader reads, seconds. */
  slowSeconds: number;
}

export interface GatewayResult {
  /**
   * One `tools/call` at a time: median microseconds per call, direct, through a bare
   * node:http reverse proxy in the server's process (`proxy`) and in a process of its own
   * (`hop`, the gateway's topology) — the floors of any extra hop — and through the gateway.
   */
  /**
   * `signedIn`: the same gateway with the access token of an MCP client that signed in
   * (docs/api.md §17): a broker token bound to the endpoint, checked the same way.
   */
  roundTrip: {
    direct: number;
    proxy: number;
    hop: number;
    sameWork: number;
    gateway: number;
    signedIn: number;
  };
  throughput: {
    connections: number;
    direct: Load;
    proxy: Load;
    hop: Load;
    sameWork: Load;
    gateway: Load;
    signedIn: Load;
  };
  /** `keyway serve`'s resident memory with the idle streams open, against before, bytes. */
  idle: { streams: number; before: number; after: number };
  /** A reader slower than the server: bytes the server wrote, the reader got, and RSS. */
  slow: { seconds: number; written: number; read: number; rssBefore: number; rssAfter: number };
}

/**
 * The SQLite file `keyway serve` is started on in the gateway's benchmarks: the connection to
 * the MCP server at `upstreamBase` seeded, its vault key written beside it; and the
 * connection's own access token, for the direct calls.
 */
export async function seedGatewayFile(
  dir: string,
  upstreamBase: string,
): Promise<{ file: string; vaultKey: string; upstreamToken: string }> {
  const file = join(dir, 'keyway.sqlite');
  const vaultKey = generateVaultKey();
  writeFileSync(`${file}.vault-keys`, `${vaultKey}\n`, { mode: 0o600 });
  const seeding = await upstreamConnection(sqliteStorage(file), upstreamBase, vaultKey, CONNECTION);
  const { access_token: upstreamToken } = await seeding.connections.credentials(
    rootPrincipal(),
    CONNECTION,
  );
  await seeding.close();
  return { file, vaultKey, upstreamToken };
}

/**
 * The same-work hop (same-work-hop.ts) in its own process, in front of the MCP server on
 * `port`, reading `file`: started once `keyway serve` made its schema there.
 */
export function startSameWorkHop(
  port: string,
  file: string,
  vaultKey: string,
  skip: ('check' | 'read' | 'guards')[] = [],
) {
  return startServerProcess(process.execPath, ['.build/proxy-hop.js', port, '--same-work', file], {
    cwd: benchDir,
    env: { HOP_ROOT_KEY: ROOT_KEY, HOP_VAULT_KEY: vaultKey, HOP_SKIP: skip.join(',') },
    listening: /hop listening on (http:\/\/127\.0\.0\.1:\d+)/,
  });
}

/** A broker token for `acme/alice`, minted with the root key through `keyway serve` at `base`. */
export async function mintAgentToken(base: string): Promise<string> {
  const minted = await fetch(`${base}/api/admin/tokens`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ROOT_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'agent', scopes: ['acme/alice'], expires_in: 86_400 }),
  });
  return ((await minted.json()) as { access_token: string }).access_token;
}

/** The median time of one call, microseconds, over `calls` sequential calls. */
export async function roundTrip(
  url: string,
  authorization: string,
  calls: number,
): Promise<number> {
  const times: number[] = [];
  for (let call = 0; call < calls; call++) {
    const started = performance.now();
    const response = await fetch(url, {
      method: 'POST',
      headers: { ...MCP_HEADERS, authorization },
      body: CALL,
    });
    const text = await response.text();
    if (response.status !== 200 || !text.includes('hello'))
      throw new Error(`${url} answered ${response.status}: ${text.slice(0, 200)}`);
    times.push((performance.now() - started) * 1000);
  }
  return median(times);
}

/**
 * The access token of an MCP client that signs in to the gateway's endpoint with a broker
 * token, as a client and its user's browser would get it: registration, the sign-in and
 * consent forms (with the binding cookie), the code for tokens.
 */
async function signedInToken(base: string, parent: string): Promise<string> {
  const { issuer } = (await (
    await fetch(`${base}/.well-known/oauth-authorization-server`)
  ).json()) as {
    issuer: string;
  };
  const redirect = 'http://127.0.0.1/callback';
  const registered = await fetch(`${base}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: 'bench', redirect_uris: [redirect] }),
  });
  const { client_id: clientId } = (await registered.json()) as { client_id: string };
  const verifier = randomBytes(32).toString('base64url');
  const page = await fetch(
    `${base}/oauth/authorize?${new URLSearchParams({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: redirect,
      code_challenge: createHash('sha256').update(verifier).digest('base64url'),
      code_challenge_method: 'S256',
      resource: `${issuer}/mcp/${CONNECTION}`,
    })}`,
  );
  const cookie = (page.headers.get('set-cookie') ?? '').split(';')[0] as string;
  const handleOf = async (response: Response) =>
    (await response.text()).match(/name="request" value="([^"]+)"/)?.[1] ?? '';
  const post = (fields: Record<string, string>) =>
    fetch(`${base}/oauth/authorize`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
      body: new URLSearchParams(fields).toString(),
    });
  const consent = await post({ request: await handleOf(page), action: 'token', token: parent });
  const approved = await post({
    request: await handleOf(consent),
    action: 'consent',
    decision: 'approve',
  });
  const code = new URL(approved.headers.get('location') ?? '').searchParams.get('code') ?? '';
  const tokens = await fetch(`${base}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code,
      redirect_uri: redirect,
      client_id: clientId,
      code_verifier: verifier,
    }).toString(),
  });
  const { access_token: token } = (await tokens.json()) as { access_token?: string };
  if (token === undefined) throw new Error(`the sign-in gave no token (HTTP ${tokens.status})`);
  return token;
}

/** Opens a GET event stream through the gateway and resolves once its headers arrived. */
function openStream(url: string, headers: Record<string, string>): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const outgoing = httpRequest(url, { headers, agent: false }, (response) => {
      if (response.statusCode !== 200) reject(new Error(`stream answered ${response.statusCode}`));
      else resolve(response);
    });
    outgoing.once('error', reject);
    outgoing.end();
  });
}

/**
 * The MCP gateway over loopback: `keyway serve` on SQLite in front of the official
 * SDK's MCP server in another process. A `tools/call` made directly with the connection's
 * token against the same call through the gateway (one at a time, and under load); the
 * memory of idle event streams held open through it; and a reader slower than its server,
 * which must slow the server down rather than grow the broker.
 */
export async function benchGateway(options: GatewayOptions): Promise<GatewayResult> {
  const dir = mkdtempSync(join(tmpdir(), 'keyway-bench-gateway-'));
  const stops: (() => Promise<void>)[] = [];
  try {
    const upstream = await startServerProcess(process.execPath, ['.build/mcp-upstream.js'], {
      cwd: benchDir,
      env: {},
      listening: /listening on (http:\/\/127\.0\.0\.1:\d+ proxy http:\/\/127\.0\.0\.1:\d+)/,
    });
    stops.push(() => upstream.stop());
    const [upstreamBase, proxyBase] = upstream.base.split(' proxy ') as [string, string];
    const hopProcess = await startServerProcess(
      process.execPath,
      ['.build/proxy-hop.js', new URL(upstreamBase).port],
      { cwd: benchDir, env: {}, listening: /hop listening on (http:\/\/127\.0\.0\.1:\d+)/ },
    );
    stops.push(() => hopProcess.stop());
    const { file, vaultKey, upstreamToken } = await seedGatewayFile(dir, upstreamBase);

    const brokerEnv = {
      KEYWAY_ROOT_KEY: ROOT_KEY,
      KEYWAY_DATABASE: file,
      KEYWAY_LOG_LEVEL: 'silent',
      KEYWAY_ALLOWED_HOSTS: '127.0.0.1',
      KEYWAY_MAX_CONNECTIONS: String(options.streams * 2 + 100),
      KEYWAY_GATEWAY_MAX_STREAMS_PER_CONNECTION: String(options.streams * 2),
      KEYWAY_GATEWAY_MAX_STREAMS_PER_CALLER: String(options.streams * 2),
      // MCP clients may sign in: the same gateway, with their endpoint-bound tokens too.
      KEYWAY_SIGN_IN: 'token',
    };
    const keyway = await startBrokerProcess(brokerEnv);
    stops.push(() => keyway.stop());
    // The same-work hop reads the file keyway serve keeps: started once its schema is there.
    const sameWorkProcess = await startSameWorkHop(new URL(upstreamBase).port, file, vaultKey);
    stops.push(() => sameWorkProcess.stop());
    const pid = keyway.child.pid as number;
    const brokerToken = await mintAgentToken(keyway.url);
    const direct = { url: `${upstreamBase}/mcp`, authorization: `Bearer ${upstreamToken}` };
    const proxy = { url: `${proxyBase}/mcp`, authorization: 'Bearer caller' };
    const hop = { url: `${hopProcess.base}/mcp`, authorization: 'Bearer caller' };
    const gateway = {
      url: `${keyway.url}/mcp/${CONNECTION}`,
      authorization: `Bearer ${brokerToken}`,
    };
    const sameWork = {
      url: `${sameWorkProcess.base}/mcp/${CONNECTION}`,
      authorization: gateway.authorization,
    };
    const signedIn = {
      url: gateway.url,
      authorization: `Bearer ${await signedInToken(keyway.url, brokerToken)}`,
    };

    // Warm both paths, then alternate rounds.
    const sides = [
      ['direct', direct],
      ['proxy', proxy],
      ['hop', hop],
      ['sameWork', sameWork],
      ['gateway', gateway],
      ['signedIn', signedIn],
    ] as const;
    for (const [, side] of sides) await roundTrip(side.url, side.authorization, 200);
    // The same-work hop checks the token: another one is refused.
    const refused = await fetch(sameWork.url, {
      method: 'POST',
      headers: {
        ...MCP_HEADERS,
        authorization: `Bearer ${brokerToken.slice(0, -1)}${brokerToken.endsWith('A') ? 'B' : 'A'}`,
      },
      body: CALL,
    });
    if (refused.status !== 401) throw new Error(`the same-work hop answered ${refused.status}`);
    // And keeps the gateway's limits: a body declared past 4 MiB is refused unread.
    const large = await declaredPastLimit(sameWork.url, gateway.authorization);
    if (large !== 413) {
      throw new Error(`the same-work hop answered ${large} to a body declared past its limit`);
    }
    const trips = {
      direct: [] as number[],
      proxy: [] as number[],
      hop: [] as number[],
      sameWork: [] as number[],
      gateway: [] as number[],
      signedIn: [] as number[],
    };
    for (let round = 0; round < options.rounds; round++) {
      for (const [name, side] of sides) {
        trips[name].push(await roundTrip(side.url, side.authorization, options.calls));
      }
    }
    const loads = {
      direct: [] as Load[],
      proxy: [] as Load[],
      hop: [] as Load[],
      sameWork: [] as Load[],
      gateway: [] as Load[],
      signedIn: [] as Load[],
    };
    for (let round = 0; round < options.rounds; round++) {
      for (const [name, side] of sides) {
        loads[name].push(
          await load({
            url: side.url,
            connections: options.connections,
            seconds: options.seconds,
            method: 'POST',
            headers: { ...MCP_HEADERS, authorization: side.authorization },
            body: () => CALL,
          }),
        );
      }
    }

    // Idle event streams, held open through the gateway of a `keyway serve` of its own on the
    // same file, as the portal's sessions are measured: in the process of the loads above, the
    // heap still held their garbage and gave some of it back while the streams opened (-37,
    // -40 and, sampled once idle, -43 KiB a stream).
    const idleKeyway = await startBrokerProcess(brokerEnv);
    stops.push(() => idleKeyway.stop());
    const idlePid = idleKeyway.child.pid as number;
    const idleUrl = `${idleKeyway.url}/mcp/${CONNECTION}`;
    await roundTrip(idleUrl, gateway.authorization, 200);
    const streamHeaders = {
      authorization: gateway.authorization,
      accept: 'text/event-stream',
      'last-event-id': 'idle',
    };
    // Half as many opened first, unmeasured, so the heap holds streams already, then each
    // figure once idle (settledRss).
    const open: IncomingMessage[] = [];
    const openMore = async (count: number) => {
      for (let batch = 0; batch < count; batch += 50) {
        const size = Math.min(50, count - batch);
        open.push(
          ...(await Promise.all(
            Array.from({ length: size }, () => openStream(idleUrl, streamHeaders)),
          )),
        );
      }
    };
    await openMore(Math.ceil(options.streams / 2));
    const before = await settledRss(idlePid);
    await openMore(options.streams);
    const after = await settledRss(idlePid);
    for (const response of open) response.destroy();
    await idleKeyway.stop();
    await sleep(500);

    // A slow reader of a fast stream.
    const rssBefore = memoryOf(pid).rss;
    const writtenBefore = (
      (await (await fetch(`${upstreamBase}/written`)).json()) as {
        written: number;
      }
    ).written;
    const flood = await openStream(gateway.url, { ...streamHeaders, 'last-event-id': 'flood' });
    let read = 0;
    const until = Date.now() + options.slowSeconds * 1000;
    await new Promise<void>((resolve) => {
      flood.on('data', (chunk: Buffer) => {
        read += chunk.length;
        flood.pause();
        if (Date.now() >= until) {
          flood.destroy();
          resolve();
        } else setTimeout(() => flood.resume(), 20);
      });
    });
    const rssAfter = memoryOf(pid).rss;
    await sleep(200);
    const writtenAfter = (
      (await (await fetch(`${upstreamBase}/written`)).json()) as {
        written: number;
      }
    ).written;
    return {
      roundTrip: {
        direct: median(trips.direct),
        proxy: median(trips.proxy),
        hop: median(trips.hop),
        sameWork: median(trips.sameWork),
        gateway: median(trips.gateway),
        signedIn: median(trips.signedIn),
      },
      throughput: {
        connections: options.connections,
        direct: pickLoad(loads.direct),
        proxy: pickLoad(loads.proxy),
        hop: pickLoad(loads.hop),
        sameWork: pickLoad(loads.sameWork),
        gateway: pickLoad(loads.gateway),
        signedIn: pickLoad(loads.signedIn),
      },
      idle: { streams: options.streams, before, after },
      slow: {
        seconds: options.slowSeconds,
        written: writtenAfter - writtenBefore,
        read,
        rssBefore,
        rssAfter,
      },
    };
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
}
