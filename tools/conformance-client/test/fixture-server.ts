import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createTestWorld, type TestWorld } from '@keyway/testing';
import { completable } from '@modelcontextprotocol/sdk/server/completable.js';
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { z } from 'zod';

/*
 * An MCP server of the official SDK (v1, the stateful wire) with the surface the
 * conformance suite's server scenarios read — its resources, prompts, a tool, completion,
 * logging — written here from the scenarios' descriptions. It answers at `/open/mcp`
 * without a credential (the suite run against it directly) and at `/mcp` with a token of
 * its test world's authorization server (the same server behind Keyway's portal).
 */

/** A 1×1 PNG: what `test://static-binary` holds. */
const PIXEL =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

function fixture(): McpServer {
  const server = new McpServer(
    { name: 'keyway-conformance-fixture', version: '1.0.0' },
    { capabilities: { logging: {}, completions: {} } },
  );
  server.registerResource(
    'static-text',
    'test://static-text',
    { description: 'A text resource', mimeType: 'text/plain' },
    async (uri) => ({
      contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'A static text resource.' }],
    }),
  );
  server.registerResource(
    'static-binary',
    'test://static-binary',
    { description: 'A binary resource', mimeType: 'image/png' },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'image/png', blob: PIXEL }] }),
  );
  server.registerResource(
    'template',
    new ResourceTemplate('test://template/{id}/data', { list: undefined }),
    { description: 'Data by id', mimeType: 'application/json' },
    async (uri, { id }) => ({
      contents: [
        {
          uri: uri.href,
          mimeType: 'application/json',
          text: JSON.stringify({ id, data: `item ${String(id)}` }),
        },
      ],
    }),
  );
  server.registerPrompt(
    'test_simple_prompt',
    { description: 'A prompt without arguments' },
    async () => ({
      messages: [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt.' } }],
    }),
  );
  server.registerPrompt(
    'test_prompt_with_arguments',
    {
      description: 'A prompt with two arguments',
      argsSchema: {
        arg1: completable(z.string(), (value) =>
          ['paris', 'park', 'party'].filter((word) => word.startsWith(value)),
        ),
        arg2: z.string(),
      },
    },
    async ({ arg1, arg2 }) => ({
      messages: [
        {
          role: 'user',
          content: { type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` },
        },
      ],
    }),
  );
  server.registerTool('test_simple_text', { description: 'Answers a text' }, async () => ({
    content: [{ type: 'text', text: 'This is a simple text response for testing.' }],
  }));
  server.registerTool('test_error_handling', { description: 'Answers a tool error' }, async () => ({
    isError: true,
    content: [{ type: 'text', text: 'This tool intentionally returns an error for testing' }],
  }));
  return server;
}

function bearer(req: IncomingMessage): string {
  return (req.headers.authorization ?? '').replace(/^Bearer /, '');
}

/** The fixture on loopback, in front of a test world (which answers `/mcp` without a token). */
export class FixtureServer {
  server!: Server;
  origin!: string;
  world!: TestWorld;
  readonly #sessions = new Map<string, WebStandardStreamableHTTPServerTransport>();

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      this.#route(req, res).catch((error) => res.destroy(error));
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.origin = `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
    this.world = createTestWorld({
      issuer: `${this.origin}/as`,
      resourceUrl: `${this.origin}/mcp`,
    });
  }

  async stop(): Promise<void> {
    for (const transport of this.#sessions.values()) await transport.close();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  async #route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
      if (typeof value === 'string') headers.set(name, value);
    }
    const aborted = new AbortController();
    res.once('close', () => aborted.abort());
    const request = new Request(`${this.origin}${req.url}`, {
      method: req.method ?? 'GET',
      headers,
      signal: aborted.signal,
      ...(body.length > 0 ? { body } : {}),
    });
    let response: Response;
    if (path === '/open/mcp') {
      response = await this.#mcp(request);
    } else if (path === '/mcp' && this.world.isValidAccessToken(bearer(req))) {
      response = await this.#mcp(request);
    } else {
      response = await this.world.fetch(request);
    }
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (response.body === null) {
      res.end();
      return;
    }
    const reader = response.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      res.write(value);
    }
    res.end();
  }

  async #mcp(request: Request): Promise<Response> {
    const id = request.headers.get('mcp-session-id');
    if (id !== null) {
      const transport = this.#sessions.get(id);
      if (transport === undefined) {
        return Response.json(
          { jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null },
          { status: 404 },
        );
      }
      return transport.handleRequest(request);
    }
    const transport: WebStandardStreamableHTTPServerTransport =
      new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sessionId) => {
          this.#sessions.set(sessionId, transport);
        },
        onsessionclosed: (sessionId) => {
          this.#sessions.delete(sessionId);
        },
      });
    await fixture().connect(transport);
    return transport.handleRequest(request);
  }
}
