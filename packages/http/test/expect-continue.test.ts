import { once } from 'node:events';
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import { type AddressInfo, connect, type Socket } from 'node:net';
import { memoryStorage } from '@keyway/store-memory';
import { afterEach, describe, expect, it } from 'vitest';
import { continueOnRead, toNodeHandler } from '../src/node/index.js';
import { Harness, ROOT_KEY } from './harness.js';

/*
 * `Expect: 100-continue` (RFC 9110 §10.1.1) with `continueOnRead`: `100 Continue` goes when
 * the body is read, and an answer the request's head decides goes with no `100` before it,
 * so the client never sends that body.
 */

const CONTINUE = 'HTTP/1.1 100 Continue\r\n\r\n';
const MINT = JSON.stringify({ name: 'expecting', scopes: ['acme'] });

/** A client that sent the head of a request expecting `100 Continue`, and what came back. */
interface Expecting {
  socket: Socket;
  answer: string;
}

async function expecting(
  port: number,
  path: string,
  token: string,
  length: number,
): Promise<Expecting> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  const seen: Expecting = { socket, answer: '' };
  socket.setEncoding('utf8').on('data', (chunk: string) => {
    seen.answer += chunk;
  });
  socket.write(
    `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${length}\r\nExpect: 100-continue\r\n\r\n`,
  );
  return seen;
}

/** Waits for a whole chunked answer; its status lines, in order. */
async function statusLines(seen: Expecting): Promise<string[]> {
  await expect.poll(() => seen.answer.endsWith('0\r\n\r\n')).toBe(true);
  return seen.answer.split('\r\n').filter((line) => line.startsWith('HTTP/1.1 '));
}

describe('Expect: 100-continue over Node http (RFC 9110 §10.1.1)', () => {
  let server: ReturnType<typeof createHttpServer> | undefined;
  const sockets: Socket[] = [];

  afterEach(() => {
    for (const socket of sockets.splice(0)) socket.destroy();
    server?.closeAllConnections();
    server?.close();
    server = undefined;
  });

  /** A server of `h`: its own handler, or through a fetch handler; with `continueOnRead` or Node's default. */
  async function start(h: Harness, { fetchHandler = false, onRead = true } = {}): Promise<number> {
    const handle = toNodeHandler(fetchHandler ? (request) => h.handler(request) : h.handler);
    const listener = (req: IncomingMessage, res: ServerResponse) => handle(req, res);
    server = createHttpServer(listener);
    if (onRead) server.on('checkContinue', continueOnRead(listener));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    return (server.address() as AddressInfo).port;
  }

  const send = async (port: number, path: string, token: string, length: number) => {
    const seen = await expecting(port, path, token, length);
    sockets.push(seen.socket);
    return seen;
  };

  it.each([
    [
      'a body declared past the limit',
      '/api/admin/tokens',
      ROOT_KEY,
      2 * 1024 * 1024,
      '413 Payload Too Large',
      false,
    ],
    [
      'a forged token',
      '/api/admin/tokens',
      `kw1_${'A'.repeat(60)}`,
      MINT.length,
      '401 Unauthorized',
      false,
    ],
    ['an unknown route', '/api/nothing-here', ROOT_KEY, MINT.length, '404 Not Found', false],
    [
      'a gateway call past its limit',
      '/mcp/acme/alice/demo',
      ROOT_KEY,
      5 * 1024 * 1024,
      '413 Payload Too Large',
      false,
    ],
    [
      'a body declared past the limit, through a fetch handler',
      '/api/admin/tokens',
      ROOT_KEY,
      2 * 1024 * 1024,
      '413 Payload Too Large',
      true,
    ],
    [
      'a forged token, through a fetch handler',
      '/api/admin/tokens',
      `kw1_${'A'.repeat(60)}`,
      MINT.length,
      '401 Unauthorized',
      true,
    ],
  ])(
    'answers %s at once, with no 100 before it, and closes the connection',
    async (_, path, token, length, status, fetchHandler) => {
      const h = new Harness(memoryStorage());
      const port = await start(h, { fetchHandler });
      const seen = await send(port, path, token, length);
      expect(await statusLines(seen)).toEqual([`HTTP/1.1 ${status}`]);
      // The client has sent no body, and may send none: the connection is not read on.
      expect(seen.answer.toLowerCase()).toContain('\r\nconnection: close\r\n');
      expect(h.errors).toEqual([]);
    },
  );

  it.each([
    ['its own handler', false],
    ['a fetch handler', true],
  ])('asks for a body it reads, then answers it (%s)', async (_, fetchHandler) => {
    const h = new Harness(memoryStorage());
    const port = await start(h, { fetchHandler });
    const seen = await send(port, '/api/admin/tokens', ROOT_KEY, MINT.length);
    await expect.poll(() => seen.answer).toBe(CONTINUE);
    seen.socket.write(MINT);
    expect(await statusLines(seen)).toEqual(['HTTP/1.1 100 Continue', 'HTTP/1.1 201 Created']);
    expect(seen.answer).toContain('"name":"expecting"');
    expect(seen.answer.toLowerCase()).not.toContain('\r\nconnection: close\r\n');
  });

  it('leaves Node to send 100 Continue at once without continueOnRead', async () => {
    const h = new Harness(memoryStorage());
    const port = await start(h, { onRead: false });
    const seen = await send(port, '/api/admin/tokens', ROOT_KEY, 2 * 1024 * 1024);
    expect(await statusLines(seen)).toEqual([
      'HTTP/1.1 100 Continue',
      'HTTP/1.1 413 Payload Too Large',
    ]);
  });
});
