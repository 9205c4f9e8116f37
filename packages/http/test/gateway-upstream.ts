import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { TestWorld } from '@keyway/testing';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { createMcpHandler, McpServer as ModernServer } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { toWebRequest, writeWebResponse } from '../src/node/index.js';

/*
 * The MCP servers behind the gateway in its tests: the official SDK's, on loopback, in front
 * of a test world's authorization server. v1 (`@modelcontextprotocol/sdk`) serves the
 * stateful wire (initialize, `Mcp-Session-Id`, a GET stream, DELETE), with JSON or SSE
 * answers; v2 (`@modelcontextprotocol/server`) serves the stateless 2026-07-28 wire.
 */

/** How `/mcp` behaves. */
export type UpstreamMode = 'stateful-sse' | 'stateful-json' | 'modern' | 'raw';

/** One request `/mcp` received, as the server saw it. */
export interface Seen {
  method: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** Lets a test hold the `progress` tool between its two notifications. */
export interface Gate {
  /** Resolved by the test when the client has the first notification. */
  firstSeen: Promise<void>;
  release(): void;
}

export function gate(): Gate {
  let release!: () => void;
  const firstSeen = new Promise<void>((resolve) => {
    release = resolve;
  });
  return { firstSeen, release };
}

/**
 * A Node request whose body was read, as a Web `Request` for an SDK transport: aborted when
 * the client goes away.
 */
export function bufferedRequest(
  origin: string,
  req: IncomingMessage,
  res: ServerResponse,
  body: string,
): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (typeof value === 'string') headers.set(name, value);
  }
  const aborted = new AbortController();
  res.once('close', () => aborted.abort());
  return new Request(`${origin}${req.url}`, {
    method: req.method ?? 'GET',
    headers,
    signal: aborted.signal,
    ...(req.method === 'POST' ? { body } : {}),
  });
}

export class Upstream {
  mode: UpstreamMode = 'stateful-sse';
  /** Answers `/mcp` in mode `raw`. */
  raw: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => {
    res.writeHead(500).end();
  };
  readonly seen: Seen[] = [];
  /** Access tokens `/mcp` refuses (with `invalid_token`) while listed. */
  readonly refused = new Set<string>();
  /** Refuse every token, as a server that lost its keys. */
  refuseAll = false;
  /** The scope the `admin` tool needs (a 403 `insufficient_scope` without it). */
  adminScope = 'admin';
  progressGate: Gate = gate();
  readonly sessions = new Map<string, WebStandardStreamableHTTPServerTransport>();
  /** Sessions the server saw ended by a DELETE. */
  readonly ended: string[] = [];
  server!: Server;
  origin!: string;
  world!: TestWorld;
  readonly #modern = createMcpHandler(() => this.#modernServer());

  /** Listens on loopback; `world` is made with the origin (its issuer and resource live here). */
  async start(makeWorld: (origin: string) => TestWorld): Promise<void> {
    const web = (req: IncomingMessage, res: ServerResponse) => {
      this.world
        .fetch(toWebRequest(req))
        .then((response) => writeWebResponse(res, response))
        .catch((error) => res.destroy(error));
    };
    this.server = createServer((req, res) => {
      const url = req.url ?? '/';
      if (url.startsWith('/mcp') && req.headers.authorization !== undefined) {
        this.#mcp(req, res).catch((error) => res.destroy(error));
        return;
      }
      web(req, res);
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    const address = this.server.address() as { port: number };
    this.origin = `http://127.0.0.1:${address.port}`;
    this.world = makeWorld(this.origin);
  }

  async stop(): Promise<void> {
    for (const transport of this.sessions.values()) await transport.close();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** Every access token `/mcp` received. */
  tokens(): string[] {
    return this.seen.map((seen) => String(seen.headers.authorization).replace(/^Bearer /, ''));
  }

  /** An authenticated request to `/mcp`: recorded, its token checked, then served. */
  async #mcp(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    if (req.method === 'POST') {
      for await (const chunk of req) chunks.push(chunk as Buffer);
    }
    const body = Buffer.concat(chunks).toString('utf8');
    this.seen.push({ method: req.method ?? '', headers: { ...req.headers }, body });
    const token = String(req.headers.authorization).replace(/^Bearer /, '');
    if (this.refuseAll || this.refused.has(token) || !this.world.isValidAccessToken(token)) {
      res
        .writeHead(401, {
          'content-type': 'application/json',
          'www-authenticate': `Bearer error="invalid_token", resource_metadata="${this.origin}/.well-known/oauth-protected-resource/mcp"`,
        })
        .end('{"error":"invalid_token"}');
      return;
    }
    if (this.mode === 'raw') {
      this.raw(req, res);
      return;
    }
    const message =
      body === '' ? null : (JSON.parse(body) as { method?: string; params?: { name?: string } });
    if (
      message?.method === 'tools/call' &&
      message.params?.name === 'admin' &&
      this.adminScope !== ''
    ) {
      res
        .writeHead(403, {
          'content-type': 'application/json',
          'www-authenticate': `Bearer error="insufficient_scope", scope="${this.adminScope}", resource_metadata="${this.origin}/.well-known/oauth-protected-resource/mcp"`,
        })
        .end('{"error":"insufficient_scope"}');
      return;
    }
    const request = bufferedRequest(this.origin, req, res, body);
    const response =
      this.mode === 'modern'
        ? await this.#modern.fetch(request)
        : await this.#stateful(request, this.mode === 'stateful-json');
    await writeWebResponse(res, response);
  }

  async #stateful(request: Request, json: boolean): Promise<Response> {
    const id = request.headers.get('mcp-session-id');
    if (id !== null) {
      const transport = this.sessions.get(id);
      if (transport === undefined) return new Response('unknown session', { status: 404 });
      return transport.handleRequest(request);
    }
    const transport: WebStandardStreamableHTTPServerTransport =
      new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        enableJsonResponse: json,
        onsessioninitialized: (sessionId) => {
          this.sessions.set(sessionId, transport);
        },
        onsessionclosed: (sessionId) => {
          this.sessions.delete(sessionId);
          this.ended.push(sessionId);
        },
      });
    await this.#classicServer().connect(transport);
    return transport.handleRequest(request);
  }

  #classicServer(): McpServer {
    const server = new McpServer({ name: 'upstream-classic', version: '1.0.0' });
    server.registerTool(
      'echo',
      { description: 'Echoes its text', inputSchema: { text: z.string() } },
      async ({ text }) => ({ content: [{ type: 'text', text: `echo: ${text}` }] }),
    );
    server.registerTool('admin', { description: 'Needs the admin scope' }, async () => ({
      content: [{ type: 'text', text: 'admin granted' }],
    }));
    server.registerTool('progress', { description: 'Two progress notifications' }, (extra) =>
      this.#progress(extra._meta?.progressToken, (notification) =>
        extra.sendNotification(notification),
      ),
    );
    return server;
  }

  #modernServer(): ModernServer {
    const server = new ModernServer({ name: 'upstream-modern', version: '2.0.0' });
    server.registerTool(
      'echo',
      { description: 'Echoes its text', inputSchema: z.object({ text: z.string() }) },
      async ({ text }) => ({ content: [{ type: 'text', text: `echo: ${text}` }] }),
    );
    server.registerTool('progress', { description: 'Two progress notifications' }, (ctx) =>
      this.#progress(ctx.mcpReq._meta?.progressToken, (notification) =>
        ctx.mcpReq.notify(notification),
      ),
    );
    return server;
  }

  /** The `progress` tool: a notification, a wait for the test's gate, another, the result. */
  async #progress(
    token: unknown,
    send: (notification: {
      method: 'notifications/progress';
      params: { progressToken: string | number; progress: number; total: number };
    }) => Promise<void>,
  ): Promise<{ content: { type: 'text'; text: string }[] }> {
    const notify = (progress: number) =>
      send({
        method: 'notifications/progress',
        params: { progressToken: token as string | number, progress, total: 2 },
      });
    await notify(1);
    await this.progressGate.firstSeen;
    await notify(2);
    return { content: [{ type: 'text', text: 'done' }] };
  }
}
