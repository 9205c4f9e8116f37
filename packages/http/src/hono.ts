/**
 * `@keyway/http/hono`: the broker-token guard as Hono middleware, for an app's own routes.
 *
 * @module
 */
import type { Broker, Principal } from '@keyway/core';
import { guardErrorResponse, principalFor } from './guard.js';
import { clientAddressOf } from './request.js';

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
