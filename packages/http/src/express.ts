/**
 * `@keyway/http/express`: the broker-token guard as Express (or Connect, or `node:http`)
 * middleware, for an app's own routes.
 *
 * @module
 */
import { type Broker, isKeywayError } from '@keyway/core';
import { principalFor } from './guard.js';
import { errorReply } from './responses.js';

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
