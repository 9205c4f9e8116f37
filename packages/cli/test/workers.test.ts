import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase } from '@keyway/test-support/postgres';
import { type BrokerProcess, bundleCli, startBrokerProcess } from '@keyway/test-support/processes';
import { afterAll, afterEach, describe, expect, inject, it } from 'vitest';
import { MAX_WORKERS, workersFromEnv } from '../src/workers.js';

const ROOT_KEY = 'workers-root-key-0123456789abcdefghijklmn';
const VAULT_KEY = 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8';
const dir = mkdtempSync(join(tmpdir(), 'keyway-workers-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A request on a connection of its own: the cluster's primary hands each to a worker in turn. */
function fresh(url: string, token: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false, headers: { authorization: `Bearer ${token}` } });
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function until(check: () => boolean): Promise<boolean> {
  for (let attempt = 0; attempt < 400 && !check(); attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return check();
}

/** The process ids the primary printed. */
const workerPids = (output: string) =>
  (/2 workers share the port \(process ids (\d+), (\d+)\)/.exec(output) ?? []).slice(1).map(Number);

/** `keyway serve` run to its end: exit code and everything printed. */
async function serveUntilExit(env: Record<string, string>) {
  const child = spawn(process.execPath, [await bundleCli(), 'serve'], {
    env: { PATH: process.env.PATH ?? '', PORT: '0', HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    text += chunk;
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    text += chunk;
  });
  const [code] = await once(child, 'exit');
  return { code, text };
}

describe('KEYWAY_WORKERS', () => {
  it('reads a whole number from 1 to 256, or auto for the CPUs', () => {
    expect(workersFromEnv({})).toBe(1);
    expect(workersFromEnv({ KEYWAY_WORKERS: '' })).toBe(1);
    expect(workersFromEnv({ KEYWAY_WORKERS: '3' })).toBe(3);
    expect(workersFromEnv({ KEYWAY_WORKERS: 'auto' }, () => 6)).toBe(6);
    expect(workersFromEnv({ KEYWAY_WORKERS: 'AUTO' }, () => 1000)).toBe(MAX_WORKERS);
    for (const text of ['0', '257', '2.5', '-1', 'two', '1e2']) {
      expect(() => workersFromEnv({ KEYWAY_WORKERS: text })).toThrow(
        `KEYWAY_WORKERS must be "auto" or a whole number from 1 to 256, not ${JSON.stringify(text)}`,
      );
    }
  });

  it('refuses an in-memory database, which the workers could not share, before forking', async () => {
    const { code, text } = await serveUntilExit({
      KEYWAY_WORKERS: '2',
      KEYWAY_DATABASE: ':memory:',
      KEYWAY_ROOT_KEY: ROOT_KEY,
    });
    expect(code).toBe(1);
    expect(text).toBe(
      'keyway: KEYWAY_WORKERS=2 needs a database every worker shares: a SQLite file or a postgres:// URL in KEYWAY_DATABASE, not :memory:\n',
    );
  });

  it('refuses a bad value with the variable named, before anything starts', async () => {
    const { code, text } = await serveUntilExit({ KEYWAY_WORKERS: 'many' });
    expect(code).toBe(1);
    expect(text).toBe(
      'keyway: KEYWAY_WORKERS must be "auto" or a whole number from 1 to 256, not "many"\n',
    );
  });
});

describe.each([
  {
    engine: 'SQLite file',
    database: async () => ({ url: join(dir, 'shared.sqlite'), drop: async () => {} }),
  },
  { engine: 'PostgreSQL database', database: () => createTestDatabase(inject('databaseUrl')) },
])('keyway serve with two workers on one $engine', ({ database }) => {
  const running: BrokerProcess[] = [];
  let drop = async () => {};
  afterEach(async () => {
    for (const broker of running.splice(0)) await broker.stop();
    await drop();
  });

  it('share the port, the tokens and the rate limits; a dead worker is replaced; SIGTERM stops all', async () => {
    const db = await database();
    drop = db.drop;
    const broker = await startBrokerProcess({
      KEYWAY_WORKERS: '2',
      KEYWAY_DATABASE: db.url,
      KEYWAY_RATE_LIMITS: 'auth=3/60',
      KEYWAY_METRICS_PORT: '0',
      ...(db.url.startsWith('postgres') ? { KEYWAY_VAULT_KEYS: VAULT_KEY } : {}),
    });
    running.push(broker);
    // The primary prints the workers' start lines, then its own: the last is the root key's.
    expect(await until(() => broker.output().includes('set KEYWAY_ROOT_KEY to keep them.'))).toBe(
      true,
    );
    const output = broker.output();
    // One worker's start lines, once; the generated root key once, reaching both workers.
    expect(output.match(/listening on/g)).toHaveLength(1);
    const [a, b] = workerPids(output) as [number, number];
    expect(a).not.toBe(b);
    expect([alive(a), alive(b)]).toEqual([true, true]);
    const rootKey = /KEYWAY_ROOT_KEY=(\S+)/.exec(output)?.[1] as string;
    expect(output.match(/KEYWAY_ROOT_KEY=/g)).toHaveLength(1);

    // Minted through one connection, read on eight more: whichever worker answers, it is there.
    const minted = await fetch(`${broker.url}/api/admin/tokens`, {
      method: 'POST',
      headers: { authorization: `Bearer ${rootKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'shared', scopes: ['acme'] }),
    });
    expect(minted.status).toBe(201);
    const { access_token: token } = (await minted.json()) as { access_token: string };
    const reads = [];
    for (let i = 0; i < 8; i++)
      reads.push(await fresh(`${broker.url}/api/admin/tokens/shared`, token));
    expect(reads.map((read) => read.status)).toEqual([200, 200, 200, 200, 200, 200, 200, 200]);

    // Both workers answered: each request log line names the worker's process.
    expect(
      await until(() => {
        const pids = new Set(
          [
            ...broker.output().matchAll(/"pid":(\d+),.*"route":"\/api\/admin\/tokens\/\{name\}"/g),
          ].map((match) => Number(match[1])),
        );
        return pids.has(a) && pids.has(b);
      }),
    ).toBe(true);

    // The metrics listener sums the workers: 9 requests answered in all.
    const metricsUrl = /Metrics at (\S+) \(every worker's\)/.exec(output)?.[1] as string;
    const metrics = await (await fetch(metricsUrl)).text();
    expect(metrics).toContain(
      'keyway_http_requests_total{route="/api/admin/tokens/{name}",method="GET",status="200"} 8',
    );
    expect(metrics).toContain(
      'keyway_http_requests_total{route="/api/admin/tokens",method="POST",status="201"} 1',
    );

    // A worker killed outright is replaced; the broker answers throughout.
    process.kill(a, 'SIGKILL');
    expect(
      await until(() =>
        broker.output().includes(`keyway: worker ${a} exited on SIGKILL; starting another`),
      ),
    ).toBe(true);
    expect(await until(() => (broker.output().match(/listening on/g) ?? []).length === 2)).toBe(
      true,
    );
    const again = [];
    for (let i = 0; i < 6; i++)
      again.push((await fresh(`${broker.url}/api/admin/tokens/shared`, token)).status);
    expect(again).toEqual([200, 200, 200, 200, 200, 200]);
    const answeredAfter = () =>
      new Set(
        [
          ...(broker.output().split('starting another')[1] ?? '').matchAll(
            /"pid":(\d+),.*"route":"\/api\/admin\/tokens\/\{name\}"/g,
          ),
        ].map((match) => Number(match[1])),
      );
    expect(await until(() => answeredAfter().size === 2)).toBe(true);
    const [c] = [...answeredAfter()].filter((pid) => pid !== b) as [number];
    expect([answeredAfter().has(b), c !== a, alive(c)]).toEqual([true, true, true]);

    // Three failures spread over the workers use up the address's limit in every one:
    // counted in the database, not by each worker alone.
    const failures = [];
    for (let i = 0; i < 3; i++)
      failures.push((await fresh(`${broker.url}/api/admin/tokens`, 'kw1_wrong')).status);
    expect(failures).toEqual([401, 401, 401]);
    const after = [];
    for (let i = 0; i < 4; i++)
      after.push((await fresh(`${broker.url}/api/admin/tokens/shared`, token)).status);
    expect(after).toEqual([429, 429, 429, 429]);

    // SIGTERM to the primary: every worker finishes and exits, then the primary, with 0.
    const exited = once(broker.child, 'exit');
    broker.child.kill('SIGTERM');
    const [code] = await exited;
    expect(code).toBe(0);
    expect([alive(b), alive(c)]).toEqual([false, false]);
  });
});
