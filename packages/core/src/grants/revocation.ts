import * as oauth from 'oauth4webapi';
import { libraryOptions } from '../outbound/oauth-fetch.js';
import type { ConnectionTokens } from '../storage/states.js';
import { inSpan, PROVIDER } from '../telemetry/tracing.js';
import { authenticationOf } from './client-auth.js';
import type { GrantDeps } from './deps.js';
import { oauthErrorCode, oauthPartyOf } from './token-endpoint.js';

/* Revocation when a connection is deleted (docs/api.md §5; RFC 7009): best effort, at the party. */

/** What the authorization server answered to one revocation request (RFC 7009). */
export type RevocationResult = {
  token: 'refresh_token' | 'access_token';
  /** The HTTP status, or `null` when the server could not be reached. */
  status: number | null;
  /** `null` when revoked; else the OAuth error code, `server_unreachable` or `invalid_response`. */
  error: string | null;
};

/**
 * The revocation a deletion attempted, in its `connection.deleted` event: whether it was
 * attempted, why not, or what the server answered for each token. Never a token.
 */
export type RevocationOutcome =
  | { attempted: false; reason: 'no_tokens' | 'no_revocation_endpoint' | 'client_unavailable' }
  | { attempted: true; results: RevocationResult[] };

/** A revocation's outcome as its span names it: `revoked`, `failed`, or why none was tried. */
function revocationOutcome(outcome: RevocationOutcome): string {
  if (!outcome.attempted) return outcome.reason;
  return outcome.results.every((result) => result.error === null) ? 'revoked' : 'failed';
}

/**
 * The error code of a failed revocation request: the server's OAuth `error` when its body
 * has one (also for a 5xx, whose body oauth4webapi does not read), else `server_error` for
 * a 5xx, `server_unreachable` without an answer, `invalid_response` otherwise.
 */
async function revocationError(error: unknown, status: number | null): Promise<string> {
  if (status === null) return 'server_unreachable';
  const code = await oauthErrorCode(error);
  if (code !== null) return code;
  const response = error instanceof oauth.OperationProcessingError ? error.cause : null;
  if (response instanceof Response) {
    const body: unknown = await response
      .clone()
      .json()
      .catch(() => null);
    if (typeof body === 'object' && body !== null && 'error' in body) {
      if (typeof body.error === 'string') return body.error.slice(0, 64);
    }
  }
  return status >= 500 ? 'server_error' : 'invalid_response';
}

/**
 * Revokes at the party the tokens came from, never at the provider's current server, and
 * answers what happened there (for the `connection.deleted` event: never a token), in a
 * `keyway.revocation` span.
 */
export function revoke(
  deps: GrantDeps,
  providerId: string,
  tokens: ConnectionTokens,
): Promise<RevocationOutcome> {
  return inSpan(
    'keyway.revocation',
    { [PROVIDER]: providerId },
    () => revokeAtParty(deps, providerId, tokens),
    revocationOutcome,
  );
}

async function revokeAtParty(
  deps: GrantDeps,
  providerId: string,
  tokens: ConnectionTokens,
): Promise<RevocationOutcome> {
  const { party } = tokens;
  if (party.revocation_endpoint === null) {
    return { attempted: false, reason: 'no_revocation_endpoint' };
  }
  const auth = await authenticationOf(deps, providerId, party, 'any').catch(() => null);
  // The provider no longer holds that client's secret: nothing to authenticate with.
  if (auth === null) return { attempted: false, reason: 'client_unavailable' };
  const { as, client } = oauthPartyOf(party);
  const results: RevocationResult[] = [];
  // The refresh token first: revoking it ends the grant (RFC 7009 §2.1).
  for (const [token, hint] of [
    [tokens.refresh_token, 'refresh_token'],
    [tokens.access_token, 'access_token'],
  ] as const) {
    if (token === null) continue;
    let status: number | null = null;
    try {
      const response = await oauth.revocationRequest(as, client, auth, token, {
        ...libraryOptions(deps.outbound),
        additionalParameters: { token_type_hint: hint },
      });
      status = response.status;
      await oauth.processRevocationResponse(response);
      results.push({ token: hint, status, error: null });
    } catch (error) {
      // Best effort (docs/api.md §5): the connection is deleted whatever the server says, and
      // the event says what it said (oauth4webapi reads error bodies of 4xx only).
      results.push({ token: hint, status, error: await revocationError(error, status) });
    }
  }
  return { attempted: true, results };
}
