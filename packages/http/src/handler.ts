import { type Broker, KeywayError, type Principal, resourcePathFromUrl } from '@keyway/core';
import type { Incoming } from './incoming.js';
import { openApiDocument } from './openapi.js';
import { foreignOriginBody, originAllowed } from './origin.js';
import {
  bearerOf,
  clientAddressOf,
  DEFAULT_MAX_BODY_BYTES,
  rawPathOf,
  readFormBody,
  readJsonBody,
  readQuery,
  webBodyBytes,
} from './request.js';
import { errorReply, json, type Reply, toResponse } from './responses.js';
import {
  compileRoutes,
  type Method,
  matchRoutes,
  type Route,
  type RouteContext,
  type RouteTable,
  routesOf,
} from './routes/index.js';

import { observed, type RequestRecord, type Seen } from './telemetry.js';

export type { Incoming } from './incoming.js';
export type { RequestRecord } from './telemetry.js';

/** Options of {@link createHandler}. */
export interface HandlerOptions {
  /** Where the handler is mounted, e.g. `/keyway`; default `''` (the root). */
  basePath?: string;
  /** Largest accepted request body in bytes; default 1 MiB. */
  maxBodyBytes?: number;
  /**
   * Called with every error that is not a {@link KeywayError} (a bug or a storage failure)
   * before the handler answers `500 internal_error`. Default: `console.error`.
   */
  onInternalError?: (error: unknown, request: Request) => void;
  /**
   * The client's IP address, for the limit of failed authentications (docs/api.md §12). Default:
   * the socket's peer as `toNodeHandler` passes it, or what the runtime hands the handler
   * beside the request (Deno's `info.remoteAddr`, Bun's `server.requestIP()`, or
   * `{ clientAddress }`); `null` or `undefined` from this function falls back to it, and
   * without any address no limit applies. Behind a proxy, return the address your proxy
   * sets, never one a client can choose.
   */
  clientAddress?: (request: Request) => string | null | undefined;
  /**
   * Serves the inspector at `{basePath}/inspector` (docs/api.md §9): a page that walks the
   * connect flow with the credential typed into it. Default false.
   */
  inspector?: boolean;
  /**
   * Origins that may show the hosted connect page in a frame (docs/api.md §19,
   * `KEYWAY_CONNECT_FRAME_ANCESTORS`): its `frame-ancestors`. Default none: the page is
   * never framed.
   */
  connectFrameAncestors?: readonly string[];
  /**
   * Called once per request with its {@link RequestRecord} (route template, status,
   * duration, principal, client address; never a credential or a query): for request logs
   * and metrics (docs/api.md §16). With it, every answer carries `X-Request-Id`. A hook that
   * throws does not change the answer.
   */
  onRequest?: (record: RequestRecord) => void;
}

/**
 * A Web-standard request handler. The optional second argument is what a runtime passes
 * beside the request (Deno's `info`, Bun's `server`) or `{ clientAddress }`.
 */
export type KeywayHandler = (request: Request, context?: unknown) => Promise<Response>;

/** The handler before its answers become `Response`s. */
export type Dispatch = (incoming: Incoming) => Promise<Reply>;

/** Where a handler made by {@link createHandler} keeps its {@link Dispatch}. */
const DISPATCH = Symbol('keyway.dispatch');

/** The {@link Dispatch} of a handler made by {@link createHandler}, else undefined. */
export function dispatchOf(handler: KeywayHandler): Dispatch | undefined {
  return (handler as KeywayHandler & { [DISPATCH]?: Dispatch })[DISPATCH];
}

/** A Web `Request` as the handler reads it. */
function webIncoming(request: Request, context: unknown): Incoming {
  return {
    method: request.method,
    path: rawPathOf(request),
    authorization: () => request.headers.get('authorization'),
    header: (name) => request.headers.get(name),
    bytes: (limit) => webBodyBytes(request, limit),
    searchParams: () => new URL(request.url).searchParams,
    search: () => new URL(request.url).search,
    request: () => request,
    clientAddress: () => clientAddressOf(request, context),
    forwarded: () => request,
  };
}

/** What every request's {@link Context} shares. */
interface Shared {
  inspector: boolean;
  connectFrameAncestors: readonly string[];
  clientAddress: (incoming: Incoming) => string | null;
  document: () => string;
  maxBodyBytes: number;
}

/**
 * What a route's handler gets, as a class, so that every request's context has one hidden
 * class. As an object literal with a getter (`principal`), it had V8 make a hidden class
 * per request, in the old generation, holding that request's getter and through it the
 * whole request until the next full collection: about 2 KB of every request promoted, and
 * young collections ten times as long. `body`, `query` and `document` are own functions:
 * handlers take them apart (`({ body }) => …`).
 */
class Context implements RouteContext {
  readonly inspector: boolean;
  readonly connectFrameAncestors: readonly string[];
  readonly clientAddress: () => string | null;
  readonly document: () => string;
  readonly body: () => Promise<unknown>;
  readonly form: () => Promise<URLSearchParams>;
  readonly query: () => Record<string, unknown>;
  readonly #principal: Principal | null;

  constructor(
    readonly broker: Broker,
    readonly incoming: Incoming,
    principal: Principal | null,
    route: Route,
    readonly param: string,
    shared: Shared,
  ) {
    this.#principal = principal;
    this.inspector = shared.inspector;
    this.connectFrameAncestors = shared.connectFrameAncestors;
    this.clientAddress = () => shared.clientAddress(incoming);
    this.document = shared.document;
    this.body = () => readJsonBody(incoming, shared.maxBodyBytes);
    this.form = () => readFormBody(incoming, shared.maxBodyBytes);
    this.query = () =>
      route.query === undefined ? {} : readQuery(incoming.searchParams(), route.query);
  }

  /** The authenticated caller; a public route has none, and reading it throws. */
  get principal(): Principal {
    if (this.#principal === null) throw new Error('a public route has no principal');
    return this.#principal;
  }
}

/**
 * The origins of `connectFrameAncestors`, checked: each a bare `https://` origin (`http://`
 * only for a loopback host), as a CSP `frame-ancestors` source lists it.
 *
 * @throws {TypeError} naming the value that is no such origin.
 */
function frameAncestorsOf(given: readonly string[] | undefined): readonly string[] {
  return (given ?? []).map((text) => {
    let url: URL | null = null;
    try {
      url = new URL(text);
    } catch {}
    const loopback = url !== null && ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname);
    if (
      url === null ||
      url.origin !== text.replace(/\/$/, '') ||
      !(url.protocol === 'https:' || (url.protocol === 'http:' && loopback))
    ) {
      throw new TypeError(
        `connectFrameAncestors: ${JSON.stringify(text.slice(0, 200))} is not an origin like https://app.example.com ` +
          `(no path; http only on a loopback host)`,
      );
    }
    return url.origin;
  });
}

/** A public JSON document: cacheable a few minutes, readable by a browser-based client. */
const DOCUMENT_HEADERS = {
  'content-type': 'application/json; charset=utf-8',
  'cache-control': 'public, max-age=300',
  'x-content-type-options': 'nosniff',
  'access-control-allow-origin': '*',
};

/** A JSON-RPC refusal of an MCP endpoint's own. */
const RPC_HEADERS = { 'content-type': 'application/json', 'cache-control': 'no-store' };

/**
 * The well-known documents of sign-in for MCP clients (docs/api.md §17), which sit at the
 * origin's root whatever the base path: the authorization server's metadata (RFC 8414 §3)
 * and each MCP endpoint's protected-resource metadata (RFC 9728 §3). `null` for anything
 * else, and when sign-in is off.
 */
function wellKnown(broker: Broker, path: string, method: string): Reply | null {
  const signIn = broker.signIn;
  if (!signIn.enabled) return null;
  const metadata = signIn.metadata();
  const basePath = new URL(signIn.issuer).pathname.replace(/\/$/, '');
  const resourceRoot = `/.well-known/oauth-protected-resource${basePath}/`;
  // A connection's MCP endpoint (§13) or a portal (§18).
  const kind = ['mcp', 'portal'].find((name) => path.startsWith(`${resourceRoot}${name}/`));
  let document: Record<string, unknown>;
  if (path === metadata.path) {
    document = metadata.document;
  } else if (kind !== undefined) {
    let endpoint: string;
    try {
      endpoint = `${kind}/${resourcePathFromUrl(path.slice(resourceRoot.length + kind.length + 1))}`;
    } catch (error) {
      if (error instanceof KeywayError) return errorReply(error, false);
      throw error;
    }
    document = signIn.resourceMetadata(endpoint);
  } else {
    return null;
  }
  if (method !== 'GET' && method !== 'HEAD') {
    return json(
      405,
      new KeywayError('method_not_allowed', `${method} is not allowed here; use GET`).toJSON(),
      { allow: 'GET' },
    );
  }
  return { status: 200, headers: DOCUMENT_HEADERS, body: JSON.stringify(document) };
}

/**
 * Creates the Keyway HTTP handler: a function from a Web `Request` to a `Response`, for any
 * runtime or framework that speaks `fetch` (Node through {@link toNodeHandler}, Next.js
 * route handlers, Hono, Bun, Deno). It holds no policy: each route parses its input, calls
 * one core operation and serializes the result; errors answer with the docs/api.md §1.2 body.
 *
 * Pass the broker, or a function that makes it (called once, on the first request), for
 * frameworks that evaluate route modules at build time.
 *
 * @example
 * const handler = createHandler(broker, { basePath: '/keyway' });
 * // Next.js: nothing is configured while `next build` collects the route.
 * const lazy = createHandler(() => createBroker({ rootKey: process.env.KEYWAY_ROOT_KEY ?? '', storage }));
 * const response = await handler(new Request('http://localhost/keyway/api/admin/tokens', {
 *   headers: { authorization: `Bearer ${rootKey}` },
 * }));
 */
export function createHandler(
  broker: Broker | (() => Broker | Promise<Broker>),
  options: HandlerOptions = {},
): KeywayHandler {
  const basePath = (options.basePath ?? '').replace(/\/+$/, '');
  if (basePath !== '' && !basePath.startsWith('/')) {
    throw new TypeError('"basePath" must be empty or start with "/"');
  }
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  if (!Number.isInteger(maxBodyBytes) || maxBodyBytes < 1) {
    throw new TypeError('"maxBodyBytes" must be a positive integer');
  }
  const inspector = options.inspector === true;
  const onInternalError =
    options.onInternalError ?? ((error: unknown) => console.error('keyway: internal error', error));
  // A broker, or a function that makes it on the first request: frameworks that evaluate
  // route modules at build time (Next.js) then never need its configuration there. A
  // factory that fails is called again by the next request.
  const table: RouteTable = compileRoutes(routesOf(inspector));
  // The same for every request: built on the first one that asks.
  let documentText: string | undefined;
  const document = () => {
    documentText ??= JSON.stringify(openApiDocument());
    return documentText;
  };
  type Live = { broker: Broker };
  const live = (made: Broker): Live => ({ broker: made });
  let ready: Live | null = typeof broker === 'function' ? null : live(broker);
  let making: Promise<Live> | null = null;
  /** The broker of a factory, made once; a failed attempt is forgotten. */
  const make = (factory: () => Broker | Promise<Broker>): Promise<Live> => {
    making ??= Promise.resolve()
      .then(factory)
      .then((made) => {
        ready = live(made);
        return ready;
      })
      .finally(() => {
        making = null;
      });
    return making;
  };

  /** The client's address, as the option or the runtime gives it. */
  const clientAddressOf = (incoming: Incoming): string | null =>
    (options.clientAddress === undefined ? undefined : options.clientAddress(incoming.request())) ??
    incoming.clientAddress();

  const shared: Shared = {
    inspector,
    connectFrameAncestors: frameAncestorsOf(options.connectFrameAncestors),
    clientAddress: clientAddressOf,
    document,
    maxBodyBytes,
  };

  /** Every request's answer, as a {@link Reply}; what it learns on the way goes in `seen`. */
  const answer = async (incoming: Incoming, seen: Seen): Promise<Reply> => {
    const credential = bearerOf(incoming.authorization());
    // An MCP endpoint's challenge names its metadata when MCP clients may sign in (§17);
    // the endpoint is named only when that, or a token bound to one, needs it.
    let endpointOf: (() => string) | undefined;
    let signIn: Broker['signIn'] | undefined;
    try {
      const fullPath = incoming.path;
      const path =
        basePath === ''
          ? fullPath
          : fullPath === basePath || fullPath.startsWith(`${basePath}/`)
            ? fullPath.slice(basePath.length)
            : null;
      const { broker: current } =
        ready ?? (typeof broker === 'function' ? await make(broker) : live(broker));
      if (path === null || path.startsWith('/.well-known/')) {
        const document = wellKnown(current, fullPath, incoming.method);
        if (document !== null) return document;
      }
      const found = path === null ? [] : matchRoutes(table, path);
      const method = incoming.method.toUpperCase() as Method;
      const chosen = found.find(({ route }) => route.method === method);
      seen.route = (chosen ?? found[0])?.route ?? null;
      // An MCP endpoint refuses a browser page of another origin before anything else.
      if (found[0]?.route.audience !== undefined) {
        const origin = incoming.header('origin');
        if (
          origin !== null &&
          !originAllowed(origin, current.baseUrl ?? new URL(incoming.request().url).origin)
        ) {
          return { status: 403, headers: RPC_HEADERS, body: foreignOriginBody(origin) };
        }
      }

      // Precedence (docs/api.md §1.2): authentication, then route and method, then the body.
      // Public routes take no credential (a browser or an authorization server calls them).
      let principal: Principal | null = null;
      if (found[0]?.route.public !== true) {
        const route = found[0];
        const named = route?.route.audience;
        if (named !== undefined && route !== undefined) {
          let endpoint: string | undefined;
          endpointOf = () => {
            endpoint ??= named(route.param ?? '');
            return endpoint;
          };
          signIn = current.signIn;
        }
        if (credential === undefined) {
          throw new KeywayError(
            'invalid_token',
            'the Authorization header is not "Bearer <token>"',
          );
        }
        const clientAddress = clientAddressOf(incoming);
        principal = await current.authenticate(
          credential,
          endpointOf === undefined ? { clientAddress } : { clientAddress, audience: endpointOf },
        );
        seen.principal = principal;
      }
      if (found.length === 0) throw new KeywayError('not_found', 'no such endpoint');
      if (chosen === undefined) {
        const allow = [...new Set(found.map(({ route }) => route.method))].join(', ');
        return json(
          405,
          new KeywayError(
            'method_not_allowed',
            `${incoming.method} is not allowed here; use ${allow}`,
          ).toJSON(),
          { allow },
        );
      }
      const { route, param } = chosen;
      return await route.handle(new Context(current, incoming, principal, route, param, shared));
    } catch (error) {
      // Every internal error reaches the operator, whether or not it is a KeywayError (a
      // vault integrity failure is one); the caller only ever sees the generic body.
      if (error instanceof KeywayError && error.code !== 'internal_error') {
        const endpoint =
          error.code === 'invalid_token' && signIn?.enabled === true ? endpointOf?.() : undefined;
        const metadata =
          endpoint === undefined || endpoint === '' || signIn === undefined
            ? undefined
            : signIn.resourceMetadataUrl(endpoint);
        return errorReply(error, credential !== null, metadata);
      }
      onInternalError(error, incoming.request());
      return json(500, {
        error: 'internal_error',
        error_description: 'the server failed to handle the request',
      });
    }
  };

  const dispatch: Dispatch = observed(answer, {
    basePath,
    onRequest: options.onRequest,
    clientAddress: clientAddressOf,
  });
  const handler: KeywayHandler = async (request, context) =>
    toResponse(await dispatch(webIncoming(request, context)));
  Object.defineProperty(handler, DISPATCH, { value: dispatch });
  return handler;
}
