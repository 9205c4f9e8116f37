import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateVaultKey } from '@keyway/core';
import pg from 'pg';
import { afterAll, afterEach, describe, expect, inject, it } from 'vitest';
import {
  generateRootKey,
  type RunningServer,
  type ServeOptions,
  serve,
  serveOptionsFromEnv,
} from '../src/index.js';
import { baseUrlMismatch } from '../src/serve.js';

const dir = mkdtempSync(join(tmpdir(), 'keyway-cli-'));
let files = 0;
const database = () => join(dir, `serve-${++files}.sqlite`);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ROOT_KEY = 'cli-test-root-key-0123456789abcdefghijkl';
/** `keyway serve` on the test server's PostgreSQL at `url`, with a vault key. */
const servePostgres = (url: URL, options: Partial<ServeOptions>) =>
  serve({
    port: 0,
    rootKey: ROOT_KEY,
    database: url.toString(),
    vaultKeys: ['AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8'],
    ...options,
  });

/** No banner and no request log: what these tests check is elsewhere. */
const QUIET = { log: () => {}, logLevel: 'silent' } as const;

describe('serve()', () => {
  let running: RunningServer | undefined;

  afterEach(async () => {
    await running?.close();
    running = undefined;
  });

  it('serves the token endpoints over HTTP with the configured root key', async () => {
    const lines: string[] = [];
    running = await serve({
      port: 0,
      rootKey: ROOT_KEY,
      database: database(),
      log: (line) => lines.push(line),
    });
    const minted = await fetch(`${running.url}/api/admin/tokens`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ROOT_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'smoke', scopes: ['acme'] }),
    });
    expect(minted.status).toBe(201);
    const { access_token } = (await minted.json()) as { access_token: string };
    const listed = await fetch(`${running.url}/api/admin/tokens`, {
      headers: { authorization: `Bearer ${access_token}` },
    });
    expect(listed.status).toBe(200);
    expect(lines.join('\n')).not.toContain(ROOT_KEY);
    expect(running.generatedRootKey).toBe(false);
    // The banner names the base URL the callback uses, where the inspector must be opened.
    const port = new URL(running.url).port;
    expect(lines.filter((line) => line.startsWith('Base URL'))).toEqual([
      `Base URL http://localhost:${port}: the inspector is http://localhost:${port}/inspector, OAuth callbacks return to http://localhost:${port}`,
    ]);
    expect(lines.filter((line) => line.startsWith('Warning'))).toEqual([]);
  });

  it('warns when a loopback base URL is on another port than the broker', async () => {
    const lines: string[] = [];
    running = await serve({
      port: 0,
      rootKey: ROOT_KEY,
      database: database(),
      baseUrl: 'http://localhost:9',
      log: (line) => lines.push(line),
    });
    const port = Number(new URL(running.url).port);
    expect(lines.filter((line) => line.startsWith('Warning'))).toEqual([
      `Warning: KEYWAY_BASE_URL is http://localhost:9, but the broker listens on port ${port}: a browser sent back to http://localhost:9 never reaches it (set KEYWAY_BASE_URL=http://localhost:${port}, or PORT=9)`,
    ]);
  });

  it('does not warn when the base URL answers: instances behind one shared URL', async () => {
    // A load balancer (here, any listener) in front of the instances at the shared URL.
    const shared = createServer((_req, res) => res.writeHead(200).end('{"status":"ok"}'));
    shared.listen(0, '127.0.0.1');
    await once(shared, 'listening');
    const sharedPort = (shared.address() as AddressInfo).port;
    const lines: string[] = [];
    try {
      running = await serve({
        port: 0,
        rootKey: ROOT_KEY,
        database: database(),
        baseUrl: `http://localhost:${sharedPort}`,
        log: (line) => lines.push(line),
      });
    } finally {
      shared.close();
    }
    expect(lines.filter((line) => line.startsWith('Warning'))).toEqual([]);
    expect(lines).toContain(
      `Base URL http://localhost:${sharedPort} is served by another listener (a proxy, or the instances' shared address): callbacks return through it`,
    );
  });

  it('tells a loopback base URL on another port from one behind a proxy', () => {
    expect(baseUrlMismatch('http://localhost:8787', 8787)).toBeNull();
    expect(baseUrlMismatch('http://127.0.0.1:8787/keyway', 8787)).toBeNull();
    expect(baseUrlMismatch('https://keyway.example.com', 8787)).toBeNull();
    expect(baseUrlMismatch('http://[::1]:3000', 8787)).toBe(
      'KEYWAY_BASE_URL is http://[::1]:3000, but the broker listens on port 8787: a browser sent back to http://[::1]:3000 never reaches it (set KEYWAY_BASE_URL=http://localhost:8787, or PORT=3000)',
    );
    expect(baseUrlMismatch('https://localhost', 8787)).toBe(
      'KEYWAY_BASE_URL is https://localhost, but the broker listens on port 8787: a browser sent back to https://localhost never reaches it (set KEYWAY_BASE_URL=http://localhost:8787, or PORT=443)',
    );
  });

  it('generates a root key when none is set, prints it once, and accepts it', async () => {
    const lines: string[] = [];
    running = await serve({ port: 0, database: ':memory:', log: (line) => lines.push(line) });
    const printed = lines.join('\n').match(/KEYWAY_ROOT_KEY=(\S+)/)?.[1] as string;
    expect(printed).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(lines.filter((line) => line.includes(printed))).toHaveLength(1);
    const reply = await fetch(`${running.url}/api/admin/tokens`, {
      headers: { authorization: `Bearer ${printed}` },
    });
    expect(reply.status).toBe(200);
  });

  it('keeps tokens in the SQLite file across restarts with the same root key', async () => {
    const file = database();
    running = await serve({ port: 0, rootKey: ROOT_KEY, database: file, ...QUIET });
    const minted = await fetch(`${running.url}/api/admin/tokens`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ROOT_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'durable', scopes: ['acme'] }),
    });
    const { access_token } = (await minted.json()) as { access_token: string };
    await running.close();
    running = await serve({ port: 0, rootKey: ROOT_KEY, database: file, ...QUIET });
    const read = await fetch(`${running.url}/api/admin/tokens/durable`, {
      headers: { authorization: `Bearer ${access_token}` },
    });
    expect(read.status).toBe(200);
  });

  it('serves on PostgreSQL and never logs the password of its URL', async () => {
    const url = new URL(inject('databaseUrl'));
    url.password = 'hunter2-secret'; // the test server trusts loopback, so any password works
    const lines: string[] = [];
    running = await servePostgres(url, { log: (line) => lines.push(line) });
    expect(lines[0]).toMatch(
      /^Keyway broker listening on http:\/\/127\.0\.0\.1:\d+ \(storage: postgres postgres:\/\/keyway:\*\*\*@127\.0\.0\.1:\d+\/postgres\)$/,
    );
    expect(lines.join('\n')).not.toContain('hunter2-secret');
  });

  it('keeps a generated vault key beside the SQLite file, owner-only, and reuses it', async () => {
    const file = database();
    const lines: string[] = [];
    running = await serve({
      port: 0,
      rootKey: ROOT_KEY,
      database: file,
      log: (l) => lines.push(l),
    });
    const put = await fetch(`${running.url}/api/vault/secrets/acme/k`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${ROOT_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ value: 'kept' }),
    });
    expect(put.status).toBe(201);
    await running.close();
    expect(statSync(`${file}.vault-keys`).mode & 0o777).toBe(0o600);
    expect(lines.some((line) => line.includes('.vault-keys'))).toBe(true);
    running = await serve({ port: 0, rootKey: ROOT_KEY, database: file, ...QUIET });
    const read = await fetch(`${running.url}/api/vault/secrets/acme/k`, {
      headers: { authorization: `Bearer ${ROOT_KEY}` },
    });
    expect(((await read.json()) as { value: string }).value).toBe('kept');
  });

  it('turns provider management on by default, serves the client metadata document, and can turn it off', async () => {
    running = await serve({ port: 0, rootKey: ROOT_KEY, database: ':memory:', ...QUIET });
    const auth = { authorization: `Bearer ${ROOT_KEY}` };
    expect((await fetch(`${running.url}/api/admin/providers`, { headers: auth })).status).toBe(200);
    const document = await fetch(`${running.url}/api/oauth/client-metadata.json`);
    const body = (await document.json()) as { redirect_uris: string[]; application_type: string };
    // The default base URL names localhost (docs/api.md §0); the server listens on 127.0.0.1.
    const port = new URL(running.url).port;
    expect(running.url).toBe(`http://127.0.0.1:${port}`);
    expect(body.redirect_uris).toEqual([`http://localhost:${port}/api/oauth/callback`]);
    expect(body.application_type).toBe('native');
    await running.close();
    running = await serve({
      port: 0,
      rootKey: ROOT_KEY,
      database: ':memory:',
      providerManagement: false,
      baseUrl: 'https://keyway.example.test',
      ...QUIET,
    });
    const off = await fetch(`${running.url}/api/admin/providers`, { headers: auth });
    expect(off.status).toBe(403);
    expect(((await off.json()) as { error: string }).error).toBe('provider_management_disabled');
    const moved = (await (await fetch(`${running.url}/api/oauth/client-metadata.json`)).json()) as {
      client_id: string;
    };
    expect(moved.client_id).toBe('https://keyway.example.test/api/oauth/client-metadata.json');
  });

  it('stays up when PostgreSQL ends its idle connections, logs it, and serves the next request', async () => {
    // Its own application name, so that only this server's connections are ended.
    const name = `keyway-idle-${process.pid}-${Date.now()}`;
    const url = new URL(inject('databaseUrl'));
    url.searchParams.set('application_name', name);
    const lines: string[] = [];
    running = await servePostgres(url, {
      log: () => {},
      logDestination: { write: (line: string) => void lines.push(line) },
    });
    const read = () =>
      fetch(`${running?.url}/api/admin/tokens?limit=1`, {
        headers: { authorization: `Bearer ${ROOT_KEY}` },
      });
    expect((await read()).status).toBe(200);
    const admin = new pg.Client({ connectionString: inject('databaseUrl') });
    await admin.connect();
    try {
      const ended = await admin.query(
        'SELECT count(*)::int AS ended FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1) AS t',
        [name],
      );
      expect((ended.rows[0] as { ended: number }).ended).toBeGreaterThan(0);
    } finally {
      await admin.end();
    }
    const deadline = Date.now() + 10_000;
    while (!lines.some((line) => line.includes('ended an idle connection'))) {
      if (Date.now() > deadline)
        throw new Error(`no log line of the ended connection: ${lines.join('')}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const logged = JSON.parse(
      lines.find((line) => line.includes('ended an idle connection')) as string,
    ) as { level: string; msg: string; err: Record<string, string> };
    expect(logged.level).toBe('error');
    // The error's own type and nothing node-postgres hangs on it (its client, its parameters).
    expect(Object.keys(logged.err).sort()).toEqual(['message', 'stack', 'type']);
    expect(logged.err.type).toBe('DatabaseError');
    expect(logged.msg).toBe(
      'the database ended an idle connection (a restart or a failover?); the next query opens another',
    );
    expect(logged.err.message).toBe('terminating connection due to administrator command');
    expect((await read()).status).toBe(200);
  });

  it('names KEYWAY_DATABASE, without its password, when the database cannot be reached', async () => {
    // A port nothing listens on: taken, then given back.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const { port } = probe.address() as AddressInfo;
    await new Promise((resolve) => probe.close(resolve));
    const url = new URL(`postgres://keyway:hunter2-secret@127.0.0.1:${port}/postgres`);
    const failed = await servePostgres(url, QUIET).then(
      () => new Error('it started'),
      (error: Error) => error,
    );
    expect(failed.message).toBe(
      `KEYWAY_DATABASE (postgres postgres://keyway:***@127.0.0.1:${port}/postgres) cannot be opened: ` +
        `connect ECONNREFUSED 127.0.0.1:${port}`,
    );
  });

  it('names KEYWAY_DATABASE when its SQLite file cannot be opened, and where its vault key would go', async () => {
    const missing = join(dir, 'no-such-directory', 'keyway.sqlite');
    await expect(
      serve({ port: 0, rootKey: ROOT_KEY, database: missing, ...QUIET }),
    ).rejects.toThrow(
      new Error(
        `KEYWAY_DATABASE (sqlite ${missing}): its vault key file ${missing}.vault-keys cannot be written ` +
          '(ENOENT): create the directory, let this user write there, or set KEYWAY_VAULT_KEYS',
      ),
    );
    await expect(
      serve({
        port: 0,
        rootKey: ROOT_KEY,
        database: missing,
        vaultKeys: ['AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8'],
        ...QUIET,
      }),
    ).rejects.toThrow(
      new Error(
        `KEYWAY_DATABASE (sqlite ${missing}) cannot be opened: Cannot open database because the directory does not exist`,
      ),
    );
  });

  it('names PORT and HOST when it cannot listen, with what to do', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const { port } = taken.address() as AddressInfo;
    try {
      await expect(
        serve({ port, rootKey: ROOT_KEY, database: ':memory:', ...QUIET }),
      ).rejects.toThrow(
        new Error(
          `cannot listen on HOST 127.0.0.1, PORT ${port} (EADDRINUSE): another process listens there: ` +
            'stop it, or set another PORT',
        ),
      );
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
    // 192.0.2.1 (TEST-NET-1, RFC 5737) is no address of this machine.
    await expect(
      serve({ port: 0, host: '192.0.2.1', rootKey: ROOT_KEY, database: ':memory:', ...QUIET }),
    ).rejects.toThrow(
      new Error(
        'cannot listen on HOST 192.0.2.1, PORT 0 (EADDRNOTAVAIL): HOST is not an address of this machine: ' +
          'set one of its addresses, or 0.0.0.0',
      ),
    );
  });

  it('will not start on a vault sealed with keys it was not given, and says which and what to do', async () => {
    const idOf = (key: string) =>
      createHash('sha256')
        .update(Buffer.from(key, 'base64url'))
        .digest()
        .subarray(0, 9)
        .toString('base64url');
    const [first, second] = [generateVaultKey(), generateVaultKey()];
    const putSecret = async (base: string) => {
      const put = await fetch(`${base}/api/vault/secrets/acme/k`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${ROOT_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ value: 'kept' }),
      });
      expect(put.status).toBe(201);
    };
    // Keys given in KEYWAY_VAULT_KEYS.
    const file = database();
    running = await serve({
      port: 0,
      rootKey: ROOT_KEY,
      database: file,
      vaultKeys: [first],
      ...QUIET,
    });
    await putSecret(running.url);
    await running.close();
    running = undefined;
    await expect(
      serve({ port: 0, rootKey: ROOT_KEY, database: file, vaultKeys: [second], ...QUIET }),
    ).rejects.toThrow(
      new Error(
        `the vault holds entries sealed with keys that KEYWAY_VAULT_KEYS does not hold (1 under key id ${idOf(first)}), ` +
          'which no request could open: give back the keys they were sealed with, after the one that encrypts ' +
          '(`keyway vault rewrap` then moves them onto it)',
      ),
    );
    // A rotation under way (the new key first, the old one kept) starts, and reads.
    running = await serve({
      port: 0,
      rootKey: ROOT_KEY,
      database: file,
      vaultKeys: [second, first],
      ...QUIET,
    });
    const read = await fetch(`${running.url}/api/vault/secrets/acme/k`, {
      headers: { authorization: `Bearer ${ROOT_KEY}` },
    });
    expect(((await read.json()) as { value: string }).value).toBe('kept');
    await running.close();
    running = undefined;
    // The key kept beside a SQLite database, replaced by another.
    const kept = database();
    running = await serve({ port: 0, rootKey: ROOT_KEY, database: kept, ...QUIET });
    await putSecret(running.url);
    await running.close();
    running = undefined;
    const original = readFileSync(`${kept}.vault-keys`, 'utf8').trim();
    writeFileSync(`${kept}.vault-keys`, `${second}\n`);
    await expect(serve({ port: 0, rootKey: ROOT_KEY, database: kept, ...QUIET })).rejects.toThrow(
      new Error(
        `the vault holds entries sealed with keys that ${kept}.vault-keys does not hold (1 under key id ${idOf(original)}), ` +
          'which no request could open: restore that file from the backup taken with the database, or set ' +
          'KEYWAY_VAULT_KEYS to the keys they were sealed with',
      ),
    );
  });

  it('requires KEYWAY_VAULT_KEYS with PostgreSQL', async () => {
    await expect(
      serve({ port: 0, rootKey: ROOT_KEY, database: inject('databaseUrl'), ...QUIET }),
    ).rejects.toThrow('KEYWAY_VAULT_KEYS must be set with PostgreSQL');
  });

  it('refuses a root key of low entropy at start, saying how to generate one', async () => {
    await expect(
      serve({ port: 0, rootKey: 'a'.repeat(32), database: ':memory:', ...QUIET }),
    ).rejects.toThrow('generate one with `openssl rand -base64 32`');
  });

  it('listens on 127.0.0.1 by default, with explicit timeouts and a connection cap', async () => {
    running = await serve({ port: 0, rootKey: ROOT_KEY, database: ':memory:', ...QUIET });
    expect((running.server.address() as AddressInfo).address).toBe('127.0.0.1');
    expect(running.server.headersTimeout).toBe(10_000);
    expect(running.server.requestTimeout).toBe(30_000);
    expect(running.server.keepAliveTimeout).toBe(5_000);
    expect(running.server.maxConnections).toBe(1_000);
    await running.close();
    running = await serve({
      port: 0,
      host: '::1',
      rootKey: ROOT_KEY,
      database: ':memory:',
      ...QUIET,
      limits: { headersTimeoutMs: 2_000, maxConnections: 2 },
    });
    expect(running.url).toMatch(/^http:\/\/\[::1\]:\d+$/);
    expect(running.server.headersTimeout).toBe(2_000);
    expect(running.server.maxConnections).toBe(2);
  });

  it('drops a client that sends its headers too slowly', async () => {
    running = await serve({
      port: 0,
      rootKey: ROOT_KEY,
      database: ':memory:',
      ...QUIET,
      limits: { headersTimeoutMs: 1_000, requestTimeoutMs: 1_000 },
    });
    const port = new URL(running.url).port;
    const socket = connect(Number(port), '127.0.0.1');
    await once(socket, 'connect');
    socket.write('GET /api/admin/tokens HTTP/1.1\r\nHost: x\r\n');
    let answer = '';
    socket.setEncoding('utf8').on('data', (chunk: string) => {
      answer += chunk;
    });
    await once(socket, 'close');
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
  });

  it('answers a body it will not read without asking for it (Expect: 100-continue), and asks for one it reads', async () => {
    running = await serve({ port: 0, rootKey: ROOT_KEY, database: ':memory:', ...QUIET });
    const port = Number(new URL(running.url).port);
    /** Sends the head of a mint that expects `100 Continue`; the answer as it comes. */
    const expecting = async (token: string, length: number) => {
      const socket = connect(port, '127.0.0.1');
      await once(socket, 'connect');
      const seen = { socket, answer: '' };
      socket.setEncoding('utf8').on('data', (chunk: string) => {
        seen.answer += chunk;
      });
      socket.write(
        `POST /api/admin/tokens HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${length}\r\nExpect: 100-continue\r\n\r\n`,
      );
      return seen;
    };
    // RFC 9110 §10.1.1: a final status the head decides goes at once, with no 100 before it.
    const tooLarge = await expecting(ROOT_KEY, 2 * 1024 * 1024);
    await expect.poll(() => tooLarge.answer.endsWith('0\r\n\r\n')).toBe(true);
    expect(tooLarge.answer.split('\r\n')[0]).toBe('HTTP/1.1 413 Payload Too Large');
    expect(tooLarge.answer.toLowerCase()).toContain('\r\nconnection: close\r\n');
    tooLarge.socket.destroy();
    const forged = await expecting(`kw1_${'A'.repeat(60)}`, 20);
    await expect.poll(() => forged.answer.endsWith('0\r\n\r\n')).toBe(true);
    expect(forged.answer.split('\r\n')[0]).toBe('HTTP/1.1 401 Unauthorized');
    forged.socket.destroy();
    // A body it reads is asked for when it reads it; the mint then goes as usual.
    const body = JSON.stringify({ name: 'expecting', scopes: ['acme'] });
    const minted = await expecting(ROOT_KEY, Buffer.byteLength(body));
    await expect.poll(() => minted.answer).toBe('HTTP/1.1 100 Continue\r\n\r\n');
    minted.socket.write(body);
    await expect.poll(() => minted.answer.endsWith('0\r\n\r\n')).toBe(true);
    expect(minted.answer.split('\r\n')[2]).toBe('HTTP/1.1 201 Created');
    expect(minted.answer).toContain('"name":"expecting"');
    minted.socket.destroy();
  });

  it('refuses a root key shorter than 32 characters', async () => {
    await expect(
      serve({ port: 0, rootKey: 'short', database: ':memory:', ...QUIET }),
    ).rejects.toThrow('"rootKey" must be at least 32 characters');
  });
});

describe('serveOptionsFromEnv()', () => {
  it('reads PORT, HOST and KEYWAY_ROOT_KEY', () => {
    expect(
      serveOptionsFromEnv({ PORT: '9000', HOST: '127.0.0.1', KEYWAY_ROOT_KEY: ROOT_KEY }),
    ).toEqual({
      port: 9000,
      host: '127.0.0.1',
      rootKey: ROOT_KEY,
    });
    expect(serveOptionsFromEnv({})).toEqual({});
    expect(serveOptionsFromEnv({ KEYWAY_VAULT_KEYS: 'k1, k2' })).toEqual({
      vaultKeys: ['k1', 'k2'],
    });
    expect(
      serveOptionsFromEnv({
        KEYWAY_CONNECT_FRAME_ANCESTORS: 'https://app.example.com, http://localhost:3000',
      }),
    ).toEqual({ connectFrameAncestors: ['https://app.example.com', 'http://localhost:3000'] });
  });

  it('reads KEYWAY_TRUST_PROXY, KEYWAY_RATE_LIMITS and the server limits', () => {
    expect(
      serveOptionsFromEnv({
        KEYWAY_TRUST_PROXY: 'true',
        KEYWAY_RATE_LIMITS: 'auth=5/30,mint=off',
        KEYWAY_HEADERS_TIMEOUT_MS: '5000',
        KEYWAY_REQUEST_TIMEOUT_MS: '20000',
        KEYWAY_KEEP_ALIVE_TIMEOUT_MS: '1000',
        KEYWAY_MAX_CONNECTIONS: '50',
      }),
    ).toEqual({
      trustProxy: true,
      rateLimits: { auth: { limit: 5, windowSeconds: 30 }, mint: false },
      limits: {
        headersTimeoutMs: 5000,
        requestTimeoutMs: 20000,
        keepAliveTimeoutMs: 1000,
        maxConnections: 50,
      },
    });
    expect(serveOptionsFromEnv({ KEYWAY_RATE_LIMITS: 'off' })).toEqual({ rateLimits: false });
    expect(serveOptionsFromEnv({ KEYWAY_RATE_LIMITS: 'on' })).toEqual({ rateLimits: {} });
    expect(() => serveOptionsFromEnv({ KEYWAY_RATE_LIMITS: 'auth=20' })).toThrow(
      'invalid rate limit "auth=20": use on, off, or auth=20/60,mint=60/60,discover=30/60,register=20/3600 (count per window in seconds, or name=off)',
    );
    expect(() => serveOptionsFromEnv({ KEYWAY_TRUST_PROXY: 'yes' })).toThrow(
      'KEYWAY_TRUST_PROXY must be "true" or "false"',
    );
    expect(() => serveOptionsFromEnv({ KEYWAY_MAX_CONNECTIONS: '0' })).toThrow(
      'KEYWAY_MAX_CONNECTIONS must be an integer from 1 to 1000000, not "0"',
    );
    expect(() => serveOptionsFromEnv({ KEYWAY_HEADERS_TIMEOUT_MS: '1e4' })).toThrow(TypeError);
  });

  it('reads the portal’s settings from KEYWAY_AUDIT_TOOL_CALLS and KEYWAY_PORTAL_*, naming what is wrong', () => {
    expect(serveOptionsFromEnv({ KEYWAY_AUDIT_TOOL_CALLS: 'on' })).toEqual({
      portal: { auditToolCalls: true },
    });
    expect(
      serveOptionsFromEnv({
        KEYWAY_AUDIT_TOOL_CALLS: 'off',
        KEYWAY_PORTAL_LIST_DEADLINE_MS: '2000',
        KEYWAY_PORTAL_LIST_CACHE_MS: '0',
        KEYWAY_PORTAL_MAX_SESSIONS: '500',
      }),
    ).toEqual({
      portal: { auditToolCalls: false, listDeadlineMs: 2000, listCacheMs: 0, maxSessions: 500 },
    });
    expect(serveOptionsFromEnv({})).toEqual({});
    expect(() => serveOptionsFromEnv({ KEYWAY_AUDIT_TOOL_CALLS: 'yes' })).toThrow(
      'KEYWAY_AUDIT_TOOL_CALLS must be "on" or "off"',
    );
    expect(() => serveOptionsFromEnv({ KEYWAY_PORTAL_LIST_DEADLINE_MS: '50' })).toThrow(
      'KEYWAY_PORTAL_LIST_DEADLINE_MS must be an integer from 100 to 60000, not "50"',
    );
  });

  it('reads sign-in for MCP clients from KEYWAY_SIGN_IN and its companions, naming what is wrong', () => {
    expect(serveOptionsFromEnv({ KEYWAY_SIGN_IN: 'token' })).toEqual({
      signIn: { methods: ['token'] },
    });
    expect(
      serveOptionsFromEnv({
        KEYWAY_SIGN_IN: 'token, oidc',
        KEYWAY_SIGN_IN_ISSUER: 'https://login.example.com',
        KEYWAY_SIGN_IN_CLIENT_ID: 'keyway',
        KEYWAY_SIGN_IN_CLIENT_SECRET: 'secret-at-the-idp',
        KEYWAY_SIGN_IN_SCOPES: 'openid email',
        KEYWAY_SIGN_IN_NAMESPACE: 'acme/users/{sub}',
        KEYWAY_SIGN_IN_ACCESS_TTL: '30m',
        KEYWAY_SIGN_IN_GRANT_TTL: '7d',
      }),
    ).toEqual({
      signIn: {
        methods: ['token', 'oidc'],
        oidc: {
          issuer: 'https://login.example.com',
          clientId: 'keyway',
          clientSecret: 'secret-at-the-idp',
          scopes: ['openid', 'email'],
          namespace: 'acme/users/{sub}',
        },
        accessTokenTtl: 1800,
        grantTtl: 604_800,
      },
    });
    expect(
      serveOptionsFromEnv({ KEYWAY_SIGN_IN: 'token', KEYWAY_SIGN_IN_ACCESS_TTL: '600' }),
    ).toEqual({
      signIn: { methods: ['token'], accessTokenTtl: 600 },
    });
    expect(() => serveOptionsFromEnv({ KEYWAY_SIGN_IN: 'password' })).toThrow(
      'KEYWAY_SIGN_IN takes token and oidc, not "password"',
    );
    expect(() =>
      serveOptionsFromEnv({ KEYWAY_SIGN_IN_ISSUER: 'https://login.example.com' }),
    ).toThrow('KEYWAY_SIGN_IN_ISSUER is set, but KEYWAY_SIGN_IN is not: sign-in is off');
    expect(() =>
      serveOptionsFromEnv({
        KEYWAY_SIGN_IN: 'token',
        KEYWAY_SIGN_IN_NAMESPACE: 'acme/users/{sub}',
      }),
    ).toThrow('KEYWAY_SIGN_IN_NAMESPACE is set, but KEYWAY_SIGN_IN does not name oidc');
    expect(() =>
      serveOptionsFromEnv({ KEYWAY_SIGN_IN: 'token', KEYWAY_SIGN_IN_GRANT_TTL: 'soon' }),
    ).toThrow(/^KEYWAY_SIGN_IN_GRANT_TTL: /);
  });

  it('reads KEYWAY_ASSERTION_SOURCES, naming a bad entry', () => {
    expect(
      serveOptionsFromEnv({
        KEYWAY_ASSERTION_SOURCES:
          'k8s=file:/var/run/secrets/tokens/mcp, ci=env:CI_OIDC_TOKEN,tokens=directory:/run/keyway',
      }),
    ).toEqual({
      assertionSources: {
        k8s: { file: '/var/run/secrets/tokens/mcp' },
        ci: { env: 'CI_OIDC_TOKEN' },
        tokens: { directory: '/run/keyway' },
      },
    });
    expect(() => serveOptionsFromEnv({ KEYWAY_ASSERTION_SOURCES: 'k8s=/var/run/token' })).toThrow(
      new TypeError(
        'KEYWAY_ASSERTION_SOURCES: "k8s=/var/run/token" is not name=kind:value[;providers=ids] (kind file, directory, env; a name of lower case letters, digits, _ and -), e.g. k8s=file:/var/run/secrets/tokens/mcp;providers=acme/billing',
      ),
    );
    expect(() => serveOptionsFromEnv({ KEYWAY_ASSERTION_SOURCES: 'a=env:X,a=env:Y' })).toThrow(
      new TypeError('KEYWAY_ASSERTION_SOURCES: the source "a" is named twice'),
    );
  });

  it('reads the providers each assertion source serves, and refuses an empty list', () => {
    expect(
      serveOptionsFromEnv({
        KEYWAY_ASSERTION_SOURCES:
          'k8s=file:/var/run/secrets/tokens/mcp;providers=acme/billing acme/services/**,ci=env:CI',
      }),
    ).toEqual({
      assertionSources: {
        k8s: {
          file: '/var/run/secrets/tokens/mcp',
          providers: ['acme/billing', 'acme/services/**'],
        },
        ci: { env: 'CI' },
      },
    });
    expect(() =>
      serveOptionsFromEnv({ KEYWAY_ASSERTION_SOURCES: 'k8s=file:/token;providers=' }),
    ).toThrow(
      new TypeError(
        'KEYWAY_ASSERTION_SOURCES: the source "k8s" has an empty ";providers=": name the provider ids it serves, or leave it out',
      ),
    );
  });

  it('refuses a KEYWAY_ variable nothing reads, naming the nearest one', () => {
    expect(() => serveOptionsFromEnv({ KEYWAY_VAULT_KEY: 'k1' })).toThrow(
      new TypeError(
        'unknown variable KEYWAY_VAULT_KEY (did you mean KEYWAY_VAULT_KEYS?): keyway serve --help lists every variable it reads',
      ),
    );
    expect(() => serveOptionsFromEnv({ KEYWAY_BASEURL: 'http://localhost:1' })).toThrow(
      'unknown variable KEYWAY_BASEURL (did you mean KEYWAY_BASE_URL?)',
    );
    expect(() => serveOptionsFromEnv({ KEYWAY_SOMETHING_ELSE_ENTIRELY: 'x' })).toThrow(
      new TypeError(
        'unknown variable KEYWAY_SOMETHING_ELSE_ENTIRELY: keyway serve --help lists every variable it reads',
      ),
    );
    // The admin commands' variables, and other programs' variables, are not refused.
    expect(
      serveOptionsFromEnv({
        KEYWAY_URL: 'http://x',
        KEYWAY_TOKEN: 't',
        HOME: '/root',
        PATH: '/bin',
      }),
    ).toEqual({});
  });

  it('refuses a pattern in KEYWAY_ALLOWED_HOSTS: it would allow nothing', () => {
    expect(serveOptionsFromEnv({ KEYWAY_ALLOWED_HOSTS: 'localhost, 127.0.0.1,' })).toEqual({
      allowedHosts: ['localhost', '127.0.0.1'],
    });
    expect(() => serveOptionsFromEnv({ KEYWAY_ALLOWED_HOSTS: 'localhost,*' })).toThrow(
      new TypeError(
        'KEYWAY_ALLOWED_HOSTS takes host names, not patterns: "*" would allow nothing. Name each host that may be reached over plain http and on private addresses (development and tests only)',
      ),
    );
    expect(() => serveOptionsFromEnv({ KEYWAY_ALLOWED_HOSTS: '*.internal' })).toThrow(
      'KEYWAY_ALLOWED_HOSTS takes host names, not patterns: "*.internal"',
    );
  });

  it('lists in keyway serve --help every variable it reads', async () => {
    const { SERVE_VARIABLES } = await import('../src/index.js');
    const { readFileSync } = await import('node:fs');
    const bin = readFileSync(new URL('../src/bin.ts', import.meta.url), 'utf8');
    expect(SERVE_VARIABLES.filter((name) => !bin.includes(name))).toEqual([]);
  });

  it('reads KEYWAY_REFRESH_IDLE_AFTER as a duration, and names the variable when it is not one', () => {
    expect(serveOptionsFromEnv({ KEYWAY_REFRESH_IDLE_AFTER: '7d' })).toEqual({
      refreshIdleAfter: 7 * 86_400_000,
    });
    expect(serveOptionsFromEnv({ KEYWAY_REFRESH_IDLE_AFTER: '90s' })).toEqual({
      refreshIdleAfter: 90_000,
    });
    expect(() => serveOptionsFromEnv({ KEYWAY_REFRESH_IDLE_AFTER: 'weekly' })).toThrow(
      'KEYWAY_REFRESH_IDLE_AFTER: "weekly" is not a duration: write a whole number and a unit (ms, s, m, h, d), like 90s, 12h or 7d',
    );
    expect(() => serveOptionsFromEnv({ KEYWAY_REFRESH_IDLE_AFTER: '500ms' })).toThrow(
      'KEYWAY_REFRESH_IDLE_AFTER must be at least 1s',
    );
  });

  it('reads one webhook endpoint (both variables or neither) and the audit retention', () => {
    const secret = 'whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD';
    expect(
      serveOptionsFromEnv({
        KEYWAY_WEBHOOK_URL: 'https://app.example.com/hooks',
        KEYWAY_WEBHOOK_SECRET: secret,
        KEYWAY_WEBHOOK_TYPES: ' connection.failed, connection.reauthorization_required ,',
        KEYWAY_AUDIT_RETENTION_DAYS: '30',
      }),
    ).toEqual({
      webhooks: [
        {
          url: 'https://app.example.com/hooks',
          secret,
          types: ['connection.failed', 'connection.reauthorization_required'],
        },
      ],
      auditRetentionDays: 30,
    });
    expect(
      serveOptionsFromEnv({
        KEYWAY_WEBHOOK_URL: 'https://a.example/h',
        KEYWAY_WEBHOOK_SECRET: secret,
      }),
    ).toEqual({ webhooks: [{ url: 'https://a.example/h', secret }] });
    for (const half of [
      { KEYWAY_WEBHOOK_URL: 'https://a.example/h' },
      { KEYWAY_WEBHOOK_SECRET: secret },
    ]) {
      expect(() => serveOptionsFromEnv(half)).toThrow(
        'KEYWAY_WEBHOOK_URL and KEYWAY_WEBHOOK_SECRET go together: set both (the secret is "whsec_" and a base64 key) or neither',
      );
    }
    expect(() => serveOptionsFromEnv({ KEYWAY_AUDIT_RETENTION_DAYS: '0' })).toThrow(
      'KEYWAY_AUDIT_RETENTION_DAYS must be an integer from 1 to 3650, not "0"',
    );
  });

  it('refuses a PORT that is not a port number', () => {
    for (const PORT of ['x', '-1', '65536', '80.5']) {
      expect(() => serveOptionsFromEnv({ PORT })).toThrow(TypeError);
    }
  });
});

describe('generateRootKey()', () => {
  it('makes distinct 256-bit keys', () => {
    const keys = new Set(Array.from({ length: 50 }, generateRootKey));
    expect(keys.size).toBe(50);
  });
});
