import { type Usable, usableTokens } from '../connections/usable.js';
import { type ConnectionTokens, renewable } from '../storage/states.js';
import type { UpstreamDeps } from './deps.js';

/*
 * The one skeleton of every request sent with a connection (docs/api.md §8, §13): usable
 * tokens (refreshed first when due), the endpoint they were authorized for, the request,
 * and — when the upstream refuses the token — one refresh and one retry. The gateway, the
 * API proxy and the probe differ only in where they send, what they send and how they
 * relay the answer.
 */

/**
 * A connection's tokens ready to send with: active, refreshed first when due or when
 * `force` asks (single-flight). A value when nothing had to be waited for (a storage that
 * reads synchronously, the tokens opened already), a promise otherwise.
 *
 * @throws {KeywayError} `not_found`, `connection_not_active`, `refresh_unavailable`,
 *   `reauthorization_required`, `upstream_error`: thrown, or the promise's rejection.
 */
export function usableFor(
  deps: UpstreamDeps,
  connectionId: string,
  force: boolean,
): Usable | Promise<Usable> {
  return usableTokens(deps, deps.records, deps.refresher, connectionId, force);
}

/**
 * Sends with a connection's tokens and, when the upstream refused them (`refused`) and they
 * can be renewed, once more with tokens refreshed for it: never more than one refresh and
 * one retry per request.
 *
 * @returns the last answer, and the tokens it was sent with.
 * @throws what `send` throws; {@link usableFor}'s errors when the refresh fails.
 */
export async function sendWithOneRefresh<A>(
  deps: UpstreamDeps,
  connectionId: string,
  tokens: ConnectionTokens,
  send: (tokens: ConnectionTokens) => Promise<A>,
  refused: (answer: A) => boolean,
  discard: (answer: A) => Promise<void>,
): Promise<{ answer: A; tokens: ConnectionTokens }> {
  const first = await send(tokens);
  if (!refused(first) || !renewable(tokens)) return { answer: first, tokens };
  await discard(first);
  const fresh = (await usableFor(deps, connectionId, true)).tokens;
  return { answer: await send(fresh), tokens: fresh };
}
