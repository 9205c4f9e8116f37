import { storageFactories } from '@keyway/test-storages';
import { connectInWorld, createTestWorld, type TestWorld } from '@keyway/testing';
import { describe, expect, it } from 'vitest';
import type { Principal } from '../../src/auth/principal.js';
import type { Broker } from '../../src/broker/broker.js';
import type { Storage } from '../../src/storage/contract.js';
import { answerOf, BASE, brokerPerTest, ROOT, refusal } from '../support/spec.js';

/*
 * The gateway's handling of a connection's tokens (docs/api.md §13): a token that is due is
 * refreshed before the request goes, an upstream 401 is answered by one refresh and one
 * retry of the same request, a token refused after its refresh asks for consent again (the
 * URL for a caller that may authorize, 409 for one that may not), a 401 challenge's scope is
 * asked for with those already granted, and no token goes to a server the provider was
 * re-pointed at. The MCP server is @keyway/testing's, behind a fetch that records what it
 * was sent and refuses the tokens a test names. What the gateway writes on the wire (headers,
 * streams, the Node transport's piping) is @keyway/http's tests'.
 */

const CONNECTION = 'acme/users/alice/linear';

/** One request the MCP server was sent with a token. */
interface Seen {
  authorization: string;
  body: string;
}

/** An MCP server that records the requests with a token and refuses the tokens of `refused` with a 401. */
function recordedServer(world: TestWorld) {
  const server = {
    seen: [] as Seen[],
    refused: new Set<string>(),
    refuseAll: false,
    /** A challenge to answer every request with, instead of the world's MCP server. */
    challenge: null as string | null,
    async fetch(input: string | URL | Request, init?: RequestInit): Promise<Response> {
      const request = new Request(input, init);
      const authorization = request.headers.get('authorization');
      // Discovery's unauthenticated probes are the world's to answer, and not recorded.
      if (!request.url.startsWith(world.resourceUrl) || authorization === null) {
        return world.fetch(request);
      }
      server.seen.push({ authorization, body: await request.clone().text() });
      const token = authorization.replace(/^Bearer /, '');
      if (server.challenge !== null) {
        return new Response(null, {
          status: 401,
          headers: { 'www-authenticate': server.challenge },
        });
      }
      if (server.refuseAll || server.refused.has(token)) {
        return Response.json(
          { error: 'invalid_token' },
          { status: 401, headers: { 'www-authenticate': 'Bearer error="invalid_token"' } },
        );
      }
      return world.fetch(request);
    },
  };
  return server;
}

describe.each(storageFactories)("the gateway's credentials ($name storage)", (factory) => {
  const spec = brokerPerTest();

  /** The world, its recorded server and a connected broker; `wrap` stands over its storage. */
  async function setUp(wrap: (storage: Storage) => Storage = (storage) => storage) {
    const world = createTestWorld({ now: () => spec.now });
    const server = recordedServer(world);
    // Another server, which the provider may be re-pointed at.
    const other = createTestWorld({
      now: () => spec.now,
      issuer: 'https://auth.other.example.test',
      resourceUrl: 'https://other.example.test/mcp',
    });
    const storage = wrap(await factory.create());
    const broker = spec.open(storage, {
      fetch: (input, init) =>
        new Request(input, init).url.includes('other.example.test')
          ? other.fetch(input, init)
          : server.fetch(input, init),
    });
    const put = await broker.providers.put(ROOT, 'linear', {
      template: 'mcp',
      configuration: { resource_url: world.resourceUrl },
    });
    expect(put.created).toBe(true);
    const connected = await connectInWorld(world, broker, {
      providerId: 'linear',
      connectionId: CONNECTION,
    });
    expect(connected.status).toBe('active');
    return { world, server, other, storage, broker };
  }

  /** `body` to the gateway as an MCP client posts it, as `principal` (the root by default). */
  const post = (broker: Broker, body: unknown, principal: Principal = ROOT) =>
    broker.gateway.mcp(
      principal,
      CONNECTION,
      new Request(`${BASE}/mcp/${CONNECTION}`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: JSON.stringify(body),
      }),
    );

  /** The connection's access token as the vault holds it. */
  async function storedAccessToken(broker: Broker, storage: Storage): Promise<string> {
    const entry = await storage.getVaultEntry('connection_tokens', CONNECTION);
    if (entry === null) throw new Error(`no tokens for ${CONNECTION}`);
    return (JSON.parse(await broker.vault.open(entry)) as { access_token: string }).access_token;
  }

  it('reads the connection anew at each call, without waiting where the storage can, and never its provider', async () => {
    const reads = { sync: 0, promised: 0, handOut: 0 };
    const counting = (storage: Storage): Storage => {
      const fast = storage.fastPaths ?? {};
      const count = <A extends unknown[], R>(
        read: ((...args: A) => R) | undefined,
        into: keyof typeof reads,
      ) =>
        read === undefined
          ? undefined
          : (...args: A): R => {
              reads[into] += 1;
              return read(...args);
            };
      const counted = {
        ...fast,
        readWithTokens: count(fast.readWithTokens, 'promised'),
        readWithTokensSync: count(fast.readWithTokensSync, 'sync'),
        // A hand-out's read, which also reads the provider: not the gateway's.
        readForHandOut: count(fast.readForHandOut, 'handOut'),
        readForHandOutSync: count(fast.readForHandOutSync, 'handOut'),
      };
      return new Proxy(storage, {
        get(target, property, receiver) {
          if (property === 'fastPaths') return counted;
          const value = Reflect.get(target, property, receiver);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
    };
    const { server, storage, broker } = await setUp(counting);
    const synchronous = storage.fastPaths?.readWithTokensSync !== undefined;
    // Memory and SQLite read without I/O; PostgreSQL does not. All three offer the read.
    expect(synchronous).toBe(factory.name !== 'postgres');
    expect(storage.fastPaths?.readWithTokens).toBeTypeOf('function');
    reads.sync = 0;
    reads.promised = 0;
    reads.handOut = 0;
    for (let call = 1; call <= 3; call++) {
      const listed = await answerOf(
        await post(broker, { jsonrpc: '2.0', id: call, method: 'tools/list' }),
      );
      expect(listed.status).toBe(200);
    }
    expect(reads).toEqual(
      synchronous ? { sync: 3, promised: 0, handOut: 0 } : { sync: 0, promised: 3, handOut: 0 },
    );

    // Another instance refreshes the tokens: the next call sends the new access token.
    const before = await storedAccessToken(broker, storage);
    const other = spec.another(storage, { fetch: server.fetch });
    const refreshed = await other.connections.credentials(ROOT, CONNECTION, {
      force_refresh: true,
    });
    expect(refreshed.access_token).not.toBe(before);
    expect(await storedAccessToken(broker, storage)).toBe(refreshed.access_token);
    const after = await answerOf(
      await post(broker, { jsonrpc: '2.0', id: 4, method: 'tools/list' }),
    );
    expect(after.status).toBe(200);
    expect(server.seen.at(-1)?.authorization).toBe(`Bearer ${refreshed.access_token}`);

    // Another instance deletes the connection: the next call finds none.
    await other.connections.delete(ROOT, CONNECTION);
    const gone = await refusal(post(broker, { jsonrpc: '2.0', id: 5, method: 'tools/list' }));
    expect(gone.code).toBe('not_found');
    expect(server.seen).toHaveLength(4);
  });

  it('refreshes a token that is due before forwarding', async () => {
    const { server, storage, broker } = await setUp();
    const before = await storedAccessToken(broker, storage);
    spec.now += 3_600_000;
    const listed = await answerOf(
      await post(broker, { jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    );
    expect(listed.status).toBe(200);
    const after = await storedAccessToken(broker, storage);
    expect(after).not.toBe(before);
    expect(new Set(server.seen.map((seen) => seen.authorization))).toEqual(
      new Set([`Bearer ${after}`]),
    );
  });

  it('refreshes once on an upstream 401 and retries the same request once', async () => {
    const { server, storage, broker } = await setUp();
    const before = await storedAccessToken(broker, storage);
    server.refused.add(before);
    const listed = await answerOf(
      await post(broker, { jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    );
    expect(listed.body.result.tools[0].name).toBe('echo');
    const after = await storedAccessToken(broker, storage);
    expect(after).not.toBe(before);
    // The request went twice: refused, then retried with the new token, the same body.
    expect(server.seen.map((seen) => seen.authorization)).toEqual([
      `Bearer ${before}`,
      `Bearer ${after}`,
    ]);
    expect(server.seen[0]?.body).toBe(server.seen[1]?.body);
  });

  it('asks for consent again when the upstream refuses the refreshed token too: one retry, never more', async () => {
    const { server, broker } = await setUp();
    server.refuseAll = true;
    const alice = await broker.authenticate(
      (await broker.tokens.mint(ROOT, { name: 'alice', scopes: ['acme/users/alice'] }))
        .access_token,
    );
    const refused = await refusal(
      post(broker, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, alice),
    );
    expect(refused.status).toBe(409);
    expect(refused.toJSON()).toEqual({
      error: 'reauthorization_required',
      error_description:
        "the MCP server refused the connection's token (HTTP 401) after a refresh: authorize it again",
    });
    expect(server.seen).toHaveLength(2);
    // A caller that may authorize gets the URL to do it, as a JSON-RPC error.
    const elicited = await answerOf(
      await post(broker, { jsonrpc: '2.0', id: 2, method: 'tools/list' }),
    );
    expect(elicited.status).toBe(200);
    expect(elicited.body.id).toBe(2);
    expect(elicited.body.error.code).toBe(-32042);
    expect(server.seen).toHaveLength(4);
    // The connection itself stays active: the server may take its token again.
    expect((await broker.connections.get(ROOT, CONNECTION)).status).toBe('active');
  });

  it('asks for the scope a 401 challenge names, with those already granted', async () => {
    const { server, broker } = await setUp();
    server.challenge = 'Bearer error="invalid_token", scope="files:read"';
    const granted = (await broker.connections.get(ROOT, CONNECTION)).scopes;
    const elicited = await answerOf(
      await post(broker, { jsonrpc: '2.0', id: 3, method: 'tools/list' }),
    );
    const url = new URL(elicited.body.error.data.elicitations[0]?.url ?? '');
    expect(url.searchParams.get('scope')?.split(' ')).toEqual([...granted, 'files:read']);
  });

  it('never sends the token to a provider re-pointed at another server: the connection needs consent', async () => {
    const { server, other, broker } = await setUp();
    const moved = await broker.providers.put(ROOT, 'linear', {
      template: 'mcp',
      configuration: { resource_url: other.resourceUrl },
    });
    expect(moved.created).toBe(false);
    const answer = await answerOf(
      await post(broker, { jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    );
    expect(answer.body.error.code).toBe(-32042);
    expect(answer.body.error.data.authorization_url.startsWith(`${other.issuer}/`)).toBe(true);
    // Neither server got a request with a token: the old one is not the provider's any
    // more, the new one is not the party the token was issued for.
    expect(other.stats.mcpCalls).toBe(0);
    expect(server.seen).toEqual([]);
  });
});
