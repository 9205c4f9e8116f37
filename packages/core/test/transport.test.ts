import { describe, expect, it } from 'vitest';
import { createOutboundFetch } from '../src/outbound/fetch.js';
import { OutboundError } from '../src/outbound/network-failure.js';
import { defaultTransport, type RuntimeGlobals } from '../src/outbound/transport.js';

// The default transport checks what a host name resolves to on every runtime,
// or refuses host names it cannot check.

/** A platform fetch that records what reached it. */
function recordingFetch() {
  const reached: string[] = [];
  const fetch = (async (input: string | URL | Request) => {
    reached.push(String(input));
    return new Response('{"ok":true}', { headers: { 'content-type': 'application/json' } });
  }) as typeof globalThis.fetch;
  return { reached, fetch };
}

const zone: Record<string, { v4: string[]; v6: string[] }> = {
  'vm.test': { v4: ['127.0.0.1'], v6: [] },
  'metadata.test': { v4: ['169.254.169.254'], v6: [] },
  'split.test': { v4: ['93.184.215.14'], v6: ['fd00::7'] },
  'public.test': { v4: ['93.184.215.14'], v6: ['2606:2800:21f:cb07:6820:80da:af6b:8b2c'] },
};

function deno(): RuntimeGlobals['Deno'] {
  return {
    resolveDns: async (name, type) => {
      const entry = zone[name];
      if (entry === undefined) throw new Error(`NotFound: ${name}`);
      return type === 'A' ? entry.v4 : entry.v6;
    },
  };
}

function bun(): RuntimeGlobals['Bun'] {
  return {
    dns: {
      lookup: async (name) => {
        const entry = zone[name];
        if (entry === undefined) throw new Error(`ENOTFOUND ${name}`);
        return [
          ...entry.v4.map((address) => ({ address, family: 4 })),
          ...entry.v6.map((address) => ({ address, family: 6 })),
        ];
      },
    },
  };
}

async function failure(promise: Promise<unknown>): Promise<OutboundError> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(OutboundError);
  return error as OutboundError;
}

describe.each([
  ['Deno', () => ({ Deno: deno() })],
  ['Bun', () => ({ Bun: bun() })],
])('defaultTransport() on %s', (_name, runtime) => {
  it.each(['vm.test', 'metadata.test', 'split.test'])(
    'refuses %s, which resolves to a non-public address, without saying which, before fetching',
    async (host) => {
      const platform = recordingFetch();
      const transport = defaultTransport([], { ...runtime(), fetch: platform.fetch });
      const outbound = createOutboundFetch({ fetch: transport });
      const error = await failure(outbound(`https://${host}/.well-known/oauth-protected-resource`));
      expect(error.failure).toBe('blocked_address');
      expect(error.message).toBe(`${host}: address not allowed`);
      expect(platform.reached).toEqual([]);
    },
  );

  it('fetches a host whose every address is public, and an allowed host without resolving it', async () => {
    const platform = recordingFetch();
    const transport = defaultTransport(['vm.test'], { ...runtime(), fetch: platform.fetch });
    expect((await transport('https://public.test/x', {})).status).toBe(200);
    expect((await transport('http://vm.test:8080/y', {})).status).toBe(200);
    expect(platform.reached).toEqual(['https://public.test/x', 'http://vm.test:8080/y']);
  });

  it('fails a name that does not resolve as a network error, not as a blocked address', async () => {
    const platform = recordingFetch();
    const outbound = createOutboundFetch({
      fetch: defaultTransport([], { ...runtime(), fetch: platform.fetch }),
    });
    const error = await failure(outbound('https://nowhere.test/x'));
    expect(error.failure).toBe('network');
    expect(platform.reached).toEqual([]);
  });
});

describe('defaultTransport() on a runtime without a resolver', () => {
  it('refuses host names it cannot check, saying how to allow them, and lets IP literals through', async () => {
    const platform = recordingFetch();
    const outbound = createOutboundFetch({
      fetch: defaultTransport(['dev.test'], { fetch: platform.fetch }),
      allowedHosts: ['dev.test'],
    });
    const error = await failure(outbound('https://mcp.example.com/mcp'));
    expect(error.failure).toBe('blocked_address');
    expect(error.message).toBe(
      'mcp.example.com: this runtime cannot check what a host name resolves to; pass a "fetch" that resolves and checks addresses, or list the host in "allowedHosts"',
    );
    expect((await outbound('https://93.184.215.14/x')).status).toBe(200);
    expect((await outbound('http://dev.test/x')).status).toBe(200);
    expect(platform.reached).toEqual(['https://93.184.215.14/x', 'http://dev.test/x']);
  });
});
