import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createTestWorld, type TestWorld, type TestWorldOptions } from '@keyway/testing';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { createMcpHandler, McpServer as ModernServer } from '@modelcontextprotocol/server';
import { toWebRequest, writeWebResponse } from '../src/node/index.js';
import { bufferedRequest } from './gateway-upstream.js';

/*
 * The MCP servers behind a portal in its tests: each one the official SDK's, on loopback,
 * in front of a test world of its own (its own authorization server, its own tokens). v1
 * (`@modelcontextprotocol/sdk`) serves the stateful 2025-11-25 wire, v2
 * (`@modelcontextprotocol/server`) the stateless 2026-07-28 wire.
 */

/** What a test server offers: tools registered on each session's server. */
export type Setup = (server: McpServer, upstream: PortalUpstream) => void;

export class PortalUpstream {
  server!: Server;
  origin!: string;
  world!: TestWorld;
  /** Every JSON-RPC method `/mcp` received, in order. */
  readonly methods: string[] = [];
  /** How many event streams (`GET /mcp`) were opened: a notice sent from then on is sent on one. */
  streams = 0;
  /** A tool that needs a scope the token lacks: answered `403 insufficient_scope`. */
  readonly stepUp = new Map<string, string>();
  /** `tools/list` is never answered while set (the request is held open). */
  hangLists = false;
  /** The servers of the open sessions (v1), to change their tools mid-session. */
  readonly servers: McpServer[] = [];
  readonly #sessions = new Map<string, WebStandardStreamableHTTPServerTransport>();
  readonly #held: ServerResponse[] = [];
  readonly #modern;

  /**
   * @param setup The tools of the v1 server (the stateful wire).
   * @param modern The tools of a v2 server instead (the stateless 2026-07-28 wire).
   */
  constructor(
    readonly setup: Setup,
    readonly modernSetup?: (server: ModernServer) => void,
  ) {
    this.#modern = createMcpHandler(() => {
      const server = new ModernServer({ name: 'portal-upstream-modern', version: '2.0.0' });
      modernSetup?.(server);
      return server;
    });
  }

  get modern(): boolean {
    return this.modernSetup !== undefined;
  }

  /** Listens on loopback with a new world; what a previous test set is forgotten. */
  async start(options: Partial<TestWorldOptions> = {}, now: () => number): Promise<void> {
    this.methods.length = 0;
    this.streams = 0;
    this.stepUp.clear();
    this.hangLists = false;
    this.servers.length = 0;
    this.server = createServer((req, res) => {
      if ((req.url ?? '').startsWith('/mcp') && req.headers.authorization !== undefined) {
        this.#mcp(req, res).catch((error) => res.destroy(error));
        return;
      }
      this.world
        .fetch(toWebRequest(req))
        .then((response) => writeWebResponse(res, response))
        .catch((error) => res.destroy(error));
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.origin = `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
    this.world = createTestWorld({
      issuer: `${this.origin}/as`,
      resourceUrl: `${this.origin}/mcp`,
      now,
      ...options,
    });
  }

  async stop(): Promise<void> {
    for (const res of this.#held.splice(0)) res.destroy();
    for (const transport of this.#sessions.values()) await transport.close();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  async #mcp(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    if (req.method === 'POST') for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    const token = String(req.headers.authorization).replace(/^Bearer /, '');
    const challenge = `resource_metadata="${this.origin}/.well-known/oauth-protected-resource/mcp"`;
    if (!this.world.isValidAccessToken(token)) {
      res
        .writeHead(401, {
          'content-type': 'application/json',
          'www-authenticate': `Bearer error="invalid_token", ${challenge}`,
        })
        .end('{"error":"invalid_token"}');
      return;
    }
    const message =
      body === '' ? null : (JSON.parse(body) as { method?: string; params?: { name?: string } });
    if (message?.method !== undefined) this.methods.push(message.method);
    const scope =
      message?.method === 'tools/call' ? this.stepUp.get(message.params?.name ?? '') : undefined;
    if (scope !== undefined) {
      res
        .writeHead(403, {
          'content-type': 'application/json',
          'www-authenticate': `Bearer error="insufficient_scope", scope="${scope}", ${challenge}`,
        })
        .end('{"error":"insufficient_scope"}');
      return;
    }
    if (this.hangLists && message?.method === 'tools/list') {
      this.#held.push(res);
      return;
    }
    const request = bufferedRequest(this.origin, req, res, body);
    const response = this.modern
      ? await this.#modern.fetch(request)
      : await this.#stateful(request);
    // Counted once the server holds the stream, not when it is asked for: a test that
    // waits for it then knows a change it makes is sent on it.
    if (req.method === 'GET' && response.status === 200) this.streams += 1;
    await writeWebResponse(res, response);
  }

  async #stateful(request: Request): Promise<Response> {
    const id = request.headers.get('mcp-session-id');
    if (id !== null) {
      const transport = this.#sessions.get(id);
      if (transport === undefined) return new Response('unknown session', { status: 404 });
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
    const server = new McpServer(
      { name: 'portal-upstream', version: '1.0.0' },
      { capabilities: { tools: { listChanged: true }, logging: {} } },
    );
    this.setup(server, this);
    this.servers.push(server);
    await server.connect(transport);
    return transport.handleRequest(request);
  }
}
