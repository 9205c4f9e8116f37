import { getEventListeners, once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  createStreamingFetch,
  OutboundError,
  type PipedBody,
  pipedHeader,
  pipedResponse,
  whenBodySettled,
} from '@keyway/core/outbound';
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
    expect((failure as OutboundError).failure).toBe('timeout');
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
    expect(await idle.text().then(String, (error: OutboundError) => error.failure)).toBe('timeout');

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
            (error: OutboundError) => error.failure,
          ),
      ),
    );
    expect(refusals).toEqual(['insecure_scheme', 'insecure_scheme', 'invalid_url', 'invalid_url']);
    const loopback = await createStreamingFetch()('https://127.0.0.1:1/x').then(
      () => null,
      (error: OutboundError) => error.failure,
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
    expect(failure?.failure).toBe('timeout');
    expect(failure?.message).toBe(`${base}: no answer within 150 ms`);
    await requests.at(-1)?.closed;
  });
});

/** A piped body read to its end: each chunk as text, then `end` or the error. */
function drain(body: PipedBody | null): Promise<{ chunks: string[]; outcome: unknown }> {
  return new Promise((resolve) => {
    const chunks: string[] = [];
    body?.pipe({
      write: (chunk) => chunks.push(decoder.decode(chunk)) > 0,
      end: () => resolve({ chunks, outcome: 'end' }),
      error: (error) => resolve({ chunks, outcome: error }),
    });
  });
}

describe('createStreamingFetch().piped: the same requests answered for an adapter to pipe (Node)', () => {
  const piped = stream.piped ?? (() => Promise.reject(new Error('no piped fetch on Node')));
  const get = (path: string, signal?: AbortSignal) =>
    piped(`${base}${path}`, {
      method: 'GET',
      headers: { accept: 'text/event-stream' },
      body: null,
      ...(signal === undefined ? {} : { signal }),
    });

  it('is there on Node’s transport, and not on a fetch-style one', () => {
    expect(typeof stream.piped).toBe('function');
    expect(createStreamingFetch({ fetch: (url, init) => fetch(url, init) }).piped).toBeUndefined();
  });

  it('hands each chunk on before the server sends the next, and sends the method, headers and body', async () => {
    let release: () => void = () => {};
    const secondMayGo = new Promise<void>((resolve) => {
      release = resolve;
    });
    let received = '';
    handle = (req, res) => {
      req.on('data', (chunk: Buffer) => {
        received += chunk.toString();
      });
      res.writeHead(200, { 'content-type': 'text/event-stream', 'x-two': ['a', 'b'] });
      res.write('data: one\n\n');
      secondMayGo.then(() => res.end('data: two\n\n'));
    };
    const answer = await piped(`${base}/piped-sse`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: new TextEncoder().encode('{"a":1}'),
    });
    expect(answer.status).toBe(200);
    expect(answer.headers['content-type']).toBe('text/event-stream');
    expect(answer.headers['x-two']).toBe('a, b');
    const chunks: string[] = [];
    const ended = new Promise<unknown>((resolve) => {
      answer.body?.pipe({
        write(chunk) {
          chunks.push(decoder.decode(chunk));
          // The first event arrives while the server still holds the second.
          if (chunks.length === 1) release();
          return true;
        },
        end: () => resolve('end'),
        error: resolve,
      });
    });
    expect(await ended).toBe('end');
    expect(chunks).toEqual(['data: one\n\n', 'data: two\n\n']);
    expect(received).toBe('{"a":1}');
  });

  it('fails a body that goes idle with timeout, and closes the upstream request', async () => {
    handle = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(': ping\n\n');
    };
    const { chunks, outcome } = await drain((await get('/piped-idle')).body);
    expect(chunks).toEqual([': ping\n\n']);
    expect(outcome).toBeInstanceOf(OutboundError);
    expect((outcome as OutboundError).failure).toBe('timeout');
    expect((outcome as OutboundError).message).toBe(`${base}: no data for 200 ms`);
    await requests.at(-1)?.closed;
  });

  it('does not take a reader slower than the idle limit for an idle upstream', async () => {
    handle = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: one\n\n');
      setTimeout(() => res.end('data: two\n\n'), 20);
    };
    const { body } = await get('/piped-slow-reader');
    const chunks: string[] = [];
    const outcome = await new Promise<unknown>((resolve) => {
      body?.pipe({
        write(chunk) {
          chunks.push(decoder.decode(chunk));
          // Full after the first chunk, for longer than the idle limit.
          if (chunks.length === 1) setTimeout(() => body.resume(), 400);
          return chunks.length > 1;
        },
        end: () => resolve('end'),
        error: resolve,
      });
    });
    expect(outcome).toBe('end');
    expect(chunks).toEqual(['data: one\n\n', 'data: two\n\n']);
  });

  it('closes the upstream request when the reader cancels, or the caller aborts', async () => {
    handle = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(': open\n\n');
    };
    const cancelled = await get('/piped-cancel');
    const sink = { write: () => true, end: () => {}, error: () => {} };
    cancelled.body?.pipe(sink);
    cancelled.body?.cancel();
    await requests.at(-1)?.closed;

    const caller = new AbortController();
    const aborted = await get('/piped-abort', caller.signal);
    const reading = drain(aborted.body);
    caller.abort(new Error('the caller left'));
    const { outcome } = await reading;
    expect((outcome as Error).message).toBe('the caller left');
    await requests.at(-1)?.closed;
  });

  it('leaves no listener on a signal shared by many requests once each is over, and fails a request aborted before its answer with the reason', async () => {
    // One signal for many requests, as a client's connection lends the gateway its own.
    const shared = new AbortController();
    const listeners = () => getEventListeners(shared.signal, 'abort').length;
    handle = (_req, res) => res.end('whole');
    for (let i = 0; i < 20; i++) {
      expect((await drain((await get('/piped-shared', shared.signal)).body)).chunks).toEqual([
        'whole',
      ]);
    }
    handle = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(': open\n\n');
    };
    for (let i = 0; i < 5; i++) {
      const open = await get('/piped-shared-cancel', shared.signal);
      open.body?.pipe({ write: () => true, end() {}, error() {} });
      open.body?.cancel();
      await requests.at(-1)?.closed;
    }
    const idle = await get('/piped-shared-idle', shared.signal);
    expect(((await drain(idle.body)).outcome as OutboundError).failure).toBe('timeout');
    // A refused connection: the request fails before any answer.
    const refused = createServer();
    refused.listen(0, '127.0.0.1');
    await once(refused, 'listening');
    const port = (refused.address() as AddressInfo).port;
    refused.close();
    await once(refused, 'close');
    const failure = await piped(`http://127.0.0.1:${port}/`, {
      method: 'GET',
      headers: {},
      body: null,
      signal: shared.signal,
    }).then(
      () => null,
      (error: unknown) => error,
    );
    expect((failure as OutboundError).failure).toBe('network');
    // The Web path over the same exchange.
    handle = (_req, res) => res.end('as a response');
    for (let i = 0; i < 5; i++) {
      const answer = await stream(`${base}/shared-web`, { signal: shared.signal });
      expect(await answer.text()).toBe('as a response');
    }
    await new Promise((resolve) => setImmediate(resolve));
    expect(listeners()).toBe(0);

    // Aborted while waiting for the head: the request fails with the abort's reason, and the
    // server sees its request closed.
    handle = () => {};
    const caller = new AbortController();
    const waiting = get('/piped-abort-head', caller.signal).then(
      () => null,
      (error: unknown) => error,
    );
    await new Promise((resolve) => setTimeout(resolve, 20));
    const reason = new Error('the caller left before the answer');
    caller.abort(reason);
    expect(await waiting).toBe(reason);
    await requests.at(-1)?.closed;
    expect(requests.at(-1)?.url).toBe('/piped-abort-head');
    // Aborted already: nothing is sent.
    const before = requests.length;
    expect(await get('/piped-never', caller.signal).catch((error: unknown) => error)).toBe(reason);
    expect(requests.length).toBe(before);
  });

  it('tells once when a body is over: read to its end, cancelled, failed or aborted', async () => {
    const seen: string[] = [];
    handle = (_req, res) => res.end('whole');
    const ended = await get('/piped-end');
    ended.body?.whenSettled(() => seen.push('ended'));
    expect(seen).toEqual([]);
    expect((await drain(ended.body)).chunks).toEqual(['whole']);
    ended.body?.whenSettled(() => seen.push('ended late'));
    expect(seen).toEqual(['ended', 'ended late']);

    handle = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(': open\n\n');
    };
    const cancelled = await get('/piped-cancel-watched');
    cancelled.body?.whenSettled(() => seen.push('cancelled'));
    cancelled.body?.cancel();
    cancelled.body?.cancel();
    const idle = await get('/piped-idle-watched');
    idle.body?.whenSettled(() => seen.push('idle'));
    expect(((await drain(idle.body)).outcome as OutboundError).failure).toBe('timeout');
    const caller = new AbortController();
    const aborted = await get('/piped-abort-watched', caller.signal);
    aborted.body?.whenSettled(() => seen.push('aborted'));
    const reading = drain(aborted.body);
    caller.abort();
    await reading;
    expect(seen).toEqual(['ended', 'ended late', 'cancelled', 'idle', 'aborted']);
  });

  it('reads a header from the raw headers as Node’s own object has it, repeats included', async () => {
    handle = (_req, res) => {
      res.writeHead(
        200,
        [
          ['Content-Type', 'application/json'],
          ['content-type', 'text/plain'],
          ['Mcp-Session-Id', 's-1'],
          ['X-Two', 'a'],
          ['x-two', 'b'],
          ['Set-Cookie', 'a=1'],
          ['set-cookie', 'b=2'],
          ['Cookie', 'c=1'],
          ['cookie', 'd=2'],
          ['WWW-Authenticate', 'Bearer realm="x"'],
          ['www-authenticate', 'DPoP'],
        ].flat(),
      );
      res.end('{}');
    };
    const answer = await get('/piped-raw-headers');
    answer.body?.cancel();
    const names = [
      'content-type',
      'mcp-session-id',
      'x-two',
      'set-cookie',
      'cookie',
      'www-authenticate',
      'x-none',
    ];
    const fromRaw = names.map((name) => pipedHeader(answer, name));
    expect(fromRaw).toEqual([
      'application/json',
      's-1',
      'a, b',
      'a=1, b=2',
      'c=1; d=2',
      'Bearer realm="x", DPoP',
      null,
    ]);
    // The same as read from Node's object of them all.
    const fromObject = { status: answer.status, headers: answer.headers, body: null };
    expect(names.map((name) => pipedHeader(fromObject, name))).toEqual(fromRaw);
    expect(answer.rawHeaders?.slice(0, 4)).toEqual([
      'Content-Type',
      'application/json',
      'content-type',
      'text/plain',
    ]);
  });

  it('reads as a Web Response where one is wanted', async () => {
    handle = (_req, res) => {
      res.writeHead(201, { 'content-type': 'application/json' });
      res.write('{"a":');
      setTimeout(() => res.end('1}'), 10);
    };
    const answer = await get('/piped-as-response');
    const response = pipedResponse(answer);
    // One reader: the Response's stream has it.
    expect(() => answer.body?.pipe({ write: () => true, end() {}, error() {} })).toThrow(
      'a piped body has one reader',
    );
    expect(response.status).toBe(201);
    expect(response.headers.get('content-type')).toBe('application/json');
    expect(await response.json()).toEqual({ a: 1 });
  });

  it('never follows a redirect, refuses what the address policy refuses, and gives up on a silent server', async () => {
    const before = requests.length;
    handle = (_req, res) => {
      res.writeHead(302, { location: `${base}/elsewhere` }).end();
    };
    const answer = await get('/piped-moved');
    expect([answer.status, answer.headers.location]).toEqual([302, `${base}/elsewhere`]);
    answer.body?.cancel();
    expect(requests.slice(before).map((request) => request.url)).toEqual(['/piped-moved']);

    const guarded = createStreamingFetch().piped;
    const refusals = await Promise.all(
      [
        `${base}/x`,
        'http://example.com/mcp',
        'https://user:pw@example.com/',
        'not a url',
        'https://127.0.0.1:1/x',
      ].map((url) =>
        guarded?.(url, { method: 'GET', headers: {}, body: null }).then(
          () => null,
          (error: OutboundError) => error.failure,
        ),
      ),
    );
    expect(refusals).toEqual([
      'insecure_scheme',
      'insecure_scheme',
      'invalid_url',
      'invalid_url',
      'blocked_address',
    ]);
    // A URL handed over as an object is checked the same way.
    const handedOver = await Promise.all(
      [`${base}/x`, 'https://user:pw@example.com/', 'https://127.0.0.1:1/x'].map((url) =>
        guarded?.(new URL(url), { method: 'GET', headers: {}, body: null }).then(
          () => null,
          (error: OutboundError) => error.failure,
        ),
      ),
    );
    expect(handedOver).toEqual(['insecure_scheme', 'invalid_url', 'blocked_address']);

    handle = () => {
      // Never answers.
    };
    const slow = createStreamingFetch({ allowedHosts: ['127.0.0.1'], timeoutMs: 150 }).piped;
    const failure = await slow?.(`${base}/piped-silent`, {
      method: 'GET',
      headers: {},
      body: null,
    }).then(
      () => null,
      (error: OutboundError) => error,
    );
    expect(failure?.failure).toBe('timeout');
    expect(failure?.message).toBe(`${base}: no answer within 150 ms`);
    await requests.at(-1)?.closed;
  });
});
