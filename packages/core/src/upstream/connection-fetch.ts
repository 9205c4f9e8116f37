import * as oauth from 'oauth4webapi';
import { z } from 'zod';
import { ERROR_STATUS, KeywayError, type KeywayErrorCode } from '../contract/errors.js';
import { type DpopKey, dpopOptions, withNonceRetry } from '../grants/dpop.js';
import { oauthFetch } from '../outbound/oauth-fetch.js';

/** What a remote Keyway's credentials endpoint answers, as far as it is read. */
const RemoteAnswer = z.object({
  access_token: z.string().optional(),
  error: z.string().optional(),
  error_description: z.string().optional(),
});

/**
 * Where a connection's access token comes from.
 *
 * @see [docs/api.md §5](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#5-connections) "Credentials"
 */
export type CredentialSource = (options: {
  forceRefresh: boolean;
}) => Promise<{ access_token: string; dpop?: DpopKey | undefined }>;

/**
 * The MCP server refused a call for lack of scope (`403`, `error="insufficient_scope"`):
 * re-authorize the connection with `scopes` (the challenge's `scope`) and try again.
 *
 * @see [RFC 6750 §3.1](https://www.rfc-editor.org/rfc/rfc6750.html#section-3.1); [docs/api.md §6](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#6-mcp-discovery) item 12 (step-up)
 */
export class InsufficientScopeError extends KeywayError {
  override readonly name: string = 'InsufficientScopeError';
  declare readonly code: 'insufficient_scope';
  constructor(
    /** The scopes the server challenged with; pass them to the authorize call. */
    readonly scopes: string[],
    /** The server's answer (body unread). */
    readonly response: Response,
  ) {
    super(
      'insufficient_scope',
      `the MCP server needs more scope${scopes.length ? `: ${scopes.join(' ')}` : ''}`,
      { details: [{ path: 'scope', scopes }] },
    );
  }
}

/**
 * Options of {@link createConnectionFetch}.
 *
 * @see [docs/api.md §5](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#5-connections) "Credentials"; MCP authorization, "Access token usage"
 */
export interface ConnectionFetchOptions {
  /** The transport to the MCP server; default `globalThis.fetch`. */
  fetch?: (url: string, init: RequestInit) => Promise<Response>;
}

export type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/**
 * A `fetch` that calls an MCP server with a connection's access token, for the official
 * SDK's `StreamableHTTPClientTransport` (`{ fetch }` option) or any HTTP client:
 *
 * - the token comes from `source` (the broker in process, or Keyway's HTTP API);
 * - a `401` challenge is answered once more after a forced refresh;
 * - a `403` with `error="insufficient_scope"` throws {@link InsufficientScopeError} with
 *   the challenged scopes, so the app can re-authorize with them.
 *
 * Challenges are parsed by oauth4webapi (`protectedResourceRequest`).
 *
 * @example
 * const transport = new StreamableHTTPClientTransport(new URL(resourceUrl), {
 *   fetch: connectionFetch({ broker, principal, connectionId: 'acme/users/alice/linear' }),
 * });
 *
 * @see [RFC 6750 §2.1](https://www.rfc-editor.org/rfc/rfc6750.html#section-2.1) and §3.1 (insufficient_scope); MCP authorization, "Step-up"
 */
export function createConnectionFetch(
  source: CredentialSource,
  options: ConnectionFetchOptions = {},
): FetchLike {
  const transport =
    options.fetch ?? ((url: string, init: RequestInit) => globalThis.fetch(url, init));
  return async (input, init = {}) => {
    const request = input instanceof Request ? input : null;
    const url = new URL(request?.url ?? String(input));
    const method = init.method ?? request?.method ?? 'GET';
    const headers = new Headers(init.headers ?? request?.headers);
    const body = (init.body ?? (request?.body ? await request.text() : null)) as string | null;
    const send = async (forceRefresh: boolean) => {
      const { access_token, dpop } = await source({ forceRefresh });
      // A DPoP-bound token (the probe's) goes with a proof of its key (RFC 9449 §7).
      const proof = await dpopOptions(dpop);
      return withNonceRetry(() =>
        oauth.protectedResourceRequest(access_token, method, url, new Headers(headers), body, {
          // The app chose this server; plain http is its call (local development).
          [oauth.allowInsecureRequests]: true,
          [oauth.customFetch]: oauthFetch((target, options) =>
            transport(target, { ...options, ...(init.signal ? { signal: init.signal } : {}) }),
          ),
          ...proof,
        }),
      );
    };
    for (const forceRefresh of [false, true]) {
      try {
        return await send(forceRefresh);
      } catch (error) {
        if (!(error instanceof oauth.WWWAuthenticateChallengeError)) throw error;
        const bearer = error.cause.find(
          (challenge) => challenge.scheme === 'bearer' || challenge.scheme === 'dpop',
        );
        if (error.status === 403 && bearer?.parameters.error === 'insufficient_scope') {
          const scopes = (bearer.parameters.scope ?? '').split(' ').filter(Boolean);
          throw new InsufficientScopeError(scopes, error.response);
        }
        // A 401: the token was refused; refresh it once, then let the caller see the answer.
        if (error.status !== 401 || forceRefresh) return error.response;
      }
    }
    throw new Error('unreachable');
  };
}

/**
 * Where tokens come from when Keyway runs elsewhere: its credentials endpoint over HTTP,
 * with a broker token scoped to the connection (`GET {keywayUrl}/api/oauth/credentials/<path>`).
 * Errors of the API (`reauthorization_required`, `connection_not_active`, …) are thrown as
 * {@link KeywayError}s with their code.
 */
export function remoteCredentials(options: {
  keywayUrl: string;
  token: string;
  connectionId: string;
  keywayFetch?: ((url: string, init: RequestInit) => Promise<Response>) | undefined;
}): CredentialSource {
  const base = options.keywayUrl.replace(/\/+$/, '');
  const path = options.connectionId.split('/').map(encodeURIComponent).join('/');
  const keyway =
    options.keywayFetch ?? ((url: string, init: RequestInit) => globalThis.fetch(url, init));
  return async ({ forceRefresh }) => {
    const response = await keyway(
      `${base}/api/oauth/credentials/${path}${forceRefresh ? '?force_refresh=true' : ''}`,
      { headers: { authorization: `Bearer ${options.token}` } },
    );
    const parsed = RemoteAnswer.safeParse(await response.json().catch(() => null));
    const body = parsed.success ? parsed.data : {};
    if (response.status !== 200 || body.access_token === undefined) {
      // A code this version does not know is the remote's trouble, not the caller's.
      const code: KeywayErrorCode =
        body.error !== undefined && Object.hasOwn(ERROR_STATUS, body.error)
          ? (body.error as KeywayErrorCode)
          : 'upstream_error';
      throw new KeywayError(
        code,
        body.error_description ?? `Keyway answered HTTP ${response.status}`,
      );
    }
    return { access_token: body.access_token };
  };
}
