import type { KeywayError } from '../contract/errors.js';
import { invalid } from './client.js';

/*
 * A stored client secret goes only to the endpoints it was given for. Whoever may PUT a
 * provider may re-point it; if a PUT that leaves the secret out could keep it while it moved
 * the token endpoint, a provider manager would have the operator's secret (and the next
 * tenant's code and PKCE verifier) sent to a server of its own. So the secret is bound to
 * every endpoint it is sent to, and moving one of them needs the secret in the same body.
 */

/** The endpoints a client secret is sent to: the token request, revocation, refresh. */
export interface SecretEndpoints {
  token_endpoint: string;
  revocation_endpoint: string | null;
  refresh_endpoint: string | null;
}

const NAMES = ['token_endpoint', 'revocation_endpoint', 'refresh_endpoint'] as const;

/** How a body names its endpoints, for the error: the field of each, and of the secret. */
export interface EndpointFields {
  /** The field of the body that sets `name` (`configuration.token_endpoint`, `profile`, …). */
  field(name: (typeof NAMES)[number]): string;
  /** The field that gives the secret again (`credentials.client_secret`). */
  secret: string;
}

const spelled = (value: string | null) => (value === null ? 'none' : JSON.stringify(value));

/**
 * The refusal of a kept secret whose endpoints moved, or `null` when `now` sends it to the
 * endpoints it was `bound` to. `bound` undefined (nothing recorded): refused, since nothing
 * says where the secret may go.
 */
export function movedSecret(
  bound: SecretEndpoints | undefined,
  now: SecretEndpoints,
  fields: EndpointFields,
): KeywayError | null {
  for (const name of NAMES) {
    const before = bound === undefined ? null : bound[name];
    if (bound !== undefined && before === now[name]) continue;
    if (bound === undefined && name !== 'token_endpoint') continue;
    const message =
      bound === undefined
        ? `nothing records where the stored client secret was given for, so give "${fields.secret}" again`
        : `"${name}" changed from ${spelled(before)} to ${spelled(now[name])}: a stored client secret is sent only ` +
          `to the endpoints it was given for, so give "${fields.secret}" again with the new endpoint`;
    return invalid(fields.field(name), message);
  }
  return null;
}
