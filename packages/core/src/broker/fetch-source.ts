import type { Principal } from '../auth/principal.js';
import { TRUSTED_HAND_OUT } from '../connections/service.js';
import {
  type ConnectionFetchOptions,
  type CredentialSource,
  createConnectionFetch,
  type FetchLike,
  remoteCredentials,
} from '../upstream/connection-fetch.js';
import type { Broker } from './broker.js';

/**
 * Where a connection `fetch` takes its tokens:
 *
 * - a broker in this process (`{ broker, principal, connectionId }`): trusted code, so it
 *   works for inject-only connections too (`hand_out: false`, docs/api.md §13); each token
 *   it takes is recorded as `credentials.issued`, like a hand-out;
 * - a Keyway deployment over HTTP (`{ keywayUrl, token, connectionId }`), with a broker
 *   token scoped to the connection;
 * - any function that answers a token ({@link CredentialSource}).
 *
 * @see [docs/api.md §5](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#5-connections) "Credentials"
 */
export type ConnectionSource =
  | { broker: Broker; principal: Principal; connectionId: string }
  | {
      keywayUrl: string;
      token: string;
      connectionId: string;
      /** Transport to Keyway; default `globalThis.fetch`. */
      keywayFetch?: (url: string, init: RequestInit) => Promise<Response>;
    }
  | CredentialSource;

/**
 * A `fetch` that calls an MCP server with a connection's access token, for the official
 * SDK's `StreamableHTTPClientTransport` (`{ fetch }` option) or any HTTP client: the token
 * comes from `source`; a `401` challenge is answered once more after a forced refresh; a
 * `403` with `error="insufficient_scope"` throws {@link InsufficientScopeError} with the
 * challenged scopes, so the app can re-authorize with them.
 *
 * @example
 * const transport = new StreamableHTTPClientTransport(new URL(resourceUrl), {
 *   fetch: connectionFetch({
 *     source: { broker, principal: rootPrincipal(), connectionId: 'acme/alice/linear' },
 *   }),
 * });
 *
 * @see [RFC 6750 §2.1](https://www.rfc-editor.org/rfc/rfc6750.html#section-2.1) and §3.1 (insufficient_scope); MCP authorization, "Step-up"
 */
export function connectionFetch(options: {
  source: ConnectionSource;
  /** The transport to the MCP server; default `globalThis.fetch`. */
  fetch?: ConnectionFetchOptions['fetch'];
}): FetchLike {
  const { source } = options;
  const credentials: CredentialSource =
    typeof source === 'function'
      ? source
      : 'broker' in source
        ? ({ forceRefresh }) =>
            source.broker.connections[TRUSTED_HAND_OUT](
              source.principal,
              source.connectionId,
              forceRefresh,
            )
        : remoteCredentials(source);
  return createConnectionFetch(
    credentials,
    options.fetch === undefined ? {} : { fetch: options.fetch },
  );
}
