import type * as oauth from 'oauth4webapi';

/*
 * A protected resource's challenge (RFC 6750 §3, RFC 9449 §7.1), read once for every
 * upstream: which scheme challenged, and the scopes it named, as RFC 6749 §3.3 writes them —
 * nothing else of a hostile challenge reaches a caller or a consent.
 */

/** A scope token of RFC 6749 §3.3, at most 200 characters. */
const SCOPE_TOKEN = /^[\x21\x23-\x5b\x5d-\x7e]{1,200}$/;

/** The Bearer (or DPoP) challenge among an answer's, or `undefined`. */
export function bearerChallenge(
  challenges: readonly oauth.WWWAuthenticateChallenge[],
): oauth.WWWAuthenticateChallenge | undefined {
  return challenges.find(
    (challenge) => challenge.scheme === 'bearer' || challenge.scheme === 'dpop',
  );
}

/** The scopes a challenge names: RFC 6749 scope tokens only, at most 64. */
export function challengedScopes(challenge: oauth.WWWAuthenticateChallenge | undefined): string[] {
  return (challenge?.parameters.scope ?? '')
    .split(' ')
    .filter((scope) => SCOPE_TOKEN.test(scope))
    .slice(0, 64);
}

/** Whether a challenge asks for more scope (`403`, `error="insufficient_scope"`, RFC 6750 §3.1). */
export function asksForScope(
  status: number,
  challenge: oauth.WWWAuthenticateChallenge | undefined,
): boolean {
  return status === 403 && challenge?.parameters.error === 'insufficient_scope';
}
