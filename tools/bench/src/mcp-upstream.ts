// The MCP server behind the gateway in `pnpm bench`, in a process of its own: the official
// SDK's server (stateless, JSON answers) with one tool, `echo`, for any bearer token. A GET
// opens an event stream: `Last-Event-ID: idle` holds it open with one comment; `flood`
// writes 64 KiB events as fast as the socket takes them (the gateway's backpressure is what
// slows it), and counts what it wrote (`GET /written`). A second listener is the floor of a
// proxy hop: a bare node:http reverse proxy to the first, which swaps in a fixed token
// (`hop.ts`; proxy-hop.ts runs the same in a process of its own). `LIST_DELAY_MS` makes
// `tools/list` take that long, as a remote server's would.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { z } from 'zod';
import { proxyHop } from './hop.js';

const EVENT = `data: ${'x'.repeat(64 * 1024 - 8)}\n\n`;
let written = 0;
/** A remote server's answer time for `tools/list` (`LIST_DELAY_MS`, the portal's bench). */
const listDelay = Number(process.env.LIST_DELAY_MS ?? '0');

async function call(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  if (listDelay > 0 && Buffer.concat(chunks).includes('"tools/list"')) {
    await new Promise((resolve) => setTimeout(resolve, listDelay));
  }
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (typeof value === 'string') headers.set(name, value);
  }
  const server = new McpServer({ name: 'bench-upstream', version: '1.0.0' });
  server.registerTool(
    'echo',
    { description: 'Echoes its text', inputSchema: { text: z.string() } },
    async ({ text }) => ({ content: [{ type: 'text', text }] }),
  );
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: undefined,
    enableJsonResponse: true,
  });
  await server.connect(transport);
  const response = await transport.handleRequest(
    new Request(`http://127.0.0.1${req.url}`, {
      method: 'POST',
      headers,
      body: Buffer.concat(chunks),
    }),
  );
  const body = Buffer.from(await response.arrayBuffer());
  const out: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    out[name] = value;
  });
  res.writeHead(response.status, out).end(body);
  await server.close();
}

async function stream(req: IncomingMessage, res: ServerResponse): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' });
  if (req.headers['last-event-id'] !== 'flood') {
    res.write(': open\n\n');
    return;
  }
  let open = true;
  res.once('close', () => {
    open = false;
  });
  while (open) {
    written += EVENT.length;
    if (!res.write(EVENT)) {
      await new Promise((resolve) => {
        res.once('drain', resolve);
        res.once('close', resolve);
      });
    }
  }
}

const server = createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/written') {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ written }));
    return;
  }
  if (!req.headers.authorization?.startsWith('Bearer ')) {
    res.writeHead(401, { 'www-authenticate': 'Bearer' }).end();
    return;
  }
  const work = req.method === 'GET' ? stream(req, res) : call(req, res);
  work.catch((error: unknown) => res.destroy(error as Error));
});
server.maxConnections = 10_000;
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as { port: number };
  const proxy = proxyHop(port);
  proxy.listen(0, '127.0.0.1', () => {
    const proxyPort = (proxy.address() as { port: number }).port;
    console.log(
      `mcp upstream listening on http://127.0.0.1:${port} proxy http://127.0.0.1:${proxyPort}`,
    );
  });
});
