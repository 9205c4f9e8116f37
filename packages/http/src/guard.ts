import { type Broker, isKeywayError, KeywayError, type Principal } from '@keyway/core';
import { bearerOf, clientAddressOf } from './request.js';
import { errorResponse } from './responses.js';

/*
 * Guards for an app's own routes: the same broker tokens that reach Keyway's API, each
 * allowed only inside its scopes (docs/api.md §3.1), checked by `broker.authenticate` and
 * `broker.authorize` as core checks its own resources.
 */

/** Why the header is refused before anything else is looked at. */
const malformed = () =>
  new KeywayError('invalid_token', 'the Authorization header is not "Bearer <token>"');

/** The principal behind a request's `Authorization`, once its scopes cover `path`. */
export async function principalFor(
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
