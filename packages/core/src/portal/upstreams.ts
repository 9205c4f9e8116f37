import {
  Client,
  type ClientCapabilities,
  StreamableHTTPClientTransport,
} from '@modelcontextprotocol/client';
import type {
  CreateMessageRequest,
  CreateMessageResult,
  CreateMessageResultWithTools,
  ElicitRequest,
  ElicitResult,
  LoggingMessageNotification,
} from '@modelcontextprotocol/server';
import type { Principal } from '../auth/principal.js';
import type { Gateway, GatewayRequest } from '../upstream/gateway.js';

/*
 * The portal's sessions with its servers (docs/api.md §18): one MCP client of the official
 * SDK per caller session and connection, opened on first need, whose every HTTP request is
 * the gateway's — the connection's bound resource, its token refreshed when due, one retry
 * on `401` — so no token ever reaches the portal's code or its caller.
 */

/** What the portal hears from one upstream session. */
export interface UpstreamListener {
  /** A server's list changed (`notifications/<kind>/list_changed`). */
  listChanged(connectionId: string, kind: 'tools' | 'prompts' | 'resources'): void;
  /** A resource the caller subscribed to changed (`notifications/resources/updated`). */
  updated(connectionId: string, uri: string): void;
  /** A server's log message (`notifications/message`), for the caller. */
  log(connectionId: string, params: LoggingMessageNotification['params']): void;
  /** A server's sampling request, relayed to the caller. */
  sample(
    connectionId: string,
    params: CreateMessageRequest['params'],
  ): Promise<CreateMessageResult | CreateMessageResultWithTools>;
  /** A server's elicitation request, relayed to the caller. */
  elicit(connectionId: string, params: ElicitRequest['params']): Promise<ElicitResult>;
}

/** The capabilities the portal declares upstream: what its caller declared, no more. */
export interface RelayedCapabilities {
  sampling: boolean;
  elicitation: ClientCapabilities['elicitation'] | null;
}

/** One upstream session and the last error the gateway raised under it. */
export interface Upstream {
  client: Client;
  /** What the gateway threw on the last failed request (a `KeywayError`), or undefined. */
  failure(): unknown;
  /** When it was last used (epoch ms). */
  usedAt: number;
  /**
   * Opens the server's own event stream if the session has none yet (where a server says
   * that a subscribed resource changed); a server that offers none answers `405`, and
   * nothing more is asked of it.
   */
  listen(): Promise<void>;
}

const encoder = new TextEncoder();

/**
 * What the SDK's client asks to fetch, as the gateway takes it: no Web `Request`, whose
 * making follows the client's long-lived abort signal with one more listener per request
 * (kept until the request is collected: a cost that grows with the session's age).
 */
function gatewayRequest(input: string | URL | Request, init: RequestInit = {}): GatewayRequest {
  if (input instanceof Request) return input;
  const { body } = init;
  let bytes: GatewayRequest['body'];
  if (body === undefined || body === null) bytes = null;
  else if (typeof body === 'string') bytes = encoder.encode(body);
  else if (body instanceof Uint8Array || body instanceof ReadableStream) bytes = body;
  // The SDK's client sends JSON text: anything else is a change to look at, not to guess.
  else throw new TypeError('the portal forwards text, bytes or a stream as a request body');
  return {
    method: init.method ?? 'GET',
    headers: new Headers(init.headers),
    body: bytes,
    ...(init.signal === undefined || init.signal === null ? {} : { signal: init.signal }),
  };
}

/** The address an upstream client is given: never fetched, the gateway is its fetch. */
function placeholderUrl(connectionId: string): URL {
  return new URL(`https://portal.keyway.invalid/mcp/${connectionId}`);
}

/**
 * The upstream sessions of one caller session: by connection, opened once, closed
 * together (or one by one when idle).
 */
export class UpstreamSessions {
  readonly #sessions = new Map<string, Promise<Upstream>>();
  readonly #gateway: Gateway;
  readonly #principal: (connectionId: string) => Principal;
  readonly #listener: UpstreamListener;
  readonly #capabilities: () => RelayedCapabilities;
  readonly #now: () => number;
  readonly #stream: () => boolean;

  constructor(options: {
    gateway: Gateway;
    /** Who sends: the caller, as it authenticated last (a sign-in token rotates). */
    principal: (connectionId: string) => Principal;
    listener: UpstreamListener;
    /**
     * Read when a session opens, unless the request names them: the caller declared its
     * capabilities by then.
     */
    capabilities: () => RelayedCapabilities;
    now: () => number;
    /**
     * Whether each session opens the server's own event stream (`GET`), where a server
     * says what is not an answer to a request: that its lists changed (the portal keeps one
     * such stream per connection for every caller, `PortalHub.watch`), and the sampling or
     * elicitation requests a server sends outside a request's own stream. Read when a
     * session opens: a caller that declared neither capability needs none.
     */
    stream: () => boolean;
  }) {
    this.#gateway = options.gateway;
    this.#principal = options.principal;
    this.#listener = options.listener;
    this.#capabilities = options.capabilities;
    this.#now = options.now;
    this.#stream = options.stream;
  }

  /** How many upstream sessions are open. */
  get size(): number {
    return this.#sessions.size;
  }

  /**
   * The session with a connection's server, opened (initialize, or the 2026-07-28
   * discovery) on first need. A failed opening is forgotten, so the next call tries again.
   *
   * @param declared What the caller declared in this request (the 2026-07-28 wire, where
   *   each request says it): a session of its own per set of capabilities, which declares
   *   as much to the server. Without it, the capabilities the sessions were made with.
   */
  open(connectionId: string, declared?: RelayedCapabilities): Promise<Upstream> {
    const key =
      declared === undefined
        ? connectionId
        : `${connectionId}|${declared.sampling ? 's' : ''}|${JSON.stringify(declared.elicitation)}`;
    let session = this.#sessions.get(key);
    if (session === undefined) {
      session = this.#connect(connectionId, declared ?? this.#capabilities());
      this.#sessions.set(key, session);
      session.catch(() => {
        if (this.#sessions.get(key) === session) this.#sessions.delete(key);
      });
    }
    return session.then((upstream) => {
      upstream.usedAt = this.#now();
      return upstream;
    });
  }

  async #connect(connectionId: string, declared: RelayedCapabilities): Promise<Upstream> {
    let failure: unknown;
    const gateway = this.#gateway;
    const principal = this.#principal;
    let stream = this.#stream();
    const fetch = async (input: string | URL | Request, init?: RequestInit) => {
      const request = gatewayRequest(input, init);
      // No event stream of its own: answered as a server that offers none would answer.
      if (!stream && request.method === 'GET') return new Response(null, { status: 405 });
      try {
        failure = undefined;
        return await gateway.mcp(principal(connectionId), connectionId, request);
      } catch (error) {
        failure = error;
        throw error;
      }
    };
    const { sampling, elicitation } = declared;
    const client = new Client(
      { name: 'keyway-portal', version: '1' },
      {
        capabilities: {
          ...(sampling ? { sampling: {} } : {}),
          ...(elicitation === null || elicitation === undefined ? {} : { elicitation }),
        },
        // Whatever the server speaks: 2026-07-28 when it says so, else the 2025 handshake.
        versionNegotiation: { mode: 'auto' },
      },
    );
    const listener = this.#listener;
    for (const kind of ['tools', 'prompts', 'resources'] as const) {
      client.setNotificationHandler(`notifications/${kind}/list_changed`, () =>
        listener.listChanged(connectionId, kind),
      );
    }
    client.setNotificationHandler('notifications/resources/updated', (notification) =>
      listener.updated(connectionId, notification.params.uri),
    );
    client.setNotificationHandler('notifications/message', (notification) =>
      listener.log(connectionId, notification.params),
    );
    if (sampling) {
      client.setRequestHandler('sampling/createMessage', (request) =>
        listener.sample(connectionId, request.params),
      );
    }
    if (elicitation !== null && elicitation !== undefined) {
      client.setRequestHandler('elicitation/create', (request) =>
        listener.elicit(connectionId, request.params),
      );
    }
    const transport = new StreamableHTTPClientTransport(placeholderUrl(connectionId), { fetch });
    try {
      await client.connect(transport);
    } catch (error) {
      await client.close().catch(() => {});
      throw failure ?? error;
    }
    const listen = async () => {
      if (stream) return;
      stream = true;
      // The stream a session opens after its handshake, opened now (no event to resume).
      await transport.resumeStream('');
    };
    return { client, failure: () => failure, usedAt: this.#now(), listen };
  }

  /** Closes the sessions not used since `before` (epoch ms). */
  async closeIdle(before: number): Promise<void> {
    const idle: Promise<Upstream>[] = [];
    for (const [id, session] of this.#sessions) {
      const upstream = await session.catch(() => null);
      if (upstream !== null && upstream.usedAt < before) {
        this.#sessions.delete(id);
        idle.push(session);
      }
    }
    await Promise.all(idle.map((session) => close(session)));
  }

  /** Closes every session (the caller's session ended). */
  async closeAll(): Promise<void> {
    const all = [...this.#sessions.values()];
    this.#sessions.clear();
    await Promise.all(all.map((session) => close(session)));
  }
}

async function close(session: Promise<Upstream>): Promise<void> {
  const upstream = await session.catch(() => null);
  if (upstream === null) return;
  // Ends the server's session too (a DELETE through the gateway), best effort.
  const transport = upstream.client.transport as StreamableHTTPClientTransport | undefined;
  await transport?.terminateSession?.().catch(() => {});
  await upstream.client.close().catch(() => {});
}
