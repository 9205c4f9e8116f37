// The floor of the portal's `tools/call` in `pnpm bench`, in a process of its own: what any
// MCP relay built on the official SDK does, and nothing else — the SDK's server (the
// stateful 2025-11-25 wire, as the portal serves it) whose `tools/call` is the SDK's client
// calling the server behind (`UPSTREAM`, with the fixed token `TOKEN`), one client per
// session, fetched directly: no gateway, no storage, no policy.
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { toWebRequest, writeWebResponse } from '@keyway/http/node';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Server, WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/server';

const upstream = new URL(process.env.UPSTREAM ?? 'http://127.0.0.1:1/mcp');
const token = process.env.TOKEN ?? '';
const sessions = new Map<string, WebStandardStreamableHTTPServerTransport>();

async function connect(): Promise<Client> {
  const client = new Client(
    { name: 'sdk-relay', version: '1' },
    { versionNegotiation: { mode: 'auto' } },
  );
  await client.connect(
    new StreamableHTTPClientTransport(upstream, {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
      // Without the transport's long-lived abort signal: undici's `Request` follows it with
      // one more listener per request, a cost that grows with the session (the portal sends
      // no Web `Request` for that reason). The floor relays no cancellation.
      fetch: (input, init) => fetch(input, { ...init, signal: null }),
    }),
  );
  return client;
}

async function open(request: Request): Promise<Response> {
  const server = new Server({ name: 'sdk-relay', version: '1' }, { capabilities: { tools: {} } });
  let client: Promise<Client> | undefined;
  server.setRequestHandler('tools/list', async (list) => {
    client ??= connect();
    return (await client).listTools(list.params);
  });
  server.setRequestHandler('tools/call', async (call, ctx) => {
    client ??= connect();
    return (await client).callTool(call.params, { signal: ctx.mcpReq.signal });
  });
  const transport: WebStandardStreamableHTTPServerTransport =
    new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        sessions.set(id, transport);
      },
    });
  await server.connect(transport);
  return transport.handleRequest(request);
}

const server = createServer((req, res) => {
  const request = toWebRequest(req);
  const id = request.headers.get('mcp-session-id');
  const transport = id === null ? undefined : sessions.get(id);
  const answer =
    id === null
      ? open(request)
      : transport === undefined
        ? Promise.resolve(new Response('unknown session', { status: 404 }))
        : transport.handleRequest(request);
  answer.then((response) => writeWebResponse(res, response)).catch(() => res.destroy());
});
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as { port: number };
  console.log(`listening on http://127.0.0.1:${port}`);
});
