import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'vitest';

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

/**
 * Starts a server process that prints `notes app on http://127.0.0.1:<port>` once it
 * listens, and answers its base URL and a way to stop it.
 */
export async function startServerProcess(
  command: string,
  args: string[],
  options: { cwd: string; env: Record<string, string>; listening?: RegExp },
): Promise<{ base: string; stop: () => Promise<void> }> {
  const { spawn } = await import('node:child_process');
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...options.env },
  });
  let output = '';
  const pattern = options.listening ?? /notes app on (http:\/\/127\.0\.0\.1:\d+)/;
  const base = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no start within 30 s:\n${output}`)), 30_000);
    const read = (chunk: Buffer) => {
      output += chunk.toString();
      const match = pattern.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1] as string);
      }
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`exited with ${code}:\n${output}`));
    });
  });
  return {
    base,
    async stop() {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      await once(child, 'exit');
    },
  };
}

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
