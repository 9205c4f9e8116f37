import { type Broker, isKeywayError, KeywayError, type Principal } from '@keyway/core';
import { bearerOf, clientAddressOf } from './request.js';
import { errorReply, errorResponse } from './responses.js';

/*
 * Guards for an app's own routes: the same broker tokens that reach Keyway's API, each
 * allowed only inside its scopes (docs/api.md §3.1), checked by `broker.authenticate` and
 * `broker.authorize` as core checks its own resources.
 */

/** Why the header is refused before anything else is looked at. */
const malformed = () =>
  new KeywayError('invalid_token', 'the Authorization header is not "Bearer <token>"');

async function principalFor(
  broker: Broker,
  header: string | null | undefined,
  path: string,
  clientAddress: string | null,
): Promise<Principal> {
  const credential = bearerOf(header);
  if (credential === undefined) throw malformed();
  const principal = await broker.authenticate(credential, { clientAddress });
  broker.authorize(principal, path);
  return principal;
}

/**
 * A guard for fetch-style routes (Next.js route handlers, Bun.serve, Deno.serve): the
 * principal behind the request's broker token, once its scopes cover the resource path
 * `pathOf` names for the request.
 *
 * @throws {KeywayError} `invalid_token` (401), `insufficient_scope` (403), `invalid_path`,
 *   `rate_limited`; answer them with {@link guardErrorResponse}.
 * @example
 * const guard = requireBrokerToken(broker, (request) => `notes/${new URL(request.url).pathname.slice(7)}`);
 * export async function GET(request: Request) {
 *   try {
 *     const principal = await guard(request);
 *     return Response.json({ for: principal.kind });
 *   } catch (error) {
 *     return guardErrorResponse(error);
 *   }
 * }
 * @see [docs/api.md §3.1](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#31-scopes) (scopes cover paths by whole segments)
 */
export function requireBrokerToken(
  broker: Broker,
  pathOf: (request: Request) => string,
): (request: Request, context?: unknown) => Promise<Principal> {
  return (request, context) =>
    principalFor(
      broker,
      request.headers.get('authorization'),
      pathOf(request),
      clientAddressOf(request, context),
    );
}

/**
 * The API error response of a guard's refusal (`401`/`403` with `WWW-Authenticate`, as
 * Keyway's own routes answer); anything that is not a Keyway error is thrown again.
 */
export function guardErrorResponse(error: unknown, request?: Request): Response {
  if (!isKeywayError(error) || error.code === 'internal_error') throw error;
  const presented = request === undefined ? true : request.headers.has('authorization');
  return errorResponse(error, presented);
}

/** The part of an Express (or Connect, or `node:http`) request a guard reads. */
export interface NodeRequestLike {
  headers: { authorization?: string | undefined };
  socket?: { remoteAddress?: string | undefined };
}

/** The part of an Express response a guard writes. */
export interface NodeResponseLike {
  statusCode: number;
  setHeader(name: string, value: string): unknown;
  end(body: string): unknown;
  locals?: Record<string, unknown>;
}

/**
 * The guard as Express middleware: on success the principal is `res.locals.principal` and
 * the route runs; a refusal answers with the API's error body.
 *
 * @example
 * app.get('/notes/*path', brokerTokenMiddleware(broker, (req) => `notes/${req.params.path.join('/')}`), handler);
 * @see [docs/api.md §3.1](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#31-scopes)
 */
export function brokerTokenMiddleware<Req extends NodeRequestLike>(
  broker: Broker,
  pathOf: (req: Req) => string,
): (req: Req, res: NodeResponseLike, next: (error?: unknown) => void) => void {
  return (req, res, next) => {
    Promise.resolve()
      .then(() =>
        principalFor(
          broker,
          req.headers.authorization,
          pathOf(req),
          req.socket?.remoteAddress ?? null,
        ),
      )
      .then(
        (principal) => {
          if (res.locals !== undefined) res.locals.principal = principal;
          next();
        },
        (error: unknown) => {
          if (!isKeywayError(error) || error.code === 'internal_error') {
            next(error);
            return;
          }
          const reply = errorReply(error, req.headers.authorization !== undefined);
          res.statusCode = reply.status;
          for (const [name, value] of Object.entries(reply.headers)) res.setHeader(name, value);
          res.end(reply.body ?? '');
        },
      );
  };
}

/** The part of a Hono context a guard reads and writes. */
export interface HonoContextLike {
  req: { raw: Request };
  set(key: 'principal', value: Principal): void;
  env?: unknown;
}

/**
 * The guard as Hono middleware: on success the principal is `c.get('principal')` and the
 * route runs; a refusal answers with the API's error body. On `@hono/node-server` the
 * client address (for the limit of failed authentications) is the socket's.
 *
 * @example
 * app.use('/notes/*', honoBrokerToken(broker, (c) => c.req.path.slice(1)));
 * @see [docs/api.md §3.1](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#31-scopes)
 */
export function honoBrokerToken<C extends HonoContextLike>(
  broker: Broker,
  pathOf: (c: C) => string,
): (c: C, next: () => Promise<void>) => Promise<Response | undefined> {
  return async (c, next) => {
    const incoming = (c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined)
      ?.incoming;
    let principal: Principal;
    try {
      principal = await principalFor(
        broker,
        c.req.raw.headers.get('authorization'),
        pathOf(c),
        incoming?.socket?.remoteAddress ?? clientAddressOf(c.req.raw, c.env),
      );
    } catch (error) {
      return guardErrorResponse(error, c.req.raw);
    }
    c.set('principal', principal);
    await next();
    return undefined;
  };
}
