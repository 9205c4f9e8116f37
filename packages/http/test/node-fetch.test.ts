import type { LookupAddress } from 'node:dns';
import { createNodeFetch, createOutboundFetch, OutboundError } from '@keyway/core/outbound';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenOnLoopback } from './harness.js';

/** A resolver for test names: what a hostile or split-horizon DNS could answer. */
const zone: Record<string, LookupAddress[]> = {
  'internal.test': [{ address: '127.0.0.1', family: 4 }],
  'metadata.test': [{ address: '169.254.169.254', family: 4 }],
  'mixed.test': [
    { address: '93.184.215.14', family: 4 },
    { address: '10.0.0.7', family: 4 },
  ],
  'mapped.test': [{ address: '::ffff:127.0.0.1', family: 6 }],
};
const resolve = async (hostname: string) => {
  const answer = zone[hostname];
  if (answer === undefined)
    throw Object.assign(new Error(`no such host ${hostname}`), { code: 'ENOTFOUND' });
  return answer;
};

describe('createNodeFetch(): resolved addresses and pinning', () => {
  let server: Awaited<ReturnType<typeof listenOnLoopback>>;
  let port: number;
  const seen: string[] = [];

  beforeAll(async () => {
    server = await listenOnLoopback((req, res) => {
      seen.push(`${req.method} ${req.headers.host} ${req.url}`);
      if (req.url === '/redirect-out') {
        res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data' }).end();
      } else if (req.url === '/redirect-in') {
        res.writeHead(302, { location: '/ok' }).end();
      } else {
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ path: req.url }));
      }
    });
    port = server.port;
  });

  afterAll(() => server.close());

  async function refusal(url: string, allowedHosts: string[] = []): Promise<OutboundError> {
    const outbound = createOutboundFetch({
      fetch: createNodeFetch({ resolve, allowedHosts }),
      allowedHosts,
    });
    const error = await outbound(url).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OutboundError);
    return error as OutboundError;
  }

  it.each(['internal.test', 'metadata.test', 'mixed.test', 'mapped.test'])(
    'refuses %s, a host name resolving to a non-public address, before connecting',
    async (host) => {
      const before = seen.length;
      const error = await refusal(`https://${host}:${port}/secret`);
      expect(error.failure).toBe('blocked_address');
      // The refusal never tells what the name resolves to.
      expect(error.message).toBe(`${host}: address not allowed`);
      expect(seen.length).toBe(before);
    },
  );

  it('connects to the checked address when the host is allowed (development, tests)', async () => {
    const outbound = createOutboundFetch({
      fetch: createNodeFetch({ resolve, allowedHosts: ['internal.test'] }),
      allowedHosts: ['internal.test'],
    });
    const response = await outbound(`http://internal.test:${port}/ok`);
    expect(await response.json()).toEqual({ path: '/ok' });
    expect(seen.at(-1)).toBe(`GET internal.test:${port} /ok`);
    const followed = await outbound(`http://internal.test:${port}/redirect-in`);
    expect(await followed.json()).toEqual({ path: '/ok' });
  });

  it('refuses a redirect to a private address from an allowed host', async () => {
    const error = await refusal(`http://internal.test:${port}/redirect-out`, ['internal.test']);
    expect(error.failure).toBe('redirect');
  });

  it('reports an unknown host as a network error', async () => {
    expect((await refusal('https://nowhere.test/')).failure).toBe('network');
  });
});
