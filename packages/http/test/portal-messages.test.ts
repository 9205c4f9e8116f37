import { memoryStorage } from '@keyway/store-memory';
import { describe, expect, it } from 'vitest';
import { Harness, harnessPerTest, initializeMessage, ROOT_KEY } from './harness.js';

/*
 * The portal reads a `POST`'s JSON-RPC message once, for the choice of wire and then the
 * SDK's transport (docs/api.md §18): a message too large, or not JSON, is answered as the
 * transport answers it, whether its size was declared or not.
 */

const PORTAL = 'http://keyway.test/portal/acme/users/alice';
const MIB = 1024 * 1024;

describe('the portal’s reading of a message', () => {
  const slot = harnessPerTest();

  function harness(): Harness {
    const h = new Harness(memoryStorage());
    slot.h = h;
    return h;
  }

  const post = (h: Harness, body: BodyInit, headers: Record<string, string> = {}) =>
    h.handler(
      new Request(PORTAL, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${ROOT_KEY}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...headers,
        },
        body,
        ...(body instanceof ReadableStream ? { duplex: 'half' } : {}),
      } as RequestInit),
    );

  it('answers 413 to a message over 4 MiB, declared or streamed without a length', async () => {
    const h = harness();
    const big = `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"${'x'.repeat(5 * MIB)}"}}`;
    const declared = await post(h, big);
    expect(declared.status).toBe(413);
    expect(await declared.json()).toEqual({
      jsonrpc: '2.0',
      error: { code: -32000, message: `the message is larger than ${4 * MIB} bytes` },
      id: null,
    });
    // The same bytes in 64 KiB chunks, no `Content-Length`: read no further than the bound.
    let sent = 0;
    const bytes = new TextEncoder().encode(big);
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= bytes.length) {
          controller.close();
          return;
        }
        controller.enqueue(bytes.subarray(sent, sent + 64 * 1024));
        sent += 64 * 1024;
      },
    });
    const streamed = await post(h, stream);
    expect(streamed.status).toBe(413);
    expect(sent).toBeLessThan(4 * MIB + 4 * 64 * 1024);
  });

  it('answers 400 (-32700) to a body that is not JSON, and 415 to one that says it is not', async () => {
    const h = harness();
    const broken = await post(h, '{"jsonrpc":"2.0",');
    expect(broken.status).toBe(400);
    expect(await broken.json()).toEqual({
      jsonrpc: '2.0',
      error: { code: -32700, message: 'Parse error: Invalid JSON' },
      id: null,
    });
    const text = await post(h, JSON.stringify(initializeMessage('t')), {
      'content-type': 'text/plain',
    });
    expect(text.status).toBe(415);
  });

  it('serves a message read once: the session opens, on either wire’s classification', async () => {
    const h = harness();
    const opened = await post(h, JSON.stringify(initializeMessage('once')));
    expect(opened.status).toBe(200);
    expect(opened.headers.get('mcp-session-id')).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(await opened.text()).toContain('"name":"keyway-portal"');
  });
});
