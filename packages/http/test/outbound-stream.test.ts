import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createStreamingFetch, OutboundError, whenBodySettled } from '@keyway/core/outbound';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/*
 * The streaming guarded fetch (docs/api.md §13, the gateway's upstream): a real server on
 * loopback through the real Node transport.
 */

type Handler = (req: IncomingMessage, res: ServerResponse) => void;
let handle: Handler = (_req, res) => res.end();
const requests: { url: string; closed: Promise<void> }[] = [];
const server = createServer((req, res) => {
  requests.push({ url: req.url ?? '', closed: once(res, 'close').then(() => {}) });
  handle(req, res);
});
let base = '';

beforeAll(async () => {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => {
  server.closeAllConnections();
  server.close();
});

const stream = createStreamingFetch({ allowedHosts: ['127.0.0.1'], idleTimeoutMs: 200 });
const decoder = new TextDecoder();

describe('createStreamingFetch', () => {
  it('hands each chunk on before the server sends the next (no buffering)', async () => {
    let release: () => void = () => {};
    const secondMayGo = new Promise<void>((resolve) => {
      release = resolve;
    });
    handle = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: one\n\n');
      secondMayGo.then(() => res.end('data: two\n\n'));
    };
    const answer = await stream(`${base}/sse`, { headers: { accept: 'text/event-stream' } });
    expect([answer.status, answer.headers.get('content-type')]).toEqual([200, 'text/event-stream']);
    const reader = (answer.body as ReadableStream<Uint8Array>).getReader();
    // The first event arrives while the server still holds the second.
    const first = await reader.read();
    expect(decoder.decode(first.value)).toBe('data: one\n\n');
    release();
    const second = await reader.read();
    expect(decoder.decode(second.value)).toBe('data: two\n\n');
    expect((await reader.read()).done).toBe(true);
  });

  it('fails a body that goes idle with timeout, and closes the upstream request', async () => {
    handle = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(': ping\n\n');
      // …and nothing more.
    };
    const answer = await stream(`${base}/idle`);
    const reader = (answer.body as ReadableStream<Uint8Array>).getReader();
    expect(decoder.decode((await reader.read()).value)).toBe(': ping\n\n');
    const failure = await reader.read().then(
      () => null,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(OutboundError);
    expect((failure as OutboundError).code).toBe('timeout');
    expect((failure as OutboundError).message).toBe(`${base}: no data for 200 ms`);
    await requests.at(-1)?.closed;
  });

  it('closes the upstream request when the reader cancels, or the caller aborts', async () => {
    handle = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(': open\n\n');
    };
    const cancelled = await stream(`${base}/cancel`);
    const reader = (cancelled.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    await reader.cancel();
    await requests.at(-1)?.closed;

    const caller = new AbortController();
    const aborted = await stream(`${base}/abort`, { signal: caller.signal });
    const second = (aborted.body as ReadableStream<Uint8Array>).getReader();
    await second.read();
    const pending = second.read().then(
      () => 'read',
      () => 'failed',
    );
    caller.abort();
    expect(await pending).toBe('failed');
    await requests.at(-1)?.closed;
  });

  it('tells a relay once when a body is over: read to its end, cancelled, failed or aborted', async () => {
    const seen: string[] = [];
    const watch = (answer: Response, name: string) =>
      whenBodySettled(answer.body as ReadableStream<Uint8Array>, () => seen.push(name));

    handle = (_req, res) => res.end('whole');
    const ended = await stream(`${base}/end`);
    expect(watch(ended, 'ended')).toBe(true);
    expect(seen).toEqual([]);
    expect(await ended.text()).toBe('whole');
    // Already over: told at once, and only the new hook.
    expect(watch(ended, 'ended late')).toBe(true);
    expect(seen).toEqual(['ended', 'ended late']);

    handle = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(': open\n\n');
    };
    const cancelled = await stream(`${base}/cancel-watched`);
    watch(cancelled, 'cancelled');
    await cancelled.body?.cancel();
    await cancelled.body?.cancel();
    expect(seen).toEqual(['ended', 'ended late', 'cancelled']);

    const idle = await stream(`${base}/idle-watched`);
    watch(idle, 'idle');
    expect(await idle.text().then(String, (error: OutboundError) => error.code)).toBe('timeout');

    const caller = new AbortController();
    const aborted = await stream(`${base}/abort-watched`, { signal: caller.signal });
    watch(aborted, 'aborted');
    const reading = aborted.text().then(String, () => 'failed');
    caller.abort();
    expect(await reading).toBe('failed');
    expect(seen).toEqual(['ended', 'ended late', 'cancelled', 'idle', 'aborted']);

    // A body from elsewhere: nothing registered, nothing run.
    expect(
      whenBodySettled(new Response('other').body as ReadableStream<Uint8Array>, () =>
        seen.push('other'),
      ),
    ).toBe(false);
    expect(seen).toHaveLength(5);
  });

  it('never follows a redirect, and refuses what the address policy refuses', async () => {
    const before = requests.length;
    handle = (_req, res) => {
      res.writeHead(302, { location: `${base}/elsewhere` }).end();
    };
    const answer = await stream(`${base}/moved`);
    expect([answer.status, answer.headers.get('location')]).toEqual([302, `${base}/elsewhere`]);
    await answer.body?.cancel();
    expect(requests.slice(before).map((request) => request.url)).toEqual(['/moved']);

    const guarded = createStreamingFetch();
    const refusals = await Promise.all(
      [`${base}/x`, 'http://example.com/mcp', 'https://user:pw@example.com/', 'not a url'].map(
        (url) =>
          guarded(url).then(
            () => null,
            (error: OutboundError) => error.code,
          ),
      ),
    );
    expect(refusals).toEqual(['insecure_scheme', 'insecure_scheme', 'invalid_url', 'invalid_url']);
    const loopback = await createStreamingFetch()('https://127.0.0.1:1/x').then(
      () => null,
      (error: OutboundError) => error.code,
    );
    expect(loopback).toBe('blocked_address');
  });

  it('gives up on a server that sends no head within timeoutMs', async () => {
    handle = () => {
      // Never answers.
    };
    const slow = createStreamingFetch({ allowedHosts: ['127.0.0.1'], timeoutMs: 150 });
    const failure = await slow(`${base}/silent`).then(
      () => null,
      (error: OutboundError) => error,
    );
    expect(failure?.code).toBe('timeout');
    expect(failure?.message).toBe(`${base}: no answer within 150 ms`);
    await requests.at(-1)?.closed;
  });
});
