import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateVaultKey, rootPrincipal } from '@keyway/core';
import { sqliteStorage } from '@keyway/store-sqlite';
import { startServerProcess } from '@keyway/test-support/examples';
import { startBrokerProcess } from '@keyway/test-support/processes';
import { createTestBroker, createTestWorld } from '@keyway/testing';
import { activeConnection, ROOT_KEY } from './fixtures.js';
import { median } from './measure.js';
import { benchDir, settledRss } from './processes.js';

/*
 * The portal (docs/api.md §18) over loopback: `keyway serve` on SQLite in front of the
 * official SDK's MCP server, reached through ten connections of one portal. Each floor is
 * measured in the same run: `tools/list` asked of the ten servers at once directly (each
 * answering in `listDelayMs`, as a remote server would; the slowest answer is the floor)
 * against the portal's list of all ten, asked of every server each time (lists not kept);
 * a `tools/call` through the gateway against the same call through the portal; and the
 * memory of idle portal sessions, each over five connections whose servers it has listed.
 */

const MCP_HEADERS = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': '2025-11-25',
};

export interface PortalOptions {
  /** Connections of the listed portal. */
  connections: number;
  /** How long the server takes to answer `tools/list`, ms. */
  listDelayMs: number;
  /** Sequential requests per round, and rounds. */
  calls: number;
  rounds: number;
  /** Idle sessions held open, and connections of their portal. */
  sessions: number;
  sessionConnections: number;
}

export interface PortalResult {
  connections: number;
  listDelayMs: number;
  /**
   * Median microseconds of one `tools/list`: one server asked alone, every server asked at
   * once directly (the slowest of them is the answer: the floor), the portal over all.
   */
  list: { direct: number; fanOut: number; portal: number };
  /**
   * Median microseconds of one `tools/call`: to the server directly, through the gateway,
   * through a relay of the SDK's own server and client in a process of its own (no
   * gateway: the floor of any portal built on the SDK), through the portal.
   */
  call: { direct: number; gateway: number; relay: number; portal: number };
  /** `keyway serve`'s resident memory with the idle sessions open, against before, bytes. */
  idle: { sessions: number; connections: number; before: number; after: number };
}

/** Posts one JSON-RPC message, checks its answer, and answers the session id it named. */
async function rpc(
  url: string,
  authorization: string,
  message: Record<string, unknown>,
  session: string | null,
  expect: string,
): Promise<string | null> {
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      ...MCP_HEADERS,
      authorization,
      ...(session === null ? {} : { 'mcp-session-id': session }),
    },
    body: JSON.stringify({ jsonrpc: '2.0', ...message }),
  });
  const text = await response.text();
  if (response.status >= 300 || !text.includes(expect)) {
    throw new Error(`${url} answered ${response.status}: ${text.slice(0, 300)}`);
  }
  return response.headers.get('mcp-session-id');
}

/** An MCP session (initialize, initialized): its id, or `null` on a stateless server. */
async function initialize(url: string, authorization: string): Promise<string | null> {
  const session = await rpc(
    url,
    authorization,
    {
      id: 0,
      method: 'initialize',
      params: {
        protocolVersion: '2025-11-25',
        capabilities: {},
        clientInfo: { name: 'bench', version: '1' },
      },
    },
    null,
    'protocolVersion',
  );
  await fetch(url, {
    method: 'POST',
    headers: {
      ...MCP_HEADERS,
      authorization,
      ...(session === null ? {} : { 'mcp-session-id': session }),
    },
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
  }).then((response) => response.arrayBuffer());
  return session;
}

/** The median microseconds of `calls` sequential requests of one message. */
async function timed(calls: number, send: () => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let call = 0; call < calls; call++) {
    const started = performance.now();
    await send();
    times.push((performance.now() - started) * 1000);
  }
  return median(times);
}

export async function benchPortal(options: PortalOptions): Promise<PortalResult> {
  const dir = mkdtempSync(join(tmpdir(), 'keyway-bench-portal-'));
  const stops: (() => Promise<void>)[] = [];
  try {
    const upstream = await startServerProcess(process.execPath, ['.build/mcp-upstream.js'], {
      cwd: benchDir,
      env: { LIST_DELAY_MS: String(options.listDelayMs) },
      listening: /listening on (http:\/\/127\.0\.0\.1:\d+) proxy/,
    });
    stops.push(() => upstream.stop());
    const file = join(dir, 'keyway.sqlite');
    const vaultKey = generateVaultKey();
    writeFileSync(`${file}.vault-keys`, `${vaultKey}\n`, { mode: 0o600 });
    const world = createTestWorld({
      resourceUrl: `${upstream.base}/mcp`,
      issuer: `${upstream.base}/as`,
    });
    const seeding = createTestBroker(world, {
      rootKey: ROOT_KEY,
      storage: sqliteStorage(file),
      vaultKeys: [vaultKey],
      allowedHosts: ['127.0.0.1'],
    });
    for (let i = 0; i < options.connections; i++) {
      await activeConnection(world, seeding, `acme/alice/s${i}`);
    }
    for (let i = 0; i < options.sessionConnections; i++) {
      await activeConnection(world, seeding, `acme/bob/s${i}`);
    }
    const { access_token: upstreamToken } = await seeding.connections.credentials(
      rootPrincipal(),
      'acme/alice/s0',
    );
    await seeding.close();
    const relay = await startServerProcess(process.execPath, ['.build/sdk-relay.js'], {
      cwd: benchDir,
      env: { UPSTREAM: `${upstream.base}/mcp`, TOKEN: upstreamToken },
      listening: /listening on (http:\/\/127\.0\.0\.1:\d+)/,
    });
    stops.push(() => relay.stop());

    const brokerEnv = {
      KEYWAY_ROOT_KEY: ROOT_KEY,
      KEYWAY_DATABASE: file,
      KEYWAY_LOG_LEVEL: 'silent',
      KEYWAY_ALLOWED_HOSTS: '127.0.0.1',
      KEYWAY_MAX_CONNECTIONS: String(options.sessions + 200),
      KEYWAY_PORTAL_MAX_SESSIONS: String(options.sessions * 2),
    };
    // Every list asks every server: the fan-out is what is measured.
    const keyway = await startBrokerProcess({ ...brokerEnv, KEYWAY_PORTAL_LIST_CACHE_MS: '0' });
    stops.push(() => keyway.stop());
    const root = `Bearer ${ROOT_KEY}`;
    const direct = `${upstream.base}/mcp`;
    const portal = `${keyway.url}/portal/acme/alice`;
    const gateway = `${keyway.url}/mcp/acme/alice/s0`;
    const list = { id: 1, method: 'tools/list' };
    const call = (name: string) => ({
      id: 2,
      method: 'tools/call',
      params: { name, arguments: { text: 'hello' } },
    });

    const directSession = await initialize(direct, `Bearer ${upstreamToken}`);
    const portalSession = await initialize(portal, root);
    const gatewaySession = await initialize(gateway, root);
    const relaySession = await initialize(`${relay.base}/mcp`, root);
    const sides = {
      listDirect: () => rpc(direct, `Bearer ${upstreamToken}`, list, directSession, '"echo"'),
      // What a client that asked the servers itself would wait for: all at once, the slowest.
      listFanOut: () =>
        Promise.all(
          Array.from({ length: options.connections }, () =>
            rpc(direct, `Bearer ${upstreamToken}`, list, directSession, '"echo"'),
          ),
        ),
      listPortal: () =>
        rpc(portal, root, list, portalSession, `"s${options.connections - 1}__echo"`),
      callDirect: () =>
        rpc(direct, `Bearer ${upstreamToken}`, call('echo'), directSession, 'hello'),
      callGateway: () => rpc(gateway, root, call('echo'), gatewaySession, 'hello'),
      callRelay: () => rpc(`${relay.base}/mcp`, root, call('echo'), relaySession, 'hello'),
      callPortal: () => rpc(portal, root, call('s0__echo'), portalSession, 'hello'),
    };
    // Warm every path (the portal's sessions with the servers open here), then alternate.
    for (const send of Object.values(sides)) for (let i = 0; i < 20; i++) await send();
    const rounds = {
      listDirect: [],
      listFanOut: [],
      listPortal: [],
      callDirect: [],
      callGateway: [],
      callRelay: [],
      callPortal: [],
    } as Record<keyof typeof sides, number[]>;
    for (let round = 0; round < options.rounds; round++) {
      for (const [name, send] of Object.entries(sides) as [
        keyof typeof sides,
        () => Promise<unknown>,
      ][]) {
        rounds[name].push(await timed(options.calls, send));
      }
    }

    // Idle sessions of a portal of `sessionConnections`, each having listed (so each holds
    // its sessions with those servers), in a process of their own: one that did the rows'
    // work above has free heap the sessions would fill unseen. Half as many first,
    // unmeasured, so that the heap already holds sessions when the measure starts.
    await keyway.stop();
    const idle = await startBrokerProcess(brokerEnv);
    stops.push(() => idle.stop());
    const pid = idle.child.pid as number;
    const bob = `${idle.url}/portal/acme/bob`;
    const open = async (count: number) => {
      for (let opened = 0; opened < count; opened += 25) {
        await Promise.all(
          Array.from({ length: Math.min(25, count - opened) }, async () => {
            const session = await initialize(bob, root);
            await rpc(bob, root, list, session, '"s0__echo"');
          }),
        );
      }
    };
    // What the process holds once idle (settledRss), not what opening them left to collect.
    await open(Math.ceil(options.sessions / 2));
    const before = await settledRss(pid);
    await open(options.sessions);
    const after = await settledRss(pid);
    return {
      connections: options.connections,
      listDelayMs: options.listDelayMs,
      list: {
        direct: median(rounds.listDirect),
        fanOut: median(rounds.listFanOut),
        portal: median(rounds.listPortal),
      },
      call: {
        direct: median(rounds.callDirect),
        gateway: median(rounds.callGateway),
        relay: median(rounds.callRelay),
        portal: median(rounds.callPortal),
      },
      idle: { sessions: options.sessions, connections: options.sessionConnections, before, after },
    };
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
}
