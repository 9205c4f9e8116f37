import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createBroker, generateVaultKey, rootPrincipal } from '@keyway/core';
import { sqliteStorage } from '@keyway/store-sqlite';
import { startBrokerProcess, untilRefused } from '@keyway/test-support/processes';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT_KEY = 'shutdown-test-root-key-0123456789abcdefg';

/*
 * Graceful shutdown (docs/api.md §16): on SIGTERM, keyway serve stops accepting,
 * lets a request in flight finish, and exits 0.
 */
describe('keyway serve on SIGTERM', () => {
  // A remote server that answers only when the test says so: the broker's discovery
  // request to it is the request in flight.
  const held: ServerResponse[] = [];
  let holding = true;
  let arrived: () => void = () => {};
  const remote = createServer((_req, res) => {
    if (!holding) {
      res.writeHead(404).end();
      return;
    }
    held.push(res);
    arrived();
  });
  afterAll(() => {
    for (const res of held) res.destroy();
    remote.close();
  });

  /** Starts a broker and holds one discovery request in flight at the remote server. */
  async function brokerWithRequestInFlight(env: Record<string, string> = {}) {
    holding = true;
    const remoteUrl = `http://127.0.0.1:${(remote.address() as AddressInfo).port}/mcp`;
    const broker = await startBrokerProcess({
      KEYWAY_ROOT_KEY: ROOT_KEY,
      KEYWAY_DATABASE: ':memory:',
      KEYWAY_ALLOWED_HOSTS: '127.0.0.1',
      ...env,
    });
    const exited = once(broker.child, 'exit');
    const reached = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    const inFlight = fetch(`${broker.url}/api/admin/discover`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ROOT_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ resource_url: remoteUrl }),
    });
    await reached;
    return { broker, exited, inFlight };
  }

  it('finishes a request in flight, refuses new connections, and exits 0', async () => {
    remote.listen(0, '127.0.0.1');
    await once(remote, 'listening');
    // The slow request: a discovery whose first probe the remote server holds.
    const { broker, exited, inFlight } = await brokerWithRequestInFlight();
    broker.child.kill('SIGTERM');

    // New connections are refused while the request is still held.
    expect(await untilRefused(`${broker.url}/healthz`)).toBe('ECONNREFUSED');
    expect(broker.child.exitCode).toBeNull();

    // The remote server answers at last: the request in flight completes, then the process exits.
    holding = false;
    for (const res of held.splice(0)) res.writeHead(404).end();
    const answer = await inFlight;
    expect(answer.status).toBe(200);
    const trace = (await answer.json()) as { ok: boolean; steps: { step: string }[] };
    expect(trace.steps.length).toBeGreaterThan(0);
    const [code, signal] = await exited;
    expect([code, signal]).toEqual([0, null]);
  }, 60_000);

  it('answers what is still in flight after KEYWAY_SHUTDOWN_TIMEOUT_MS with 503 and Retry-After, and exits 0', async () => {
    const { broker, exited, inFlight } = await brokerWithRequestInFlight({
      KEYWAY_SHUTDOWN_TIMEOUT_MS: '200',
    });
    const outcome = inFlight.then(
      async (response) => ({
        status: response.status,
        retryAfter: response.headers.get('retry-after'),
        connection: response.headers.get('connection'),
        body: await response.json(),
      }),
      (error: { cause?: { code?: string } }) => error.cause?.code ?? 'failed',
    );
    broker.child.kill('SIGTERM');
    // The remote server never answers: the client hears that the instance is going away,
    // rather than a dropped connection, and the process still exits 0.
    expect(await outcome).toEqual({
      status: 503,
      retryAfter: '1',
      connection: 'close',
      body: {
        error: 'unavailable',
        error_description: 'this Keyway instance is shutting down: retry the request',
      },
    });
    const [code, signal] = await exited;
    expect([code, signal]).toEqual([0, null]);
  }, 60_000);

  it('lets a webhook attempt in flight finish before it closes the storage, and exits 0', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keyway-shutdown-'));
    const file = join(dir, 'keyway.sqlite');
    const vaultKey = generateVaultKey();
    // A webhook endpoint that holds each attempt until the test answers it.
    const hooks: ServerResponse[] = [];
    let hooked: () => void = () => {};
    const attempted = new Promise<void>((resolve) => {
      hooked = resolve;
    });
    const endpoint = createServer((req, res) => {
      req.resume();
      hooks.push(res);
      hooked();
    });
    endpoint.listen(0, '127.0.0.1');
    await once(endpoint, 'listening');
    const broker = await startBrokerProcess({
      KEYWAY_ROOT_KEY: ROOT_KEY,
      KEYWAY_DATABASE: file,
      KEYWAY_VAULT_KEYS: vaultKey,
      KEYWAY_ALLOWED_HOSTS: '127.0.0.1',
      KEYWAY_WEBHOOK_URL: `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}/hooks`,
      KEYWAY_WEBHOOK_SECRET: 'whsec_KQ5oHY3H4w0DbhjLB5dgBtmG8wFJk3WQ',
      KEYWAY_WEBHOOK_TYPES: 'token.created',
    });
    const exited = once(broker.child, 'exit');
    const minted = await fetch(`${broker.url}/api/admin/tokens`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ROOT_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'ops', scopes: ['acme'] }),
    });
    expect(minted.status).toBe(201);
    await attempted;
    broker.child.kill('SIGTERM');
    // The listener closes at once (a kept-alive socket of the mint may fail first); the
    // process waits for the attempt.
    expect(await untilRefused(`${broker.url}/healthz`)).toBe('ECONNREFUSED');
    expect(broker.child.exitCode).toBeNull();
    for (const res of hooks.splice(0)) res.writeHead(204).end();
    const [code, signal] = await exited;
    expect([code, signal]).toEqual([0, null]);
    endpoint.close();

    // The attempt's outcome was written before the storage closed.
    const after = createBroker({
      rootKey: ROOT_KEY,
      storage: sqliteStorage(file),
      vaultKeys: [vaultKey],
      purgeIntervalMs: false,
      webhookPollIntervalMs: false,
    });
    const { items } = await after.events.deliveries(rootPrincipal());
    expect(items.map((item) => [item.status, item.attempts, item.last_status])).toEqual([
      ['delivered', 1, 204],
    ]);
    await after.close();
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);
});
