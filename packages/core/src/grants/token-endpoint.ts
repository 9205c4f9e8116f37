import { decodeJwt } from 'jose';
import * as oauth from 'oauth4webapi';
import { OutboundError } from '../outbound/network-failure.js';
import { editJsonAnswer } from '../outbound/oauth-fetch.js';
import type { TokenEndpointAuthMethod } from '../providers/registration.js';
import type { ConnectionTokens, OAuthParty, TokenAnswer } from '../storage/states.js';
import { withNonceRetry } from './dpop.js';

/*
 * The OAuth party of an authorization (docs/api.md §5 "Connections keep their party"): the
 * authorization server and client its tokens came from, how Keyway authenticates as that
 * client, and what a failure there means. Refresh and revocation talk to the party only: a
 * provider re-pointed at another server never receives an existing connection's tokens.
 */

/** The RFC 8707 `resource` of a party's token requests: none for an `oauth2` provider. */
export function resourceParam(party: OAuthParty): Record<string, string> {
  return party.resource === null ? {} : { resource: party.resource };
}

/** The oauth4webapi view of a party: its server and its client. */
export function oauthPartyOf(
  party: OAuthParty,
  refresh = false,
): {
  as: oauth.AuthorizationServer;
  client: oauth.Client;
} {
  return {
    as: {
      issuer: party.issuer,
      token_endpoint: refresh
        ? (party.refresh_endpoint ?? party.token_endpoint)
        : party.token_endpoint,
      ...(party.revocation_endpoint === null
        ? {}
        : { revocation_endpoint: party.revocation_endpoint }),
      ...(party.iss_parameter_supported
        ? { authorization_response_iss_parameter_supported: true }
        : {}),
    },
    client: { client_id: party.client_id },
  };
}

/**
 * The `application/x-www-form-urlencoded` serialization of one value: letters, digits and
 * `*-._` stay, a space becomes `+`, everything else (UTF-8) is percent-encoded.
 */
export function formEncode(value: string): string {
  return new URLSearchParams([['', value]]).toString().slice(1);
}

/**
 * `client_secret_basic` as RFC 6749 §2.3.1 says: id and secret form-encoded, then Basic
 * (docs/api.md §6 item 10). Servers that compare the raw id and servers that decode both
 * accept `pre-registered-client`, which a percent-encoding of `-` would break.
 */
function formEncodedBasic(secret: string): oauth.ClientAuth {
  return (_as, client, _body, headers) => {
    const credentials = `${formEncode(client.client_id)}:${formEncode(secret)}`;
    headers.set('authorization', `Basic ${btoa(credentials)}`);
  };
}

/** The oauth4webapi client authentication for a method and the client's secret. */
export function clientAuthentication(
  method: TokenEndpointAuthMethod,
  secret: string | null,
): oauth.ClientAuth {
  if (method === 'client_secret_basic' && secret !== null) return formEncodedBasic(secret);
  if (method === 'client_secret_post' && secret !== null) return oauth.ClientSecretPost(secret);
  return oauth.None();
}

/** An authorization response refused before anything of it is used (RFC 9207 `iss`). */
export class ResponseRefused extends Error {
  override readonly name = 'ResponseRefused';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The OAuth `error` code of a failed token request, also when the server sent it with a
 * `WWW-Authenticate` challenge (a 401 `invalid_client` often comes with `Basic`).
 */
export async function oauthErrorCode(error: unknown): Promise<string | null> {
  // An authorization response's `error` too: a server that redirects with
  // `error=invalid_client` says it does not know the client.
  if (error instanceof oauth.ResponseBodyError || error instanceof oauth.AuthorizationResponseError)
    return error.error;
  if (error instanceof oauth.WWWAuthenticateChallengeError) {
    const body: unknown = await error.response
      .clone()
      .json()
      .catch(() => null);
    if (typeof body === 'object' && body !== null && 'error' in body) {
      if (typeof body.error === 'string') return body.error;
    }
    const parameter = error.cause.find((challenge) => challenge.parameters.error)?.parameters.error;
    return parameter ?? null;
  }
  return null;
}

/** Describes what went wrong talking to an authorization server: never a secret. */
export function describeOAuthFailure(error: unknown): { code: string; description: string } {
  if (error instanceof ResponseRefused) return { code: error.code, description: error.message };
  if (
    error instanceof oauth.AuthorizationResponseError ||
    error instanceof oauth.ResponseBodyError
  ) {
    return { code: error.error, description: error.error_description ?? error.error };
  }
  if (error instanceof OutboundError)
    return { code: 'server_unreachable', description: error.message };
  if (error instanceof oauth.OperationProcessingError) {
    // oauth4webapi reads error bodies of 4xx answers only; a 5xx is the server's trouble.
    const status = error.cause instanceof Response ? error.cause.status : 0;
    if (status >= 500) {
      return {
        code: 'server_error',
        description: `the authorization server answered HTTP ${status}`,
      };
    }
    return { code: 'invalid_response', description: error.message };
  }
  return { code: 'server_error', description: 'the authorization server could not be used' };
}

/** Where the account an ID token names travels from {@link asTokenAnswer} to {@link tokensFrom}. */
const ACCOUNT = 'keyway_account';

/**
 * The account an ID token names, for people to read (the connect page's "connected as"):
 * its `email`, `preferred_username` or `name`. Its payload is read, not verified: the answer
 * came from the token endpoint over TLS (OpenID Connect Core §3.1.3.7), and the value only
 * ever labels a connection — nothing is authorized by it. `null` without one.
 */
function accountOf(idToken: unknown): string | null {
  if (typeof idToken !== 'string') return null;
  let claims: Record<string, unknown>;
  try {
    claims = decodeJwt(idToken);
  } catch {
    return null;
  }
  for (const claim of ['email', 'preferred_username', 'name']) {
    const value = claims[claim];
    if (typeof value === 'string' && value !== '' && value.length <= 320) return value;
  }
  return null;
}

/**
 * A token endpoint's answer as RFC 6749 §5 writes it, from what real servers send (docs/api.md
 * §6 item 10): an OAuth error answered with status 200 is an error; a success
 * without `token_type` is a Bearer token (RFC 6749 §5.1 requires the field, but the
 * registration answers of the same servers are read as tolerantly); `scope`
 * comma-separated or padded with spaces is one space-separated list; `expires_in` of `0`
 * says nothing about the expiry; an empty `refresh_token` is none. An `id_token` is
 * dropped: Keyway signs nobody in, so it neither checks nor keeps one (only the account it
 * names, as a label). Anything else is left
 * for oauth4webapi to judge (it reads `expires_in` given as a string, and `token_type` in
 * any case).
 */
export function asTokenAnswer(response: Response): Promise<Response> {
  return editJsonAnswer(response, (answer, received) => {
    const status =
      received === 200 && typeof answer.error === 'string' && answer.access_token === undefined
        ? 400
        : received;
    if (status === 200) {
      if (answer.token_type === undefined) answer.token_type = 'Bearer';
      if (typeof answer.scope === 'string') {
        answer.scope = answer.scope
          .split(/[\s,]+/)
          .filter(Boolean)
          .join(' ');
      }
      if (answer.expires_in === 0 || answer.expires_in === '0') delete answer.expires_in;
      if (answer.refresh_token === '' || answer.refresh_token === null) delete answer.refresh_token;
      const account = accountOf(answer.id_token);
      if (account !== null) answer[ACCOUNT] = account;
      delete answer.id_token;
    }
    return { body: answer, status };
  });
}

/**
 * The tokens to keep from a token response (an unrotated refresh token is kept), and the
 * response described without its tokens (`answer`: the connection state keeps it, the
 * vault entry does not).
 */
export function tokensFrom(
  result: oauth.TokenEndpointResponse,
  previous: { refresh_token: string | null; party: OAuthParty; generation?: number },
  now: number,
  grantType: string,
): ConnectionTokens & { answer: TokenAnswer; account?: string } {
  const account = result[ACCOUNT];
  return {
    ...(typeof account === 'string' ? { account } : {}),
    answer: {
      received_at: now,
      grant_type: grantType,
      token_type: result.token_type,
      expires_in: typeof result.expires_in === 'number' ? result.expires_in : null,
      scope: typeof result.scope === 'string' ? result.scope : null,
      refresh_token: typeof result.refresh_token === 'string' ? 'present' : 'absent',
      ...refreshLifetime(result.refresh_token_expires_in),
      fields: Object.keys(result)
        .filter((field) => field !== ACCOUNT)
        .sort(),
    },
    access_token: result.access_token,
    token_type: result.token_type,
    refresh_token: result.refresh_token ?? previous.refresh_token,
    expires_at: typeof result.expires_in === 'number' ? now + result.expires_in * 1000 : null,
    scope:
      typeof result.scope === 'string' && result.scope.trim() !== ''
        ? result.scope.trim().split(/\s+/)
        : [],
    generation: previous.generation ?? 0,
    issued_at: now,
    party: previous.party,
  };
}

/**
 * `refresh_token_expires_in` when the answer has one in whole seconds (a number, or its
 * decimal text); nothing for anything else.
 */
function refreshLifetime(value: unknown): { refresh_token_expires_in?: number } {
  const seconds = typeof value === 'string' && /^\d{1,12}$/.test(value) ? Number(value) : value;
  return typeof seconds === 'number' && Number.isSafeInteger(seconds) && seconds > 0
    ? { refresh_token_expires_in: seconds }
    : {};
}

/** The `grant_type` of the JWT bearer grant (RFC 7523 §2.1). */
export const JWT_BEARER_GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';

/**
 * The JWT bearer grant (RFC 7523 §2.1) with `parameters` (its `assertion` among them), a
 * DPoP nonce retried once.
 */
export function jwtBearerGrant(
  as: oauth.AuthorizationServer,
  client: oauth.Client,
  auth: oauth.ClientAuth,
  parameters: URLSearchParams,
  options: Parameters<typeof oauth.genericTokenEndpointRequest>[5],
): Promise<oauth.TokenEndpointResponse> {
  return withNonceRetry(async () =>
    oauth.processGenericTokenEndpointResponse(
      as,
      client,
      await oauth.genericTokenEndpointRequest(
        as,
        client,
        auth,
        JWT_BEARER_GRANT,
        parameters,
        options,
      ),
    ),
  );
}
