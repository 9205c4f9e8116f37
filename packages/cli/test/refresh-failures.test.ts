import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase } from '@keyway/test-support/postgres';
import { type BrokerProcess, startBrokerProcess } from '@keyway/test-support/processes';
import type Provider from 'oidc-provider';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Browser, callApi, close, listen, oidcProvider, serveMcp } from './peers.js';

/*
 * A refresh is single-flight across every process whether it succeeds or fails (docs/api.md
 * §5, docs/operations.md "Running several instances"): against stock oidc-provider, which
 * rotates refresh tokens and revokes the grant when a consumed one is presented again, one
 * request reaches its token endpoint per expiry, per failure and per takeover, and one event
 * records each failure — on three `keyway serve` processes over one PostgreSQL, and on one
 * SQLite file shared by `KEYWAY_WORKERS=2`. Requests and events are counted, never timed.
 */

const ROOT_KEY = 'refresh-failures-root-key-0123456789abcd';
const VAULT_KEY = 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8';
/**
 * Access tokens of three seconds: a storm waits for them to expire. With a refresh margin of
 * 0.1 s, the token a storm's refresh brings is due again only after 2.9 s, however slowly
 * a busy machine serves the storm's 80 callers (with the default margin, half the lifetime,
 * a storm slower than 1.5 s saw two expiries and two refreshes).
 */
const TTL = 3;
const BASE = 'http://localhost:8787';
const dir = mkdtempSync(join(tmpdir(), 'keyway-refresh-failures-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The client end of a held request: its port, and the server's port it is connected to. */
type Peer = { port: number; serverPort: number };

/**
 * The process on this machine that holds the loopback TCP connection from `peer.port` to
 * `peer.serverPort`: how the test tells which instance sent the refresh it holds (Linux's
 * /proc). Matched on both ports and on the established state: the same ephemeral port may
 * at once be another process's connection to another server, or an earlier connection in
 * TIME_WAIT (listed with inode 0) on a machine that has run many.
 */
function pidOfClient(peer: Peer): number | null {
  const hex = (port: number) => `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  const inodes = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const [, local, remote, state, , , , , , inode] = line.trim().split(/\s+/);
      if (
        local?.endsWith(hex(peer.port)) &&
        remote?.endsWith(hex(peer.serverPort)) &&
        state === '01' &&
        inode !== undefined &&
        inode !== '0'
      ) {
        inodes.add(`socket:[${inode}]`);
      }
    }
  }
  if (inodes.size === 0) return null;
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        if (inodes.has(readlinkSync(`/proc/${pid}/fd/${fd}`))) return Number(pid);
      } catch {}
    }
  }
  return null;
}

/** Who sent a request: its client port and the port it reached. */
const peerOf = (req: IncomingMessage): Peer => ({
  port: req.socket.remotePort ?? 0,
  serverPort: req.socket.localPort ?? 0,
});

/** What happens to the next refresh request at the token endpoint. */
type Gate =
  | null
  /** Held before oidc-provider sees it: never processed. */
  | { kind: 'request'; held: (req: IncomingMessage, res: ServerResponse) => void }
  /** Processed (the refresh token rotated), its answer held back: lost with its sender. */
  | { kind: 'answer'; held: (req: IncomingMessage) => void };

/** oidc-provider behind a counting, gating front; an MCP server from the SDK. */
async function peers() {
  const asServer = createServer();
  const issuer = await listen(asServer);
  const mcpHttp = createServer();
  const resourceUrl = `${await listen(mcpHttp)}/mcp`;
  const provider: Provider = oidcProvider(issuer, () => resourceUrl, {
    accessTokenTTL: TTL,
    accessTokenFormat: 'jwt',
  });
  const counts = { tokenRequests: 0 };
  let gate: Gate = null;
  /** The grant of each refresh token oidc-provider issued, to revoke one at the server. */
  const grants: string[] = [];
  provider.on('grant.success', (ctx: { oidc: { entities: { Grant?: { jti: string } } } }) => {
    const grant = ctx.oidc.entities.Grant?.jti;
    if (grant !== undefined) grants.push(grant);
  });
  const callback = provider.callback();
  asServer.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (req.method === 'POST' && req.url === '/token') {
      counts.tokenRequests++;
      const current = gate;
      if (current?.kind === 'request') {
        gate = null;
        current.held(req, res);
        return;
      }
      if (current?.kind === 'answer') {
        gate = null;
        // oidc-provider processes the refresh (it rotates the token) and writes its answer,
        // which is never sent: the holder is told of it once it is lost.
        res.writeHead = (() => res) as typeof res.writeHead;
        res.end = (() => {
          current.held(req);
          return res;
        }) as typeof res.end;
      }
    }
    callback(req, res);
  });
  serveMcp(mcpHttp, {
    issuer,
    resourceUrl,
    name: 'refresh-failures-mcp',
    version: '1.0.0',
    echo: (text) => `echo: ${text}`,
  });
  return {
    issuer,
    resourceUrl,
    provider,
    counts,
    grants,
    /** Holds the next refresh request as `kind` says; resolves with the port it came from. */
    hold(kind: 'request' | 'answer') {
      return new Promise<{ peer: Peer; drop: () => void }>((resolve) => {
        gate =
          kind === 'request'
            ? {
                kind,
                held: (req) => resolve({ peer: peerOf(req), drop: () => req.destroy() }),
              }
            : {
                kind,
                held: (req) => resolve({ peer: peerOf(req), drop: () => {} }),
              };
      });
    },
    async close() {
      await close(mcpHttp);
      await close(asServer);
    },
  };
}

/** The deployments under test: their URLs to call, how to add or replace an instance. */
interface Deployment {
  urls(): string[];
  /** Kills the process `pid` outright, and waits until the deployment serves again. */
  kill(pid: number): Promise<void>;
  stop(): Promise<void>;
}

const ENGINES = [
  {
    name: 'three keyway serve processes over one PostgreSQL',
    async start(env: Record<string, string>): Promise<Deployment> {
      const db = await createTestDatabase(inject('databaseUrl'));
      const shared = { ...env, KEYWAY_DATABASE: db.url };
      const processes: BrokerProcess[] = await Promise.all(
        [0, 1, 2].map(() => startBrokerProcess(shared)),
      );
      return {
        urls: () => processes.map((process) => process.url),
        async kill(pid) {
          const index = processes.findIndex((process) => process.child.pid === pid);
          expect(index).toBeGreaterThanOrEqual(0);
          process.kill(pid, 'SIGKILL');
          await new Promise((resolve) => processes[index]?.child.once('exit', resolve));
          // A new instance takes its place, as an orchestrator would start one.
          processes[index] = await startBrokerProcess(shared);
        },
        async stop() {
          for (const broker of processes) await broker.stop();
          await db.drop();
        },
      };
    },
  },
  {
    name: 'KEYWAY_WORKERS=2 over one SQLite file',
    async start(env: Record<string, string>): Promise<Deployment> {
      const broker = await startBrokerProcess({
        ...env,
        KEYWAY_WORKERS: '2',
        KEYWAY_DATABASE: join(dir, `workers-${Date.now()}.sqlite`),
      });
      const started = () => (broker.output().match(/listening on/g) ?? []).length;
      return {
        urls: () => [broker.url, broker.url, broker.url],
        async kill(pid) {
          const before = started();
          process.kill(pid, 'SIGKILL');
          // The primary starts another worker in its place.
          for (let i = 0; i < 400 && started() === before; i++) await sleep(25);
          expect(started()).toBe(before + 1);
        },
        stop: () => broker.stop(),
      };
    },
  },
];

describe.each(ENGINES)('a refresh that fails is single-flight too: $name', (engine) => {
  let world: Awaited<ReturnType<typeof peers>>;
  let deployment: Deployment;
  const url = (i: number) => deployment.urls()[i % 3] as string;
  const api = (i: number, method: string, path: string, body?: unknown) =>
    callApi(url(i), ROOT_KEY, method, path, body);

  beforeAll(async () => {
    world = await peers();
    deployment = await engine.start({
      KEYWAY_ROOT_KEY: ROOT_KEY,
      KEYWAY_VAULT_KEYS: VAULT_KEY,
      KEYWAY_ALLOWED_HOSTS: '127.0.0.1',
      // Behind a load balancer every instance has the same public base URL.
      KEYWAY_BASE_URL: BASE,
      // A dead holder's lease runs out in five seconds. A live holder renews it every third of
      // that: 1.5 s lapsed on a 2-core machine running two test files at once.
      KEYWAY_REFRESH_LEASE_MS: '5000',
      KEYWAY_REFRESH_MARGIN_MS: '100',
      KEYWAY_LOG_LEVEL: 'silent',
    });
    const created = await api(0, 'PUT', '/api/admin/providers/mcp', {
      template: 'mcp',
      configuration: { resource_url: world.resourceUrl },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
  });

  afterAll(async () => {
    await deployment?.stop();
    await world?.close();
  });

  /** A new connection, consented at oidc-provider; the callback lands on instance 1. */
  async function connect(connectionId: string): Promise<void> {
    const started = await api(0, 'POST', '/api/oauth/authorize/mcp', {
      connection_id: connectionId,
    });
    expect(started.status).toBe(201);
    const back = await new Browser().consent(
      started.body.authorization_url,
      `${BASE}/api/oauth/callback`,
    );
    const path = new URL(back);
    const landed = await fetch(`${url(1)}${path.pathname}${path.search}`);
    expect(await landed.text()).toContain('Connected');
  }

  /** Events of one type on one connection, as the audit log holds them. */
  async function events(type: string, connectionId: string): Promise<number> {
    const log = await api(0, 'GET', `/api/admin/audit?type=${type}&prefix=${connectionId}`);
    expect(log.status).toBe(200);
    return log.body.items.length;
  }

  const credentials = (i: number, id: string, force = false) =>
    api(i, 'GET', `/api/oauth/credentials/${id}${force ? '?force_refresh=true' : ''}`);

  const toolCall = async (i: number, id: string) => {
    const response = await fetch(`${url(i)}/mcp/${id}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${ROOT_KEY}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: i,
        method: 'tools/call',
        params: { name: 'echo', arguments: { text: `call ${i}` } },
      }),
    });
    const body = (await response.json()) as { result?: { content: { text: string }[] } };
    return { status: response.status, text: body.result?.content[0]?.text ?? null };
  };

  it('sends one refresh per expiry for 80 callers (credentials and gateway calls) on every process', async () => {
    const id = 'acme/storm/mcp';
    await connect(id);
    for (let storm = 1; storm <= 2; storm++) {
      await sleep(TTL * 1000 + 200); // every caller comes after the token expired
      const before = world.counts.tokenRequests;
      const reads = Array.from({ length: 60 }, (_, i) => credentials(i, id));
      const calls = Array.from({ length: 20 }, (_, i) => toolCall(i, id));
      const answers = await Promise.all(reads);
      const called = await Promise.all(calls);
      expect(answers.map((answer) => answer.status)).toEqual(Array(60).fill(200));
      expect(new Set(answers.map((answer) => answer.body.access_token)).size).toBe(1);
      expect(called).toEqual(
        Array.from({ length: 20 }, (_, i) => ({ status: 200, text: `echo: call ${i}` })),
      );
      expect(world.counts.tokenRequests - before).toBe(1);
      expect(await events('connection.refreshed', id)).toBe(storm);
    }
    expect(await events('connection.reauthorization_required', id)).toBe(0);
  });

  it('presents a refresh token the server revoked once, and records one failure, on every process', async () => {
    const id = 'acme/revoked/mcp';
    await connect(id);
    // The user revokes the grant at the server.
    const grant = await world.provider.Grant.find(world.grants.at(-1) as string);
    await grant?.destroy();
    await sleep(TTL * 1000 + 200);
    const before = world.counts.tokenRequests;
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => credentials(i, id)));
    expect(answers.map((answer) => answer.status)).toEqual(Array(30).fill(409));
    for (const answer of answers) {
      expect(['reauthorization_required', 'connection_not_active']).toContain(answer.body.error);
    }
    expect(world.counts.tokenRequests - before).toBe(1);
    expect(await events('connection.reauthorization_required', id)).toBe(1);
    // Later callers read the verdict too: nothing more goes to the server.
    const later = await Promise.all(Array.from({ length: 6 }, (_, i) => credentials(i, id, true)));
    expect(later.map((answer) => answer.status)).toEqual(Array(6).fill(409));
    expect(world.counts.tokenRequests - before).toBe(1);
    expect(await events('connection.reauthorization_required', id)).toBe(1);
    const view = await api(0, 'GET', `/api/oauth/connections/${id}`);
    expect(view.body).toMatchObject({ status: 'error', error: { code: 'invalid_grant' } });
  });

  it('takes over from a holder killed before the server saw its refresh: nothing revoked', async () => {
    const id = 'acme/killed-early/mcp';
    await connect(id);
    const held = world.hold('request');
    const first = credentials(0, id, true).catch(() => null);
    const { peer, drop } = await held;
    const holder = pidOfClient(peer);
    expect(holder).not.toBeNull();
    await deployment.kill(holder as number);
    drop();
    await first;
    const before = world.counts.tokenRequests;
    // Callers that must have a new token wait for the dead holder's lease, then one takes over.
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) => credentials(i, id, true)),
    );
    expect(answers.map((answer) => answer.status)).toEqual(Array(12).fill(200));
    expect(world.counts.tokenRequests - before).toBe(1);
    expect(new Set(answers.map((answer) => answer.body.access_token)).size).toBe(1);
    // The grant is intact: the next refresh works.
    expect((await credentials(2, id, true)).status).toBe(200);
    expect(await events('connection.reauthorization_required', id)).toBe(0);
  });

  it('records a refresh whose answer was lost once: one more request, one failure', async () => {
    const id = 'acme/answer-lost/mcp';
    await connect(id);
    const held = world.hold('answer');
    const first = credentials(1, id, true).catch(() => null);
    const { peer } = await held;
    const holder = pidOfClient(peer);
    expect(holder).not.toBeNull();
    // oidc-provider rotated the refresh token; its answer never reaches the holder.
    await deployment.kill(holder as number);
    await first;
    const before = world.counts.tokenRequests;
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) => credentials(i, id, true)),
    );
    expect(answers.map((answer) => answer.status)).toEqual(Array(12).fill(409));
    // The instance that took over presented the consumed token once (the server then revoked
    // the grant, as reuse detection does); every other caller read its verdict.
    expect(world.counts.tokenRequests - before).toBe(1);
    expect(await events('connection.reauthorization_required', id)).toBe(1);
  });
});
