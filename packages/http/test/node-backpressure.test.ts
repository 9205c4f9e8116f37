import { once } from 'node:events';
import { createServer } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import type { PipedBody, PipedSink } from '@keyway/core/outbound';
import { afterEach, describe, expect, it } from 'vitest';
import { toNodeHandler } from '../src/node/index.js';
import { writeReply } from '../src/node/write.js';

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

  /**
   * A piped body (the gateway's upstream answer on Node) that sends one chunk, then waits
   * for its sink to take more, and never ends by itself: like an upstream answer whose
   * reader is gone, it settles only when cancelled.
   */
  function endlessPiped() {
    const state = { cancelled: false, settled: false, writes: 0 };
    const hooks: (() => void)[] = [];
    let sink: PipedSink | null = null;
    const send = () => {
      while (sink !== null && !state.cancelled) {
        state.writes++;
        if (!sink.write(new Uint8Array(CHUNK).fill(0x62))) return;
      }
    };
    const body: PipedBody = {
      pipe(to) {
        sink = to;
        send();
      },
      resume: send,
      cancel() {
        state.cancelled = true;
        sink = null;
        state.settled = true;
        for (const hook of hooks.splice(0)) hook();
      },
      whenSettled(hook) {
        if (state.settled) hook();
        else hooks.push(hook);
      },
    };
    return { body, state };
  }

  /** A server that writes `reply()` once its client has gone away. */
  async function answerAfterClose(reply: () => Parameters<typeof writeReply>[1]) {
    const written: Promise<void>[] = [];
    const server = createServer((_req, res) => {
      res.once('close', () => {
        written.push(writeReply(res, reply()));
      });
    });
    servers.push(server);
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const socket = connect((server.address() as AddressInfo).port, '127.0.0.1');
    await once(socket, 'connect');
    socket.write(`POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 0\r\n\r\n`);
    await sleep(50);
    socket.destroy();
    for (let i = 0; i < 50 && written.length === 0; i++) await sleep(20);
    expect(written).toHaveLength(1);
    await written[0];
  }

  // The gateway's slot for an upstream request is freed when its answer's body settles: an
  // answer written after its client left must be cancelled, or the slot is held for good
  // (found by the scale-out benchmark: 64 such calls, and the connection answered 429).
  it('cancels a piped body written after its client went away (the gateway frees its slot)', async () => {
    const { body, state } = endlessPiped();
    await answerAfterClose(() => ({
      status: 200,
      headers: { 'content-type': 'application/json' },
      body,
    }));
    // Dropped before its first write.
    expect(state).toEqual({ cancelled: true, settled: true, writes: 0 });
  });

  it('cancels a Web body written after its client went away', async () => {
    const { stream, state } = largeBody();
    await answerAfterClose(() => ({
      status: 200,
      headers: { 'content-type': 'text/event-stream' },
      body: stream,
    }));
    expect(state.cancelled).toBe(true);
    expect(state.pulled).toBeLessThan(TOTAL_CHUNKS);
  });
});
