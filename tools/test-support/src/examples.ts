import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'vitest';
import { startServerProcess } from './processes.js';

/*
 * What every example app (examples/*) is tested for: Keyway's API mounted in the app, and
 * the app's own routes guarded by the same broker tokens.
 */

/** The base URL of a server listening on loopback. */
export async function baseUrlOf(server: Server): Promise<string> {
  if (!server.listening) await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Closes a server and every connection it holds. */
export async function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  server.close();
  await once(server, 'close');
}

/**
 * Mints a token through the app's Keyway API (under `/keyway`), reads it back, and checks
 * that the app's notes routes let it read `notes/alice/todo` and nothing else.
 */
export async function exerciseNotesApp(
  base: string,
  rootKey: string,
  keywayPath = '/keyway',
): Promise<void> {
  const ROOT_KEY = rootKey;
  const root = { authorization: `Bearer ${ROOT_KEY}` };
  const minted = await fetch(`${base}${keywayPath}/api/admin/tokens`, {
    method: 'POST',
    headers: { ...root, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'alice', scopes: ['notes/alice'] }),
  });
  expect(minted.status).toBe(201);
  const { access_token } = (await minted.json()) as { access_token: string };
  const read = await fetch(`${base}${keywayPath}/api/admin/tokens/alice`, { headers: root });
  expect(read.status).toBe(200);
  expect(await read.json()).toMatchObject({ name: 'alice', scopes: ['notes/alice/**'] });

  const auth = { authorization: `Bearer ${access_token}` };
  const own = await fetch(`${base}/notes/alice/todo`, { headers: auth });
  expect(own.status).toBe(200);
  expect(await own.json()).toMatchObject({ path: 'notes/alice/todo', note: 'buy milk' });

  const other = await fetch(`${base}/notes/bob/todo`, { headers: auth });
  expect(other.status).toBe(403);
  expect(other.headers.get('www-authenticate')).toBe(
    'Bearer realm="keyway", error="insufficient_scope"',
  );
  expect(((await other.json()) as { error: string }).error).toBe('insufficient_scope');

  const anonymous = await fetch(`${base}/notes/alice/todo`);
  expect(anonymous.status).toBe(401);
  expect(((await anonymous.json()) as { error: string }).error).toBe('invalid_token');

  const forged = await fetch(`${base}/notes/alice/todo`, {
    headers: { authorization: 'Basic YWxpY2U6cHc=' },
  });
  expect(forged.status).toBe(401);
}

/** Re-exported: the examples' tests start their servers with it. */
export { startServerProcess };

/** A free TCP port on loopback, for servers that cannot be told to pick one. */
export async function freePort(): Promise<number> {
  const { createServer } = await import('node:net');
  const probe = createServer().listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const { port } = probe.address() as AddressInfo;
  probe.close();
  await once(probe, 'close');
  return port;
}

/**
 * The test of an example served by another runtime's binary (Bun, Deno): the notes app in
 * memory and on a SQLite file (`KEYWAY_DATABASE`), each exercised by
 * {@link exerciseNotesApp}. Call it at the top of a test file.
 */
export async function describeRuntimeExample(options: {
  /** What the title says, e.g. `Bun.serve, run by the bun binary of the npm package`. */
  runtime: string;
  /** The SQLite driver the runtime uses, for the title. */
  sqlite: string;
  /** The example's folder; the binary is its `node_modules/.bin/<binary>`. */
  cwd: string;
  binary: string;
  args: string[];
  env?: Record<string, string>;
}): Promise<void> {
  const { afterAll, beforeAll, describe, it } = await import('vitest');
  const { mkdtempSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const rootKey = 'example-root-key-0123456789abcdefghijkl';
  describe.each([
    { storage: 'memory', database: null },
    { storage: options.sqlite, database: 'notes.sqlite' },
  ])(`example: notes app ($storage) on ${options.runtime}`, ({ database }) => {
    const dir = mkdtempSync(join(tmpdir(), 'keyway-example-'));
    let app: Awaited<ReturnType<typeof startServerProcess>>;
    beforeAll(async () => {
      app = await startServerProcess(
        join(options.cwd, 'node_modules', '.bin', options.binary),
        options.args,
        {
          cwd: options.cwd,
          env: {
            KEYWAY_ROOT_KEY: rootKey,
            PORT: '0',
            ...options.env,
            ...(database === null ? {} : { KEYWAY_DATABASE: join(dir, database) }),
          },
        },
      );
    }, 60_000);
    afterAll(async () => {
      await app?.stop();
      rmSync(dir, { recursive: true, force: true });
    });

    it('mints a token through Keyway, reads it back, and lets it read only its own notes', async () => {
      await exerciseNotesApp(app.base, rootKey);
    });
  });
}
