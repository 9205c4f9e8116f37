import { lookup } from 'node:dns/promises';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { type AddressInfo, createServer as createNetServer } from 'node:net';
import { hostname } from 'node:os';
import { classifyAddress } from '@keyway/core/outbound';
import { memoryStorage } from '@keyway/store-memory';
import { describe, expect, it } from 'vitest';
import { Harness } from './harness.js';
import { BASE } from './probe-support.js';

/*
 * The library's default transport on Node checks what a host name resolves to, and refuses
 * an internal address without connecting (docs/security.md "Outbound requests").
 */

/**
 * A host name of this machine that resolves to a non-public address without any DNS server:
 * the machine's own name (usually in /etc/hosts on 127.0.1.1, 127.0.0.1 or a container
 * address), else any other name /etc/hosts maps to loopback. `localhost` is not one: the
 * URL guard refuses it before any transport runs.
 */
async function internalName(): Promise<string> {
  const candidates = [hostname()];
  try {
    for (const line of readFileSync('/etc/hosts', 'utf8').split('\n')) {
      const [address, ...names] = line.replace(/#.*/, '').trim().split(/\s+/);
      if (address?.startsWith('127.') || address === '::1') candidates.push(...names);
    }
  } catch {}
  for (const name of candidates) {
    if (name === '' || name === 'localhost' || name.endsWith('.localhost')) continue;
    const addresses = await lookup(name, { all: true }).catch(() => []);
    if (addresses.length > 0 && addresses.some((a) => classifyAddress(a.address) !== 'public')) {
      return name;
    }
  }
  throw new Error('this machine has no host name that resolves to a non-public address');
}

describe('the library’s default transport on Node checks what a host name resolves to', () => {
  it('refuses a name that resolves to an internal address, says only "address not allowed", and never connects', async () => {
    const name = await internalName();
    let connections = 0;
    const server = createNetServer((socket) => {
      connections++;
      socket.destroy();
    });
    server.listen(0);
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    // No `fetch` option: the broker picks its own transport.
    const h = new Harness(memoryStorage(), { providerManagement: true, baseUrl: BASE });
    try {
      const reply = await h.call('POST', '/api/admin/discover', {
        body: { resource_url: `https://${name}:${port}/mcp` },
      });
      expect(reply.status).toBe(200);
      expect(reply.body.ok).toBe(false);
      expect(reply.body.error).toBe('discovery_failed');
      const notes = reply.body.steps.map((step: { note: string }) => step.note);
      expect(notes[0]).toBe(`${name}: address not allowed`);
      expect(JSON.stringify(reply.body)).not.toMatch(/loopback|private|127\.|::1/);
      expect(connections).toBe(0);
    } finally {
      await h.broker.close();
      server.close();
    }
  });
});
