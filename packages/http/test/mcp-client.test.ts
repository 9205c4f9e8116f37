import {
  type ConnectionTokens,
  connectionFetch,
  InsufficientScopeError,
  KeywayError,
  rootPrincipal,
} from '@keyway/core';
import { memoryStorage } from '@keyway/store-memory';
import { createTestWorld, type TestWorld } from '@keyway/testing';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { connectThroughConsent, Harness, putProvider, START } from './harness.js';

const BASE = 'https://keyway.example.test';
const CONNECTION = 'acme/users/alice/linear';

/** Finds an error of a type anywhere in a `cause` chain (the SDK may wrap what fetch threw). */
function findCause<T>(error: unknown, type: new (...args: never[]) => T): T | null {
  for (
    let current = error;
    current !== undefined && current !== null;
    current = (current as { cause?: unknown }).cause
  ) {
    if (current instanceof type) return current;
  }
  return null;
}

describe('giving a connection to the official MCP SDK client', () => {
  let h: Harness;
  let world: TestWorld;
  const clients: Client[] = [];

  beforeEach(async () => {
    world = createTestWorld({ now: () => h?.now ?? START, challengeScope: 'read' });
    h = new Harness(memoryStorage(), {
      fetch: world.fetch,
      baseUrl: BASE,
      providerManagement: true,
    });
    await putProvider(h, world);
    await connectThroughConsent(h, world, CONNECTION);
  });

  afterEach(async () => {
    for (const client of clients.splice(0)) await client.close();
    expect(h.errors).toEqual([]);
    await h.broker.close();
  });

  async function connect(fetch: ReturnType<typeof connectionFetch>): Promise<Client> {
    const client = new Client({ name: 'keyway-test', version: '1.0.0' });
    clients.push(client);
    await client.connect(new StreamableHTTPClientTransport(new URL(world.resourceUrl), { fetch }));
    return client;
  }

  it('initializes, lists tools and calls one with the connection’s token, in process', async () => {
    const client = await connect(
      connectionFetch({
        source: { broker: h.broker, principal: rootPrincipal(), connectionId: CONNECTION },
        fetch: world.fetch,
      }),
    );
    expect((await client.listTools()).tools.map((tool) => tool.name)).toEqual(['echo']);
    const result = await client.callTool({ name: 'echo', arguments: { hello: 'world' } });
    expect(result.content).toEqual([{ type: 'text', text: '{"hello":"world"}' }]);
    expect(world.stats.mcpCalls).toBeGreaterThanOrEqual(3);
  });

  it('retries once with a forced refresh when the server answers 401', async () => {
    const client = await connect(
      connectionFetch({
        source: { broker: h.broker, principal: rootPrincipal(), connectionId: CONNECTION },
        fetch: world.fetch,
      }),
    );
    const entry = await h.storage.getVaultEntry('connection_tokens', CONNECTION);
    const tokens = JSON.parse(await h.broker.vault.open(entry as never)) as ConnectionTokens;
    const secret = world.clients.get(tokens.party.client_id)?.client_secret as string;
    await world.fetch('https://auth.example.test/oauth/revoke', {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${btoa(`${tokens.party.client_id}:${secret}`)}`,
      },
      body: new URLSearchParams({ token: tokens.access_token }).toString(),
    });
    const result = await client.callTool({ name: 'echo', arguments: { again: true } });
    expect(result.content).toEqual([{ type: 'text', text: '{"again":true}' }]);
    expect(world.stats.refreshes).toBe(1);
  });

  it('surfaces 403 insufficient_scope with the challenged scopes', async () => {
    world.set({ toolScope: 'admin' });
    const client = await connect(
      connectionFetch({
        source: { broker: h.broker, principal: rootPrincipal(), connectionId: CONNECTION },
        fetch: world.fetch,
      }),
    );
    const error = await client.callTool({ name: 'echo', arguments: {} }).catch((e: unknown) => e);
    const scopeError = findCause(error, InsufficientScopeError);
    expect(scopeError).not.toBeNull();
    expect(scopeError?.scopes).toEqual(['read', 'admin']);
    // The app re-authorizes with those scopes.
    const again = await h.call('POST', '/api/oauth/authorize/linear', {
      body: { connection_id: CONNECTION, scopes: scopeError?.scopes },
    });
    expect(new URL(again.body.authorization_url).searchParams.get('scope')).toBe('read admin');
  });

  it('works from another service over Keyway’s HTTP API with a broker token', async () => {
    const token = await h.mint('agent', [CONNECTION]);
    const keywayFetch = (url: string, init: RequestInit) => h.handler(new Request(url, init));
    const client = await connect(
      connectionFetch({
        source: { keywayUrl: BASE, token, connectionId: CONNECTION, keywayFetch },
        fetch: world.fetch,
      }),
    );
    const result = await client.callTool({ name: 'echo', arguments: { remote: 1 } });
    expect(result.content).toEqual([{ type: 'text', text: '{"remote":1}' }]);

    const outsider = await h.mint('outsider', ['acme/users/bob']);
    const refused = await connect(
      connectionFetch({
        source: { keywayUrl: BASE, token: outsider, connectionId: CONNECTION, keywayFetch },
        fetch: world.fetch,
      }),
    ).catch((e: unknown) => e);
    expect(findCause(refused, KeywayError)?.code).toBe('insufficient_scope');
  });
});
