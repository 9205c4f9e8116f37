import {
  createMcpHandler,
  isLegacyRequest,
  type McpHttpHandler,
  WebStandardStreamableHTTPServerTransport,
} from '@modelcontextprotocol/server';
import { assertCoversPath, type Principal } from '../auth/principal.js';
import { parseResourcePath } from '../auth/resource-path.js';
import { toBase64Url } from '../platform/bytes.js';
import type { PortalCaller } from './caller.js';
import type { PortalDeps } from './deps.js';
import { PortalHub } from './hub.js';
import { PortalSession, type ToolRoutes } from './session.js';
import { type UpstreamListener, UpstreamSessions } from './upstreams.js';

/*
 * The portal (docs/api.md §18): `{base}/portal/<prefix>` is one MCP server made of every
 * `mcp` connection at or below the prefix. The 2025-11-25 wire is stateful (a session per
 * client, its upstream sessions with it); the 2026-07-28 wire is stateless (a server per
 * request, the caller's upstream sessions kept between requests).
 */

/** Who owns a session: the root, or a token's name (a sign-in grant's, across rotations). */
function ownerOf(principal: Principal): string {
  if (principal.kind === 'root') return 'root';
  // A sign-in access token is `<anchor>.a<generation>`: its refreshes keep the session.
  return principal.audience === undefined
    ? `token:${principal.name}`
    : `token:${principal.name.replace(/\.a[0-9]+$/, '')}`;
}

const JSON_HEADERS = { 'content-type': 'application/json' };

function rpcError(status: number, code: number, message: string): Response {
  return new Response(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }), {
    status,
    headers: JSON_HEADERS,
  });
}

/** The largest JSON-RPC message the portal reads (the SDK's own bound). */
const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

/** No message to read: not a `POST` of JSON (the SDK's transport answers it as it does). */
const NO_MESSAGE = Symbol('no message');

/**
 * A `POST`'s JSON-RPC message, read once under {@link MAX_MESSAGE_BYTES}; the answer the
 * SDK's transport would give to a body too large or not JSON; or {@link NO_MESSAGE}.
 */
async function messageOf(request: Request): Promise<unknown> {
  const type = request.headers.get('content-type') ?? '';
  if (request.method !== 'POST' || request.body === null || !type.includes('application/json')) {
    return NO_MESSAGE;
  }
  const declared = Number(request.headers.get('content-length') ?? '0');
  const tooLarge = () =>
    rpcError(413, -32000, `the message is larger than ${MAX_MESSAGE_BYTES} bytes`);
  if (declared > MAX_MESSAGE_BYTES) return tooLarge();
  const reader = request.body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > MAX_MESSAGE_BYTES) {
      await reader.cancel().catch(() => {});
      return tooLarge();
    }
    text += decoder.decode(value, { stream: true });
  }
  try {
    return JSON.parse(text + decoder.decode());
  } catch {
    return rpcError(400, -32700, 'Parse error: Invalid JSON');
  }
}

function live(session: PortalSession | undefined): PortalSession {
  if (session === undefined) throw new Error('the portal session has ended');
  return session;
}

interface LegacyEntry {
  session: PortalSession;
  transport: WebStandardStreamableHTTPServerTransport;
  owner: string;
}

/** A stateless caller's upstream sessions and last tool lists, kept between its requests. */
interface Pool {
  caller: PortalCaller;
  upstreams: UpstreamSessions;
  /** By portal prefix. */
  routes: Map<string, ToolRoutes>;
}

/**
 * The portal: `broker.portal`. What `{base}/portal/<prefix>` serves over HTTP, for any
 * Web-standard server to call with the authenticated caller and its `Request`.
 *
 * @see [docs/api.md §18](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#18-the-portal); docs/portal.md
 */
export class Portal {
  readonly #hub: PortalHub;
  readonly #deps: PortalDeps;
  readonly #legacy = new Map<string, LegacyEntry>();
  readonly #pools = new Map<string, Pool>();
  readonly #modern: McpHttpHandler;
  #timer: ReturnType<typeof setInterval> | undefined;

  constructor(deps: PortalDeps) {
    this.#deps = deps;
    this.#hub = new PortalHub(deps);
    this.#modern = createMcpHandler(
      (context) => {
        const caller = (context.authInfo?.extra as { caller?: PortalCaller } | undefined)?.caller;
        if (caller === undefined) throw new Error('a portal request without its caller');
        const pool = this.#pool(caller);
        let routes = pool.routes.get(caller.prefix);
        if (routes === undefined) {
          routes = { tools: null };
          pool.routes.set(caller.prefix, routes);
        }
        return new PortalSession(this.#hub, caller, pool.upstreams, routes, true).server;
      },
      { legacy: 'reject' },
    );
    const every = Math.min(Math.max(Math.floor(deps.settings.sessionIdleMs / 4), 1000), 60_000);
    this.#timer = setInterval(() => void this.sweep(), every);
    (this.#timer as { unref?: () => void }).unref?.();
  }

  /** How many sessions are open (2025-11-25 wire), and stateless callers kept. */
  get open(): { sessions: number; callers: number } {
    return { sessions: this.#legacy.size, callers: this.#pools.size };
  }

  /**
   * Serves one request to the portal of `prefix`: a JSON-RPC message (`POST`), the
   * session's stream (`GET`), or its end (`DELETE`). The caller's credential must cover the
   * prefix; a session belongs to the credential that opened it.
   *
   * @throws {KeywayError} `invalid_path`, `insufficient_scope`.
   */
  async handle(principal: Principal, prefix: string, request: Request): Promise<Response> {
    const path = parseResourcePath(prefix);
    assertCoversPath(principal, path);
    const caller: PortalCaller = { principal, prefix: path };
    // Read once here, for the wire's classification and then the SDK's transport.
    const message = await messageOf(request);
    if (message instanceof Response) return message;
    const parsedBody = message === NO_MESSAGE ? undefined : message;
    if (!(await isLegacyRequest(request, parsedBody))) {
      return this.#modern.fetch(request, {
        authInfo: { token: '', clientId: 'keyway-portal', scopes: [], extra: { caller } },
        parsedBody,
      });
    }
    const id = request.headers.get('mcp-session-id');
    if (id === null) return this.#start(caller, request, parsedBody);
    const entry = this.#legacy.get(id);
    // Another credential's session, or another portal's, is no session to this caller.
    if (
      entry === undefined ||
      entry.owner !== ownerOf(principal) ||
      entry.session.caller.prefix !== path
    ) {
      return rpcError(404, -32001, 'Session not found');
    }
    entry.session.caller.principal = principal;
    entry.session.usedAt = this.#deps.now();
    return entry.transport.handleRequest(request, { parsedBody });
  }

  /** A new session (an `initialize`), or the SDK's refusal of what is not one. */
  async #start(caller: PortalCaller, request: Request, parsedBody: unknown): Promise<Response> {
    if (this.#legacy.size >= this.#deps.settings.maxSessions) {
      await this.sweep();
      if (this.#legacy.size >= this.#deps.settings.maxSessions) {
        return rpcError(503, -32000, 'the portal has as many sessions open as it may: retry later');
      }
    }
    let session: PortalSession | undefined;
    const upstreams = new UpstreamSessions({
      gateway: this.#deps.gateway,
      principal: () => caller.principal,
      listener: this.#listener(() => session),
      capabilities: () => {
        const declared = session?.server.getClientCapabilities();
        return {
          sampling: declared?.sampling !== undefined,
          elicitation: declared?.elicitation ?? null,
        };
      },
      now: this.#deps.now,
      // The server's own stream only where a server's request may have to reach the caller.
      stream: () => {
        const declared = session?.server.getClientCapabilities();
        return declared?.sampling !== undefined || declared?.elicitation !== undefined;
      },
    });
    session = new PortalSession(this.#hub, caller, upstreams);
    const opened = session;
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => toBase64Url(this.#deps.randomBytes(24)),
      onsessioninitialized: (id) => {
        this.#legacy.set(id, { session: opened, transport, owner: ownerOf(caller.principal) });
        this.#hub.sessions.add(opened);
        this.#deps.observe({ kind: 'portal_sessions', open: this.#legacy.size });
      },
      onsessionclosed: (id) => this.#end(id),
    });
    await session.server.connect(transport);
    const response = await transport.handleRequest(request, { parsedBody });
    if (transport.sessionId === undefined) await session.server.close().catch(() => {});
    return response;
  }

  /** What a session hears from its servers: relayed to its caller. */
  #listener(session: () => PortalSession | undefined): UpstreamListener {
    const hub = this.#hub;
    return {
      listChanged: (connectionId, kind) => hub.listChanged(connectionId, kind),
      updated: (connectionId, uri) => session()?.updated(connectionId, uri),
      log: (_connectionId, params) => {
        session()
          ?.server.notification({ method: 'notifications/message', params })
          .catch(() => {});
      },
      // The call in flight for that connection asked: the request goes with it.
      sample: async (connectionId, params) => {
        const current = live(session());
        const ctx = current.inflight.get(connectionId)?.at(-1);
        return ctx === undefined
          ? current.server.createMessage(params)
          : ctx.mcpReq.requestSampling(params);
      },
      elicit: async (connectionId, params) => {
        const current = live(session());
        const ctx = current.inflight.get(connectionId)?.at(-1);
        return ctx === undefined
          ? current.server.elicitInput(params)
          : ctx.mcpReq.elicitInput(params);
      },
    };
  }

  /** The upstream sessions of a stateless caller (no sampling or elicitation relayed). */
  #pool(caller: PortalCaller): Pool {
    const key = ownerOf(caller.principal);
    let pool = this.#pools.get(key);
    if (pool === undefined) {
      const kept: PortalCaller = { ...caller };
      const upstreams = new UpstreamSessions({
        gateway: this.#deps.gateway,
        principal: () => kept.principal,
        listener: {
          listChanged: (connectionId, kind) => this.#hub.listChanged(connectionId, kind),
          updated: () => {},
          log: () => {},
          sample: async () => {
            throw new Error('the portal relays no sampling on the stateless wire');
          },
          elicit: async () => {
            throw new Error('the portal relays no elicitation on the stateless wire');
          },
        },
        capabilities: () => ({ sampling: false, elicitation: null }),
        now: this.#deps.now,
        stream: () => false,
      });
      pool = { caller: kept, upstreams, routes: new Map() };
      this.#pools.set(key, pool);
    }
    pool.caller.principal = caller.principal;
    return pool;
  }

  async #end(id: string): Promise<void> {
    const entry = this.#legacy.get(id);
    if (entry === undefined) return;
    this.#legacy.delete(id);
    this.#hub.sessions.delete(entry.session);
    this.#deps.observe({ kind: 'portal_sessions', open: this.#legacy.size });
    await entry.session.upstreams.closeAll();
  }

  /** Closes sessions and upstream sessions idle for longer than `sessionIdleMs`. */
  async sweep(): Promise<void> {
    const before = this.#deps.now() - this.#deps.settings.sessionIdleMs;
    for (const [id, entry] of [...this.#legacy]) {
      if (entry.session.usedAt < before) {
        await this.#end(id);
        await entry.transport.close().catch(() => {});
      } else {
        await entry.session.upstreams.closeIdle(before);
      }
    }
    for (const [key, pool] of [...this.#pools]) {
      await pool.upstreams.closeIdle(before);
      if (pool.upstreams.size === 0) this.#pools.delete(key);
    }
    await this.#hub.watchers.closeIdle(before);
  }

  /** Ends every session and stops the sweep. */
  async close(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    for (const [id, entry] of [...this.#legacy]) {
      await this.#end(id);
      await entry.transport.close().catch(() => {});
    }
    for (const pool of this.#pools.values()) await pool.upstreams.closeAll();
    this.#pools.clear();
    await this.#hub.close();
    await this.#modern.close();
  }
}
