import { once } from 'node:events';
import { createServer as createHttpServer } from 'node:http';
import { type AddressInfo, connect, type Socket } from 'node:net';
import { memoryStorage } from '@keyway/store-memory';
import { afterEach, describe, expect, it } from 'vitest';
import { toNodeHandler } from '../src/node/index.js';
import { Harness, ROOT_KEY } from './harness.js';

/*
 * The close after an early answer to a body past the limit (RFC 9112 §9.6): the answer, then
 * the server's half of the connection, while the rest of the body is read and discarded.
 * A socket destroyed at once resets the connection under a client still writing its body,
 * which then fails (EPIPE, ECONNRESET) without reading the 413: `fetch` did, for a 20 MB
 * body, one time in five.
 */

const MIB = 1024 * 1024;

/** What a client that sent a body past the limit saw. */
interface Sent {
  /** The answer's bytes, as far as they came. */
  answer: string;
  /** Body bytes the socket took before it closed or failed. */
  sent: number;
  /** The socket's error code, if it failed. */
  error: string | undefined;
  /** Whether the server ended its side of the connection (a FIN). */
  ended: boolean;
}

/**
 * Declares `declared` body bytes on `path`, waits for the whole answer, then writes `body`
 * bytes of it in 1 MiB chunks (each after the last was taken), as a client does that sends
 * its body whole whatever the server answered (curl); then ends its side and waits until the
 * socket closes, or stops there when `end` is false.
 */
async function sendPastLimit(
  port: number,
  path: string,
  token: string,
  declared: number,
  body: number,
  end = true,
): Promise<Sent> {
  // Half open: the server's end of its side does not end the client's.
  const socket: Socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
  await once(socket, 'connect');
  const seen: Sent = { answer: '', sent: 0, error: undefined, ended: false };
  let closed = false;
  socket.on('data', (chunk) => {
    seen.answer += chunk;
  });
  socket.on('end', () => {
    seen.ended = true;
  });
  socket.on('error', (error: NodeJS.ErrnoException) => {
    seen.error = error.code;
  });
  // Not `once`, which rejects on the socket's error: a reset is what some tests look for.
  const gone = new Promise<void>((resolve) =>
    socket.once('close', () => {
      closed = true;
      resolve();
    }),
  );
  socket.write(
    `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${declared}\r\n\r\n`,
  );
  // The whole answer (chunked) before any byte of the body.
  await expect.poll(() => seen.answer.endsWith('0\r\n\r\n')).toBe(true);
  const chunk = Buffer.alloc(MIB, 0x20);
  while (seen.sent < body && !closed && seen.error === undefined) {
    const size = Math.min(MIB, body - seen.sent);
    const taken = socket.write(chunk.subarray(0, size));
    seen.sent += size;
    if (!taken) await Promise.race([new Promise((resolve) => socket.once('drain', resolve)), gone]);
  }
  if (!end) return seen;
  if (seen.sent >= body && !closed) socket.end();
  await gone;
  return seen;
}

describe('the close after an early answer to a body past the limit (RFC 9112 §9.6)', () => {
  let server: ReturnType<typeof createHttpServer> | undefined;

  afterEach(() => {
    server?.closeAllConnections();
    server?.close();
    server = undefined;
  });

  async function start(h: Harness, fetchHandler = false): Promise<number> {
    const handle = toNodeHandler(fetchHandler ? (request) => h.handler(request) : h.handler);
    server = createHttpServer(handle);
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    return (server.address() as AddressInfo).port;
  }

  it.each([
    ['a mint, by its declared length', '/api/admin/tokens', ROOT_KEY, 413, false],
    ['a gateway call, by its declared length', '/mcp/acme/alice/demo', ROOT_KEY, 413, false],
    ['a forged token', '/api/admin/tokens', `kw1_${'A'.repeat(60)}`, 401, false],
    ['a mint through a fetch handler', '/api/admin/tokens', ROOT_KEY, 413, true],
  ])(
    'reads and discards the rest of the body, so the client sends it whole and keeps the answer (%s)',
    async (_, path, token, status, fetchHandler) => {
      const h = new Harness(memoryStorage());
      const port = await start(h, fetchHandler);
      const seen = await sendPastLimit(port, path, token, 32 * MIB, 32 * MIB);
      expect(seen.answer.split('\r\n')[0]).toBe(
        status === 413 ? 'HTTP/1.1 413 Payload Too Large' : 'HTTP/1.1 401 Unauthorized',
      );
      expect(seen.answer.toLowerCase()).toContain('\r\nconnection: close\r\n');
      // The server's half closed after its answer, and no reset under the client: every
      // byte of the body taken.
      expect(seen.ended).toBe(true);
      expect(seen.error).toBeUndefined();
      expect(seen.sent).toBe(32 * MIB);
      expect(h.errors).toEqual([]);
    },
  );

  it('stops reading past 64 MiB: a client that goes on is cut off', async () => {
    const h = new Harness(memoryStorage());
    const port = await start(h);
    const seen = await sendPastLimit(port, '/api/admin/tokens', ROOT_KEY, 256 * MIB, 256 * MIB);
    expect(seen.answer.split('\r\n')[0]).toBe('HTTP/1.1 413 Payload Too Large');
    // Cut off past 64 MiB: what the client wrote beyond sat in the sockets' buffers.
    expect(['EPIPE', 'ECONNRESET']).toContain(seen.error);
    expect(seen.sent).toBeGreaterThan(64 * MIB);
    expect(seen.sent).toBeLessThan(128 * MIB);
    expect(h.errors).toEqual([]);
  });

  it('stops waiting after 5 seconds: a client that sends nothing more is closed', async () => {
    const h = new Harness(memoryStorage());
    const port = await start(h);
    const closed: Promise<unknown>[] = [];
    server?.on('connection', (socket: Socket) => closed.push(once(socket, 'close')));
    const seen = await sendPastLimit(port, '/api/admin/tokens', ROOT_KEY, 32 * MIB, 0, false);
    expect(seen.answer.split('\r\n')[0]).toBe('HTTP/1.1 413 Payload Too Large');
    expect(seen.ended).toBe(true);
    // The client neither sends nor ends: the server closes its socket, after its bound.
    expect(closed).toHaveLength(1);
    await closed[0];
    expect(seen.error).toBeUndefined();
    expect(h.errors).toEqual([]);
  }, 20_000);
});
