import {
  type Broker,
  KeywayError,
  type Principal,
  resourcePathFromUrl,
  schemas,
} from '@keyway/core';
import { callbackReply, invalidCallbackReply } from './callback-page.js';
import { CALLBACK_SCRIPT, INSPECTOR_ASSETS, INSPECTOR_HTML } from './inspector-assets.generated.js';
import { openApiDocument } from './openapi.js';
import {
  bearerOf,
  clientAddressOf,
  DEFAULT_MAX_BODY_BYTES,
  rawPathOf,
  readJsonBody,
  readQuery,
} from './request.js';
import { errorReply, json, noContent, type Reply, toResponse } from './responses.js';

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
   * The client's IP address, for the limit of failed authentications (API.md §12). Default:
   * the socket's peer as `toNodeHandler` passes it, or what the runtime hands the handler
   * beside the request (Deno's `info.remoteAddr`, Bun's `server.requestIP()`, or
   * `{ clientAddress }`); `null` or `undefined` from this function falls back to it, and
   * without any address no limit applies. Behind a proxy, return the address your proxy
   * sets, never one a client can choose.
   */
  clientAddress?: (request: Request) => string | null | undefined;
  /**
   * Serves the inspector at `{basePath}/inspector` (API.md §9): a page that walks the
   * connect flow with the credential typed into it. Default false.
   */
  inspector?: boolean;
}

/**
 * A Web-standard request handler. The optional second argument is what a runtime passes
 * beside the request (Deno's `info`, Bun's `server`) or `{ clientAddress }`.
 */
export type KeywayHandler = (request: Request, context?: unknown) => Promise<Response>;

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/**
 * What the handler reads of a request: a Web `Request` wrapped, or a Node request read
 * directly by `toNodeHandler`, which then never builds a `Request` for a read.
 */
export interface Incoming {
  readonly method: string;
  /** The still-encoded path: the raw request target's, when the adapter kept it. */
  readonly path: string;
  /** The `Authorization` header (several joined with `, `, as `Headers.get` does), or null. */
  authorization(): string | null;
  /** The query parameters. */
  searchParams(): URLSearchParams;
  /** The request as a Web `Request`, made when first asked (bodies, hooks). */
  request(): Request;
  /** The client address the adapter or runtime gave beside the request, or null. */
  clientAddress(): string | null;
}

/** The handler before its answers become `Response`s. */
export type Dispatch = (incoming: Incoming) => Promise<Reply>;

/** Where a handler made by {@link createHandler} keeps its {@link Dispatch}. */
const DISPATCH = Symbol('keyway.dispatch');

/** The {@link Dispatch} of a handler made by {@link createHandler}, else undefined. */
export function dispatchOf(handler: KeywayHandler): Dispatch | undefined {
  return (handler as KeywayHandler & { [DISPATCH]?: Dispatch })[DISPATCH];
}

interface RouteContext {
  incoming: Incoming;
  principal: Principal;
  /** The still-encoded rest of the path after the route prefix (`''` for exact routes). */
  rest: string;
  /** The JSON body, read on demand with the size and media-type checks. */
  body(): Promise<unknown>;
  /** The query parameters, typed for a query schema (see `readQuery`). */
  query(schema: Parameters<typeof readQuery>[1]): Record<string, unknown>;
}

type RouteHandler = (context: RouteContext) => Promise<Reply>;

interface Route {
  /** Path after the base path, e.g. `/api/admin/tokens`. */
  prefix: string;
  /** Reached without a credential (API.md: the callback and the client metadata document). */
  public?: boolean;
  /** `exact`: the path is the prefix; `rest`: the prefix, `/`, then at least one character. */
  match: 'exact' | 'rest';
  methods: Partial<Record<Method, RouteHandler>>;
}

/** Decodes the one-segment token name of `/api/admin/tokens/<name>`. */
function tokenNameFrom(rest: string): string {
  try {
    return decodeURIComponent(rest);
  } catch {
    // Not percent-decodable: let core refuse it as a name.
    return rest;
  }
}

/** The security headers of the inspector's page: nothing but this origin, no framing. */
const INSPECTOR_PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  // A window this page opens (the consent popup) or one that opened it gets no handle on it.
  'cross-origin-opener-policy': 'same-origin',
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
};

function inspectorRoutes(): Route[] {
  return [
    {
      prefix: '/inspector',
      match: 'exact',
      public: true,
      methods: {
        GET: async () => ({ status: 200, headers: INSPECTOR_PAGE_HEADERS, body: INSPECTOR_HTML }),
      },
    },
    {
      prefix: '/inspector/assets',
      match: 'rest',
      public: true,
      methods: {
        GET: async ({ rest }) => {
          const asset = Object.hasOwn(INSPECTOR_ASSETS, rest) ? INSPECTOR_ASSETS[rest] : undefined;
          if (asset === undefined) throw new KeywayError('not_found', 'no such asset');
          // Named by their content: cached for a year, never revalidated.
          return {
            status: 200,
            headers: {
              'content-type': asset.type,
              'cache-control': 'public, max-age=31536000, immutable',
              'x-content-type-options': 'nosniff',
            },
            body: asset.body,
          };
        },
      },
    },
  ];
}

/** Public JSON documents: cacheable for a few minutes. */
const PUBLIC_JSON_HEADERS = {
  'content-type': 'application/json; charset=utf-8',
  'cache-control': 'public, max-age=300',
  'x-content-type-options': 'nosniff',
};

function routes(broker: Broker, inspector: boolean): Route[] {
  let openApi: string | undefined;
  return [
    ...(inspector ? inspectorRoutes() : []),
    {
      prefix: '/api/admin/tokens',
      match: 'exact',
      methods: {
        GET: async ({ query, principal }) =>
          json(200, await broker.tokens.list(principal, query(schemas.TokenListQuery))),
        POST: async ({ principal, body }) =>
          json(201, await broker.tokens.mint(principal, await body())),
      },
    },
    {
      prefix: '/api/admin/tokens',
      match: 'rest',
      methods: {
        GET: async ({ principal, rest }) =>
          json(200, await broker.tokens.get(principal, tokenNameFrom(rest))),
        PATCH: async ({ principal, rest, body }) => {
          const name = tokenNameFrom(rest);
          return json(200, await broker.tokens.narrow(principal, name, await body()));
        },
        DELETE: async ({ principal, rest }) => {
          await broker.tokens.delete(principal, tokenNameFrom(rest));
          return noContent();
        },
      },
    },
    {
      prefix: '/api/admin/providers',
      match: 'exact',
      methods: {
        GET: async ({ query, principal }) =>
          json(200, await broker.providers.list(principal, query(schemas.ProviderListQuery))),
      },
    },
    {
      prefix: '/api/admin/providers',
      match: 'rest',
      methods: {
        GET: async ({ principal, rest }) =>
          json(200, await broker.providers.get(principal, resourcePathFromUrl(rest))),
        PUT: async ({ principal, rest, body }) => {
          const input = await body();
          const { provider, created } = await broker.providers.put(
            principal,
            resourcePathFromUrl(rest),
            input,
          );
          return json(created ? 201 : 200, provider);
        },
        DELETE: async ({ principal, rest }) => {
          await broker.providers.delete(principal, resourcePathFromUrl(rest));
          return noContent();
        },
        // `POST /api/admin/providers/<id>/register`: the one POST under a provider.
        POST: async ({ principal, rest }) => {
          if (!rest.endsWith('/register')) {
            throw new KeywayError(
              'not_found',
              'no such endpoint: POST takes /api/admin/providers/<provider_id>/register',
            );
          }
          const id = resourcePathFromUrl(rest.slice(0, -'/register'.length));
          return json(200, await broker.providers.register(principal, id));
        },
      },
    },
    {
      prefix: '/api/admin/audit',
      match: 'exact',
      methods: {
        GET: async ({ query, principal }) =>
          json(200, await broker.events.list(principal, query(schemas.AuditListQuery))),
      },
    },
    {
      prefix: '/api/admin/webhooks/deliveries',
      match: 'exact',
      methods: {
        GET: async ({ query, principal }) =>
          json(200, await broker.events.deliveries(principal, query(schemas.DeliveryListQuery))),
      },
    },
    {
      prefix: '/api/admin/discover',
      match: 'exact',
      methods: {
        POST: async ({ principal, body }) =>
          json(200, await broker.providers.discover(principal, await body())),
      },
    },
    {
      prefix: '/api/oauth/client-metadata.json',
      match: 'exact',
      public: true,
      methods: {
        GET: async () => {
          const document = broker.clientMetadataDocument();
          if (document === null)
            throw new KeywayError('not_found', 'this deployment has no base URL');
          return { status: 200, headers: PUBLIC_JSON_HEADERS, body: JSON.stringify(document) };
        },
      },
    },
    {
      prefix: '/api/openapi.json',
      match: 'exact',
      public: true,
      methods: {
        GET: async () => {
          // The same for every request: built on the first one.
          openApi ??= JSON.stringify(openApiDocument());
          return { status: 200, headers: PUBLIC_JSON_HEADERS, body: openApi };
        },
      },
    },
    {
      prefix: '/api/oauth/authorize',
      match: 'rest',
      methods: {
        POST: async ({ principal, rest, body }) => {
          const input = await body();
          return json(
            201,
            await broker.connections.authorize(principal, resourcePathFromUrl(rest), input),
          );
        },
      },
    },
    ...(['exact', 'rest'] as const).map(
      (match): Route => ({
        // The shared callback, and each authorization server's own (API.md §5 "Mix-up defense").
        prefix: '/api/oauth/callback',
        match,
        public: true,
        methods: {
          GET: async ({ incoming, rest }) => {
            try {
              return callbackReply(
                await broker.connections.callback(
                  incoming.searchParams(),
                  match === 'rest' ? rest : null,
                ),
                inspector
                  ? `${match === 'rest' ? '../' : ''}../../inspector/assets/${CALLBACK_SCRIPT}`
                  : undefined,
              );
            } catch (error) {
              if (error instanceof KeywayError && error.code === 'invalid_request') {
                return invalidCallbackReply(error.message);
              }
              throw error;
            }
          },
        },
      }),
    ),
    {
      prefix: '/api/oauth/verify',
      match: 'exact',
      methods: {
        POST: async ({ principal, body }) =>
          json(200, await broker.connections.verify(principal, await body())),
      },
    },
    {
      prefix: '/api/oauth/connections',
      match: 'exact',
      methods: {
        GET: async ({ query, principal }) =>
          json(200, await broker.connections.list(principal, query(schemas.ConnectionListQuery))),
      },
    },
    {
      prefix: '/api/oauth/connections',
      match: 'rest',
      methods: {
        GET: async ({ principal, rest }) =>
          json(200, await broker.connections.get(principal, resourcePathFromUrl(rest))),
        DELETE: async ({ principal, rest }) => {
          await broker.connections.delete(principal, resourcePathFromUrl(rest));
          return noContent();
        },
      },
    },
    {
      prefix: '/api/oauth/probe',
      match: 'rest',
      methods: {
        POST: async ({ principal, rest }) =>
          json(200, await broker.connections.probe(principal, resourcePathFromUrl(rest))),
      },
    },
    {
      prefix: '/api/oauth/credentials',
      match: 'rest',
      methods: {
        GET: async ({ query, principal, rest }) =>
          json(
            200,
            await broker.connections.credentials(
              principal,
              resourcePathFromUrl(rest),
              query(schemas.CredentialsQuery),
            ),
          ),
      },
    },
    {
      prefix: '/api/vault/secrets',
      match: 'exact',
      methods: {
        GET: async ({ query, principal }) =>
          json(200, await broker.secrets.list(principal, query(schemas.SecretListQuery))),
      },
    },
    {
      prefix: '/api/vault/secrets',
      match: 'rest',
      methods: {
        GET: async ({ principal, rest }) =>
          json(200, await broker.secrets.get(principal, resourcePathFromUrl(rest))),
        PUT: async ({ principal, rest, body }) => {
          const input = await body();
          const { secret, created } = await broker.secrets.put(
            principal,
            resourcePathFromUrl(rest),
            input,
          );
          return json(created ? 201 : 200, secret);
        },
        DELETE: async ({ principal, rest }) => {
          await broker.secrets.delete(principal, resourcePathFromUrl(rest));
          return noContent();
        },
      },
    },
  ];
}

/** A Web `Request` as the handler reads it. */
function webIncoming(request: Request, context: unknown): Incoming {
  return {
    method: request.method,
    path: rawPathOf(request),
    authorization: () => request.headers.get('authorization'),
    searchParams: () => new URL(request.url).searchParams,
    request: () => request,
    clientAddress: () => clientAddressOf(request, context),
  };
}

function findRoute(table: Route[], path: string): { route: Route; rest: string } | null {
  for (const route of table) {
    if (route.match === 'exact' && path === route.prefix) return { route, rest: '' };
    if (
      route.match === 'rest' &&
      path.length > route.prefix.length + 1 &&
      path.startsWith(`${route.prefix}/`)
    ) {
      return { route, rest: path.slice(route.prefix.length + 1) };
    }
  }
  return null;
}

/**
 * Creates the Keyway HTTP handler: a function from a Web `Request` to a `Response`, for any
 * runtime or framework that speaks `fetch` (Node through {@link toNodeHandler}, Next.js
 * route handlers, Hono, Bun, Deno). It holds no policy: each route parses its input, calls
 * one core operation and serializes the result; errors answer with the API.md §1.2 body.
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
  type Live = { broker: Broker; table: Route[] };
  const live = (made: Broker): Live => ({ broker: made, table: routes(made, inspector) });
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

  /** Every request's answer, as a {@link Reply}. */
  const dispatch: Dispatch = async (incoming) => {
    const credential = bearerOf(incoming.authorization());
    try {
      const fullPath = incoming.path;
      const path =
        basePath === ''
          ? fullPath
          : fullPath === basePath || fullPath.startsWith(`${basePath}/`)
            ? fullPath.slice(basePath.length)
            : null;
      const { broker: current, table } =
        ready ?? (typeof broker === 'function' ? await make(broker) : live(broker));
      const found = path === null ? null : findRoute(table, path);

      // Precedence (API.md §1.2): authentication, then route and method, then the body.
      // Public routes take no credential (a browser or an authorization server calls them).
      let principal: Principal | null = null;
      if (found?.route.public !== true) {
        if (credential === undefined) {
          throw new KeywayError(
            'invalid_token',
            'the Authorization header is not "Bearer <token>"',
          );
        }
        const clientAddress =
          (options.clientAddress === undefined
            ? undefined
            : options.clientAddress(incoming.request())) ?? incoming.clientAddress();
        principal = await current.authenticate(credential, { clientAddress });
      }
      if (found === null) throw new KeywayError('not_found', 'no such endpoint');
      const method = incoming.method.toUpperCase() as Method;
      const handle = found.route.methods[method];
      if (handle === undefined) {
        const allow = Object.keys(found.route.methods).join(', ');
        return json(
          405,
          new KeywayError(
            'method_not_allowed',
            `${incoming.method} is not allowed here; use ${allow}`,
          ).toJSON(),
          { allow },
        );
      }
      return await handle({
        incoming,
        get principal(): Principal {
          if (principal === null) throw new Error('a public route has no principal');
          return principal;
        },
        rest: found.rest,
        body: () => readJsonBody(incoming.request(), maxBodyBytes),
        query: (schema) => readQuery(incoming.searchParams(), schema),
      });
    } catch (error) {
      // Every internal error reaches the operator, whether or not it is a KeywayError (a
      // vault integrity failure is one); the caller only ever sees the generic body.
      if (error instanceof KeywayError && error.code !== 'internal_error') {
        return errorReply(error, credential !== null);
      }
      onInternalError(error, incoming.request());
      return json(500, {
        error: 'internal_error',
        error_description: 'the server failed to handle the request',
      });
    }
  };

  const handler: KeywayHandler = async (request, context) =>
    toResponse(await dispatch(webIncoming(request, context)));
  Object.defineProperty(handler, DISPATCH, { value: dispatch });
  return handler;
}
