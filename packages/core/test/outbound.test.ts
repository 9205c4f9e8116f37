import { describe, expect, it } from 'vitest';
import { isKeywayError, KeywayError } from '../src/contract/errors.js';
import { createOutboundFetch } from '../src/outbound/fetch.js';
import { OutboundError } from '../src/outbound/network-failure.js';
import type { Transport } from '../src/outbound/transport.js';

/** A transport that answers from a table and records what was sent. */
function recorder(answer: (url: string, init: RequestInit) => Response | Promise<Response>) {
  const calls: { url: string; method: string; body: unknown }[] = [];
  const transport: Transport = async (url, init) => {
    calls.push({ url, method: init.method ?? 'GET', body: init.body ?? null });
    return answer(url, init);
  };
  return { calls, transport };
}

async function reason(promise: Promise<unknown>): Promise<string> {
  const error = await promise.then(
    () => null,
    (err: unknown) => err,
  );
  expect(error).toBeInstanceOf(OutboundError);
  return (error as OutboundError).failure;
}

describe('createOutboundFetch(): the SSRF guard', () => {
  it.each([
    ['https://127.0.0.1/x', 'blocked_address'],
    ['https://[::1]/x', 'blocked_address'],
    ['https://10.0.0.1/x', 'blocked_address'],
    ['https://169.254.169.254/latest/meta-data', 'blocked_address'],
    ['https://[::ffff:127.0.0.1]/x', 'blocked_address'],
    ['https://[fd00::1]/x', 'blocked_address'],
    ['https://100.64.0.1/x', 'blocked_address'],
    ['https://0.0.0.0/x', 'blocked_address'],
    ['https://2130706433/x', 'blocked_address'], // 127.0.0.1 written as one number
    ['https://0x7f.1/x', 'blocked_address'], // 127.0.0.1 in hex and short form
    ['https://localhost/x', 'blocked_address'],
    ['https://api.localhost/x', 'blocked_address'],
    ['http://mcp.example.com/x', 'insecure_scheme'],
    ['ftp://mcp.example.com/x', 'insecure_scheme'],
    ['file:///etc/passwd', 'insecure_scheme'],
    ['https://user:pass@mcp.example.com/x', 'invalid_url'],
    ['not a url', 'invalid_url'],
  ])('refuses %s (%s) without sending anything', async (url, expected) => {
    const { calls, transport } = recorder(() => new Response('{}'));
    expect(await reason(createOutboundFetch({ fetch: transport })(url))).toBe(expected);
    expect(calls).toEqual([]);
  });

  it('allows named hosts over http and on loopback, for development and tests', async () => {
    const { calls, transport } = recorder(() => new Response('ok'));
    const outbound = createOutboundFetch({
      fetch: transport,
      allowedHosts: ['localhost', '127.0.0.1', '[::1]'],
    });
    for (const url of ['http://localhost:8080/a', 'http://127.0.0.1/b', 'https://[::1]/c']) {
      expect(await (await outbound(url)).text()).toBe('ok');
    }
    expect(calls.map((c) => c.url)).toEqual([
      'http://localhost:8080/a',
      'http://127.0.0.1/b',
      'https://[::1]/c',
    ]);
    expect(await reason(outbound('https://10.0.0.1/'))).toBe('blocked_address');
  });

  it('lets a public https host through', async () => {
    const { transport } = recorder(() => Response.json({ hello: 'world' }));
    const response = await createOutboundFetch({ fetch: transport })('https://mcp.example.com/x');
    expect(await response.json()).toEqual({ hello: 'world' });
  });

  it('follows same-origin redirects, switching a POST to GET on 303', async () => {
    const { calls, transport } = recorder((url) =>
      url.endsWith('/start')
        ? new Response(null, { status: 303, headers: { location: '/next' } })
        : new Response('done'),
    );
    const response = await createOutboundFetch({ fetch: transport })(
      'https://as.example.com/start',
      {
        method: 'POST',
        body: 'x=1',
      },
    );
    expect(await response.text()).toBe('done');
    expect(calls).toEqual([
      { url: 'https://as.example.com/start', method: 'POST', body: 'x=1' },
      { url: 'https://as.example.com/next', method: 'GET', body: null },
    ]);
  });

  it('refuses a redirect to another origin, and so to a private address', async () => {
    for (const location of [
      'http://169.254.169.254/latest',
      'https://10.0.0.1/',
      'https://evil.example/',
    ]) {
      const { calls, transport } = recorder(
        () => new Response(null, { status: 302, headers: { location } }),
      );
      expect(
        await reason(createOutboundFetch({ fetch: transport })('https://mcp.example.com/')),
      ).toBe('redirect');
      expect(calls).toHaveLength(1);
    }
  });

  it('stops after the redirect limit', async () => {
    const { calls, transport } = recorder(
      (url) => new Response(null, { status: 307, headers: { location: `${url}x` } }),
    );
    expect(
      await reason(
        createOutboundFetch({ fetch: transport, maxRedirects: 3 })('https://a.example/'),
      ),
    ).toBe('redirect');
    expect(calls).toHaveLength(4);
  });

  it('refuses a body over the size limit, declared or streamed', async () => {
    const declared = recorder(
      () => new Response('x'.repeat(10), { headers: { 'content-length': '2000' } }),
    );
    expect(
      await reason(
        createOutboundFetch({ fetch: declared.transport, maxResponseBytes: 1000 })(
          'https://a.example/',
        ),
      ),
    ).toBe('too_large');
    let pulled = 0;
    const streamed = recorder(
      () =>
        new Response(
          new ReadableStream({
            pull(controller) {
              pulled++;
              controller.enqueue(new Uint8Array(400));
            },
          }),
        ),
    );
    expect(
      await reason(
        createOutboundFetch({ fetch: streamed.transport, maxResponseBytes: 1000 })(
          'https://a.example/',
        ),
      ),
    ).toBe('too_large');
    expect(pulled).toBeLessThan(10);
  });

  it('gives up after the timeout, even on a body that never ends', async () => {
    const silent = recorder(
      (_, init) =>
        new Promise<Response>((_resolve, reject) => {
          init.signal?.addEventListener('abort', () => reject(init.signal?.reason));
        }),
    );
    expect(
      await reason(
        createOutboundFetch({ fetch: silent.transport, timeoutMs: 50 })('https://a.example/'),
      ),
    ).toBe('timeout');
    const endless = recorder(
      () => new Response(new ReadableStream({ pull: () => new Promise(() => {}) })),
    );
    expect(
      await reason(
        createOutboundFetch({ fetch: endless.transport, timeoutMs: 50 })('https://a.example/'),
      ),
    ).toBe('timeout');
  });

  it('gives up after the timeout on a transport that ignores the signal and never answers', async () => {
    const deaf = recorder(() => new Promise<Response>(() => {}));
    expect(
      await reason(
        createOutboundFetch({ fetch: deaf.transport, timeoutMs: 50 })('https://a.example/'),
      ),
    ).toBe('timeout');
  });

  it('turns a transport failure into a network error naming only the origin', async () => {
    const broken = recorder(() => {
      throw new TypeError('socket hang up');
    });
    const error = await createOutboundFetch({ fetch: broken.transport })(
      'https://a.example/path?token=secret',
    ).catch((e) => e);
    expect(error).toBeInstanceOf(OutboundError);
    expect(error.failure).toBe('network');
    expect(error.message).toBe('https://a.example: the request failed');
  });

  it('says why the network refused, from the codes of the causes only', async () => {
    const failing = (cause: unknown) =>
      createOutboundFetch({
        fetch: recorder(() => {
          throw new TypeError('fetch failed', { cause });
        }).transport,
      })('https://a.example/path?token=secret').catch((e) => e);
    const refused = Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:443 token=secret'), {
      code: 'ECONNREFUSED',
    });
    expect((await failing(refused)).message).toBe(
      'https://a.example: the request failed: the connection was refused (ECONNREFUSED)',
    );
    const tls = Object.assign(new Error('unable to verify'), {
      code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
    });
    expect((await failing(tls)).message).toBe(
      'https://a.example: the request failed: the TLS certificate was refused (UNABLE_TO_VERIFY_LEAF_SIGNATURE)',
    );
    const odd = Object.assign(new Error('odd'), { code: 'EWHATEVER' });
    expect((await failing(odd)).message).toBe(
      'https://a.example: the request failed: it failed (EWHATEVER)',
    );
    // A code that is not a code (a message smuggled in) is never quoted.
    const smuggled = Object.assign(new Error('x'), { code: 'Bearer secret-token' });
    expect((await failing(smuggled)).message).toBe('https://a.example: the request failed');
  });
});

describe('OutboundError', () => {
  it('is a KeywayError upstream_error (502) whose failure says why, and serializes as one', () => {
    const error = new OutboundError('blocked_address', 'https://10.0.0.1: address not allowed');
    expect(error).toBeInstanceOf(KeywayError);
    expect(isKeywayError(error, 'upstream_error')).toBe(true);
    expect([error.name, error.code, error.status, error.failure]).toEqual([
      'OutboundError',
      'upstream_error',
      502,
      'blocked_address',
    ]);
    expect(JSON.parse(JSON.stringify(error))).toEqual({
      error: 'upstream_error',
      error_description: 'https://10.0.0.1: address not allowed',
    });
  });
});
