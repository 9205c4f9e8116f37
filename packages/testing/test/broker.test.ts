import { connectionFetch, rootPrincipal } from '@keyway/core';
import { describe, expect, it } from 'vitest';
import { connectInWorld, createTestBroker, createTestWorld, gatewayFetch } from '../src/index.js';

describe('the test kit’s broker helpers', () => {
  it('runs the whole flow in memory, ending in an MCP call with the brokered token', async () => {
    const world = createTestWorld({ toolScope: undefined });
    const broker = createTestBroker(world);
    await broker.providers.put(rootPrincipal(), 'demo', {
      template: 'mcp',
      configuration: { resource_url: world.resourceUrl },
    });
    const outcome = await connectInWorld(world, broker, {
      providerId: 'demo',
      connectionId: 'acme/alice/demo',
    });
    expect(outcome).toMatchObject({ status: 'active', error: null });
    const response = await connectionFetch({
      source: { broker, principal: rootPrincipal(), connectionId: 'acme/alice/demo' },
      fetch: world.fetch,
    })(world.resourceUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/list' }),
    });
    expect(((await response.json()) as { id: number }).id).toBe(7);
    expect(world.stats.mcpCalls).toBe(1);
    const denied = await connectInWorld(world, broker, {
      providerId: 'demo',
      connectionId: 'acme/bob/demo',
      decision: 'deny',
    });
    expect(denied).toMatchObject({ status: 'error', error: { code: 'access_denied' } });
  });

  it('sends every outbound request to the world, even when a config names another fetch', async () => {
    const world = createTestWorld();
    let escaped = 0;
    const broker = createTestBroker(world, {
      fetch: async () => {
        escaped++;
        return new Response(null, { status: 599 });
      },
    });
    const trace = await broker.providers.discover(rootPrincipal(), {
      resource_url: world.resourceUrl,
    });
    expect(trace.ok).toBe(true);
    expect(escaped).toBe(0);
    expect(world.requests.length).toBeGreaterThan(0);
  });

  it('serves the gateway in memory: MCP calls reach the world with a token the client never holds', async () => {
    const world = createTestWorld({ toolScope: undefined });
    const broker = createTestBroker(world);
    await broker.providers.put(rootPrincipal(), 'demo', {
      template: 'mcp',
      configuration: { resource_url: world.resourceUrl },
    });
    await connectInWorld(world, broker, { providerId: 'demo', connectionId: 'acme/alice/demo' });
    const fetch = gatewayFetch({ broker });
    const response = await fetch('https://keyway.example.test/mcp/acme/alice/demo', {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/list' }),
    });
    expect(response.status).toBe(200);
    const text = await response.text();
    expect((JSON.parse(text) as { id: number }).id).toBe(3);
    expect(world.stats.mcpCalls).toBe(1);
    expect(world.secrets().filter((secret) => text.includes(secret))).toEqual([]);
    expect((await fetch('https://keyway.example.test/elsewhere')).status).toBe(404);
    const missing = fetch('https://keyway.example.test/mcp/acme/nobody/demo', {
      method: 'POST',
      body: '{}',
    });
    await expect(missing).rejects.toMatchObject({ code: 'not_found' });
    await broker.close();
  });
});
