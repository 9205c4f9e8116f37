import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createTestWorld, type TestWorld } from '@keyway/testing';
import { completable } from '@modelcontextprotocol/sdk/server/completable.js';
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import {
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import {
  createMcpHandler,
  type McpHttpHandler,
  McpServer as ModernServer,
  ResourceTemplate as ModernTemplate,
  completable as modernCompletable,
} from '@modelcontextprotocol/server';
import { z } from 'zod';

/*
 * An MCP server of the official SDK (v1, the stateful wire; or v2, the 2026-07-28 wire)
 * with the surface the conformance suite's server scenarios read — its resources, prompts,
 * a tool, completion, logging — written here from the scenarios' descriptions. It answers at `/open/mcp`
 * without a credential (the suite run against it directly) and at `/mcp` with a token of
 * its test world's authorization server (the same server behind Keyway's portal).
 */

/** A 1×1 PNG: what `test://static-binary` holds. */
const PIXEL =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

/** What both servers offer, as data: each registers it with its own SDK's classes. */
const SURFACE = {
  info: { name: 'keyway-conformance-fixture', version: '1.0.0' },
  resources: [
    {
      name: 'static-text',
      uri: 'test://static-text',
      meta: { description: 'A text resource', mimeType: 'text/plain' },
      read: (uri: URL) => ({
        contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'A static text resource.' }],
      }),
    },
    {
      name: 'static-binary',
      uri: 'test://static-binary',
      meta: { description: 'A binary resource', mimeType: 'image/png' },
      read: (uri: URL) => ({ contents: [{ uri: uri.href, mimeType: 'image/png', blob: PIXEL }] }),
    },
  ],
  template: {
    uri: 'test://template/{id}/data',
    meta: { description: 'Data by id', mimeType: 'application/json' },
    read: (uri: URL, id: unknown) => ({
      contents: [
        {
          uri: uri.href,
          mimeType: 'application/json',
          text: JSON.stringify({ id, data: `item ${String(id)}` }),
        },
      ],
    }),
  },
  simplePrompt: () => ({
    messages: [
      {
        role: 'user' as const,
        content: { type: 'text' as const, text: 'This is a simple prompt.' },
      },
    ],
  }),
  promptWithArguments: ({ arg1, arg2 }: { arg1: string; arg2: string }) => ({
    messages: [
      {
        role: 'user' as const,
        content: {
          type: 'text' as const,
          text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'`,
        },
      },
    ],
  }),
  complete: (value: string) => ['paris', 'park', 'party'].filter((word) => word.startsWith(value)),
  tools: [
    {
      name: 'test_simple_text',
      description: 'Answers a text',
      call: () => ({
        content: [{ type: 'text' as const, text: 'This is a simple text response for testing.' }],
      }),
    },
    {
      name: 'test_error_handling',
      description: 'Answers a tool error',
      call: () => ({
        isError: true,
        content: [
          { type: 'text' as const, text: 'This tool intentionally returns an error for testing' },
        ],
      }),
    },
  ],
};

/** What the two SDKs' servers share, for {@link registerCommon}. */
interface Registrar {
  registerResource(
    name: string,
    uri: string,
    meta: object,
    read: (uri: URL) => Promise<ReturnType<(typeof SURFACE.resources)[number]['read']>>,
  ): unknown;
  registerPrompt(
    name: string,
    config: { description: string },
    get: () => Promise<ReturnType<typeof SURFACE.simplePrompt>>,
  ): unknown;
  registerTool(
    name: string,
    config: { description: string },
    call: () => Promise<ReturnType<(typeof SURFACE.tools)[number]['call']>>,
  ): unknown;
}

/** The static resources, the prompt without arguments and the tools, on either server. */
function registerCommon(server: Registrar): void {
  for (const { name, uri, meta, read } of SURFACE.resources) {
    server.registerResource(name, uri, meta, async (href) => read(href));
  }
  server.registerPrompt(
    'test_simple_prompt',
    { description: 'A prompt without arguments' },
    async () => SURFACE.simplePrompt(),
  );
  for (const { name, description, call } of SURFACE.tools) {
    server.registerTool(name, { description }, async () => call());
  }
}

/** The v1 server (the stateful 2025 wire), with resource subscriptions. */
function fixture(): McpServer {
  const server = new McpServer(SURFACE.info, {
    capabilities: { logging: {}, completions: {}, resources: { subscribe: true } },
  });
  // Subscriptions are tracked by the SDK's transport session; the answer is `{}`.
  const subscribed = new Set<string>();
  server.server.setRequestHandler(SubscribeRequestSchema, async (request) => {
    subscribed.add(request.params.uri);
    return {};
  });
  server.server.setRequestHandler(UnsubscribeRequestSchema, async (request) => {
    subscribed.delete(request.params.uri);
    return {};
  });
  registerCommon(server);
  const { template } = SURFACE;
  server.registerResource(
    'template',
    new ResourceTemplate(template.uri, { list: undefined }),
    template.meta,
    async (uri, { id }) => template.read(uri, id),
  );
  server.registerPrompt(
    'test_prompt_with_arguments',
    {
      description: 'A prompt with two arguments',
      argsSchema: { arg1: completable(z.string(), SURFACE.complete), arg2: z.string() },
    },
    async (args) => SURFACE.promptWithArguments(args),
  );
  return server;
}

/**
 * The same surface on a server of the SDK's v2 (`@modelcontextprotocol/server`), which
 * speaks the stateless 2026-07-28 wire (and the 2025 wire statelessly).
 */
function modernFixture(): ModernServer {
  const server = new ModernServer(SURFACE.info, { capabilities: { logging: {}, completions: {} } });
  registerCommon(server);
  const { template } = SURFACE;
  server.registerResource(
    'template',
    new ModernTemplate(template.uri, { list: undefined }),
    template.meta,
    async (uri, { id }) => template.read(uri, id),
  );
  server.registerPrompt(
    'test_prompt_with_arguments',
    {
      description: 'A prompt with two arguments',
      argsSchema: z.object({
        arg1: modernCompletable(z.string(), SURFACE.complete),
        arg2: z.string(),
      }),
    },
    async (args) => SURFACE.promptWithArguments(args),
  );
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
  readonly #modern: McpHttpHandler | null;

  /** @param modern Whether it is the v2 server (the 2026-07-28 wire) rather than v1. */
  constructor(modern = false) {
    this.#modern = modern ? createMcpHandler(() => modernFixture()) : null;
  }

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

  #rebindingProtection() {
    const { host } = new URL(this.origin);
    const port = host.split(':')[1];
    const hosts = [host, `localhost:${port}`];
    return {
      enableDnsRebindingProtection: true,
      allowedHosts: hosts,
      allowedOrigins: hosts.map((name) => `http://${name}`),
    };
  }

  /** What the v1 transport's rebinding protection checks, for the v2 handler (which has none). */
  #ownHostAndOrigin(request: Request): boolean {
    const { allowedHosts, allowedOrigins } = this.#rebindingProtection();
    const host = request.headers.get('host');
    const origin = request.headers.get('origin');
    return (
      host !== null &&
      allowedHosts.includes(host) &&
      (origin === null || allowedOrigins.includes(origin))
    );
  }

  async stop(): Promise<void> {
    await this.#modern?.close();
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
      response = await this.#mcp(request, true);
    } else if (path === '/mcp' && this.world.isValidAccessToken(bearer(req))) {
      response = await this.#mcp(request, false);
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

  /**
   * @param open Whether this is the endpoint without a credential, which (on loopback, as
   *   the MCP transport requires) checks that `Host` and `Origin` name this server.
   */
  async #mcp(request: Request, open: boolean): Promise<Response> {
    if (this.#modern !== null) {
      if (open && !this.#ownHostAndOrigin(request)) {
        return Response.json(
          { jsonrpc: '2.0', error: { code: -32000, message: 'Invalid Host or Origin' }, id: null },
          { status: 403 },
        );
      }
      return this.#modern.fetch(request);
    }
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
        ...(open ? this.#rebindingProtection() : {}),
      });
    await fixture().connect(transport);
    return transport.handleRequest(request);
  }
}
