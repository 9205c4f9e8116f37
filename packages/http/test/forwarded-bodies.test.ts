import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect, type Socket } from 'node:net';
import { createTestWorld, type TestWorld } from '@keyway/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { toNodeHandler } from '../src/node/index.js';
import { connectThroughConsent, Harness, ROOT_KEY, storageFactories } from './harness.js';

/*
 * Forwarded request bodies never outrun the gateway's limits (docs/api.md §13,
 * docs/security.md "agent tokens"): a request takes its stream slot before a byte of its
 * body is held, the slots of a delegation tree are counted together, and the bodies held
 * across the process are capped. The attacks were written first: with a per-caller limit of
 * 2, one token held 40 unfinished 4 MiB bodies (each read whole before any limit applied),
 * and `t.a` and `t.b` each opened as many streams as `t` might.
 */

const BASE = 'https://keyway.example.test';
const CONNECTION = 'acme/users/alice/linear';
const sqlite = storageFactories.find((factory) => factory.name === 'sqlite');

/** A request body the test feeds by hand, and a promise for each time it is read from. */
function pendingBody() {
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const pulls: (() => void)[] = [];
  let pulled = 0;
  const stream = new ReadableStream<Uint8Array>(
    {
      start(c) {
        controller = c;
      },
      pull() {
        pulled++;
        for (const wake of pulls.splice(0)) wake();
      },
    },
    { highWaterMark: 0 },
  );
  return {
    stream,
    push: (bytes: number) => controller.enqueue(new Uint8Array(bytes).fill(0x20)),
    end: () => controller.close(),
    /** Resolves once the body has been read from `count` times in all. */
    readTimes: (count: number) =>
      new Promise<void>((resolve) => {
        const check = () => (pulled >= count ? resolve() : pulls.push(check));
        check();
      }),
  };
}

describe('forwarded bodies stay within the gateway’s limits', () => {
  let h: Harness;
  let world: TestWorld;

  async function setUp(gateway: Record<string, number>) {
    h = new Harness(await (sqlite?.create() ?? Promise.reject(new Error('no sqlite'))), {
      baseUrl: BASE,
      providerManagement: true,
      fetch: (input, init) => world.fetch(input, init),
      gateway,
    });
    world = createTestWorld({ now: () => h.now });
    const put = await h.call('PUT', '/api/admin/providers/linear', {
      body: { template: 'mcp', configuration: { resource_url: world.resourceUrl } },
    });
    expect(put.status, put.text).toBe(201);
    expect((await connectThroughConsent(h, world, CONNECTION)).status).toBe(200);
  }

  afterEach(async () => {
    expect(h.errors).toEqual([]);
    await h.broker.close();
  });

  /** A gateway `POST` whose body streams from `body`, as `token`. */
  const post = (token: string, body: ReadableStream<Uint8Array>) =>
    h.handler(
      new Request(`http://keyway.test/mcp/${CONNECTION}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body,
        duplex: 'half',
      } as RequestInit),
    );

  const ping = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
  const whole = (text: string) =>
    new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(text));
        controller.close();
      },
    });

  it('takes the stream slot before reading a body: a caller at its limit is refused at once', async () => {
    await setUp({ maxStreamsPerCaller: 2 });
    const agent = await h.mint('agent', ['acme/users/alice']);
    const atServer = () => world.requests.filter((r) => r.url === world.resourceUrl).length;
    const before = atServer();
    const held = [pendingBody(), pendingBody()];
    const answers = held.map((body) => post(agent, body.stream));
    await Promise.all(held.map((body) => body.readTimes(1)));
    // A third request whose body never comes: refused without waiting for it.
    const third = pendingBody();
    const refused = await post(agent, third.stream);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(((await refused.json()) as { error_description: string }).error_description).toBe(
      'this caller has 2 upstream requests open (the limit): close one and retry',
    );
    for (const body of held) body.end();
    expect((await Promise.all(answers)).map((answer) => answer.status)).toEqual([200, 200]);
    expect(atServer() - before).toBe(2);
  });

  it('counts the streams of a delegation tree together, as mints are', async () => {
    await setUp({ maxStreamsPerCaller: 2 });
    const parent = await h.mint('t', ['acme/users/alice']);
    const a = await h.mint('t.a', ['acme/users/alice'], { by: parent });
    const b = await h.mint('t.b', ['acme/users/alice'], { by: parent });
    const first = pendingBody();
    const second = pendingBody();
    const held = [first, second];
    const answers = [post(a, first.stream), post(b, second.stream)];
    await Promise.all(held.map((body) => body.readTimes(1)));
    for (const token of [parent, a, b]) {
      const refused = await post(token, pendingBody().stream);
      expect(refused.status).toBe(429);
      await refused.body?.cancel();
    }
    // Another tree has its own share.
    const other = await h.mint('u', ['acme/users/alice']);
    expect((await post(other, whole(ping))).status).toBe(200);
    for (const body of held) body.end();
    await Promise.all(answers);
  });

  it('caps the request bytes held across the process, and frees them when a body is sent', async () => {
    await setUp({ maxBufferedBytes: 1024 * 1024, maxBodyBytes: 1024 * 1024 });
    const alice = await h.mint('alice', ['acme/users/alice']);
    const bob = await h.mint('bob', ['acme/users/alice']);
    const first = pendingBody();
    const firstAnswer = post(alice, first.stream);
    await first.readTimes(1);
    first.push(800 * 1024);
    // Read again: the 800 KiB chunk is held.
    await first.readTimes(2);
    const second = pendingBody();
    const secondAnswer = post(bob, second.stream);
    await second.readTimes(1);
    second.push(300 * 1024);
    const refused = await secondAnswer;
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(((await refused.json()) as { error_description: string }).error_description).toBe(
      `Keyway holds ${800 * 1024} bytes of forwarded request bodies, near its limit of ${1024 * 1024}: retry shortly`,
    );
    first.end();
    // It reached the server, which answered it: its bytes are given back.
    expect((await firstAnswer).status).toBe(200);
    const again = await post(bob, whole(ping));
    expect(again.status).toBe(200);
  });
});

describe('the Node adapter reads a forwarded body only once the request holds its slot', () => {
  let h: Harness;
  let server: Server;
  const sockets: Socket[] = [];

  afterEach(async () => {
    for (const socket of sockets.splice(0)) socket.destroy();
    server.closeAllConnections();
    server.close();
    expect(h.errors).toEqual([]);
    await h.broker.close();
  });

  it('answers 429 to a request whose body has not come, while another holds the only slot', async () => {
    const world = createTestWorld({ now: () => h.now });
    h = new Harness(await (sqlite?.create() ?? Promise.reject(new Error('no sqlite'))), {
      baseUrl: BASE,
      providerManagement: true,
      fetch: (input, init) => world.fetch(input, init),
      gateway: { maxStreamsPerCaller: 1 },
    });
    await h.call('PUT', '/api/admin/providers/linear', {
      body: { template: 'mcp', configuration: { resource_url: world.resourceUrl } },
    });
    expect((await connectThroughConsent(h, world, CONNECTION)).status).toBe(200);
    server = createServer(toNodeHandler(h.handler));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    /** A request that declares 4 MiB and sends none of it; the first line of its answer. */
    const unfinished = () => {
      const socket = connect(port, '127.0.0.1');
      sockets.push(socket);
      socket.write(
        `POST /mcp/${CONNECTION} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${ROOT_KEY}\r\nContent-Type: application/json\r\nContent-Length: ${4 * 1024 * 1024}\r\n\r\n{`,
      );
      return new Promise<string>((resolve) => {
        socket.once('data', (chunk) => resolve(chunk.toString('latin1').split('\r\n')[0] ?? ''));
      });
    };
    const answers = [unfinished(), unfinished()];
    // One of them holds the slot with its body unfinished; the other is answered at once.
    const first = await Promise.race(answers);
    expect(first).toBe('HTTP/1.1 429 Too Many Requests');
  });
});
