import {
  type Broker,
  type BrokerConfig,
  type CallbackOutcome,
  createBroker,
  type Principal,
  resourcePathFromUrl,
  rootPrincipal,
} from '@keyway/core';
import { memoryStorage } from '@keyway/store-memory';
import type { TestWorld } from './world/options.js';

/** The root key of {@link createTestBroker}'s brokers: for tests only. */
export const TEST_ROOT_KEY = 'keyway-test-root-key-0123456789-abcdefghij';

/**
 * A broker wired to a test world: memory storage, provider management on, a base URL,
 * and every outbound request sent to the world's `fetch`, whatever `config` says, so a
 * unit test cannot reach the network.
 *
 * @example
 * const world = createTestWorld();
 * const broker = createTestBroker(world);
 * await broker.providers.put(rootPrincipal(), 'demo', {
 *   template: 'mcp',
 *   configuration: { resource_url: world.resourceUrl },
 * });
 */
export function createTestBroker(world: TestWorld, config: Partial<BrokerConfig> = {}): Broker {
  return createBroker({
    rootKey: TEST_ROOT_KEY,
    storage: memoryStorage(),
    baseUrl: 'https://keyway.example.test',
    providerManagement: true,
    purgeIntervalMs: false,
    ...config,
    fetch: world.fetch,
  });
}

/**
 * Authorizes a connection and plays the user at the world's consent page (`approve` by
 * default), then completes the callback: the whole flow, in memory.
 */
export async function connectInWorld(
  world: TestWorld,
  broker: Broker,
  options: {
    providerId: string;
    connectionId: string;
    principal?: Principal;
    scopes?: string[];
    decision?: 'approve' | 'deny';
  },
): Promise<CallbackOutcome> {
  const { authorization_url } = await broker.connections.authorize(
    options.principal ?? rootPrincipal(),
    options.providerId,
    {
      connection_id: options.connectionId,
      ...(options.scopes === undefined ? {} : { scopes: options.scopes }),
    },
  );
  const back = new URL(world.consent(authorization_url, options.decision ?? 'approve'));
  return broker.connections.callback(back);
}

/**
 * The broker's MCP gateway in memory (docs/api.md §13), as a `fetch` for an MCP client: each
 * request to `…/mcp/<connection path>` is served by `broker.gateway`, which calls the
 * world's MCP server with the connection's token — no sockets, and the client never holds
 * the token. Any other URL answers `404`.
 *
 * @example
 * const transport = new StreamableHTTPClientTransport(
 *   new URL('https://keyway.example.test/mcp/acme/alice/demo'),
 *   { fetch: gatewayFetch({ broker }) },
 * );
 */
export function gatewayFetch(options: {
  broker: Broker;
  principal?: Principal;
}): (input: string | URL | Request, init?: RequestInit) => Promise<Response> {
  const principal = options.principal ?? rootPrincipal();
  return async (input, init) => {
    const request =
      input instanceof Request && init === undefined ? input : new Request(input, init);
    const path = new URL(request.url).pathname;
    const at = path.indexOf('/mcp/');
    if (at < 0) return new Response(null, { status: 404 });
    return options.broker.gateway.mcp(principal, resourcePathFromUrl(path.slice(at + 5)), request);
  };
}
