import { once } from 'node:events';
import { createServer } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { toNodeHandler } from '../src/node/index.js';

const CHUNK = 64 * 1024;
const TOTAL_CHUNKS = 1024; // 64 MiB

/** A 64 MiB body made on demand, counting how much of it was pulled out. */
function largeBody() {
  const state = { pulled: 0, cancelled: false };
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (state.pulled >= TOTAL_CHUNKS) {
        controller.close();
        return;
      }
      state.pulled++;
      controller.enqueue(new Uint8Array(CHUNK).fill(0x61));
    },
    cancel() {
      state.cancelled = true;
    },
  });
  return { stream, state };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('writing a Web Response to Node', () => {
  const servers: ReturnType<typeof createServer>[] = [];
  afterEach(async () => {
    for (const server of servers.splice(0)) {
      server.closeAllConnections();
      server.close();
    }
  });

  async function serve(body: () => ReadableStream<Uint8Array>) {
    const server = createServer(
      toNodeHandler(
        async () => new Response(body(), { headers: { 'content-type': 'text/plain' } }),
      ),
    );
    servers.push(server);
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    return (server.address() as AddressInfo).port;
  }

  it('reads a large body only as fast as a slow client takes it, then delivers all of it', async () => {
    const { stream, state } = largeBody();
    const port = await serve(() => stream);
    const socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    socket.pause();
    socket.write(`GET / HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n`);
    await sleep(400);
    // The client took nothing: what was pulled is what the socket's buffers hold, a few
    // MiB at most, never the 64 MiB body.
    const pulledWhilePaused = state.pulled * CHUNK;
    expect(pulledWhilePaused).toBeLessThan(16 * 1024 * 1024);
    await sleep(200);
    expect(state.pulled * CHUNK).toBe(pulledWhilePaused);

    let received = 0;
    socket.on('data', (data: Buffer) => {
      received += data.length;
    });
    socket.resume();
    await once(socket, 'end');
    expect(state.pulled).toBe(TOTAL_CHUNKS);
    expect(received).toBeGreaterThan(TOTAL_CHUNKS * CHUNK);
  });

  it('cancels the body when the client goes away', async () => {
    const { stream, state } = largeBody();
    const port = await serve(() => stream);
    const socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    socket.pause();
    socket.write(`GET / HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n`);
    await sleep(200);
    socket.destroy();
    for (let i = 0; i < 50 && !state.cancelled; i++) await sleep(20);
    expect(state.cancelled).toBe(true);
    expect(state.pulled).toBeLessThan(TOTAL_CHUNKS);
  });
});
