import type { Principal } from '../auth/principal.js';
import {
  type ConnectionFetchOptions,
  createConnectionFetch,
  type FetchLike,
} from '../connections/connection-fetch.js';
import { TRUSTED_HAND_OUT } from '../connections/service.js';
import type { Broker } from './broker.js';

/**
 * A connection `fetch` that takes tokens from a broker in this process: trusted code, so
 * it works for inject-only connections too (`hand_out: false`, docs/api.md §13); each
 * token it takes is recorded as `credentials.issued`, like a hand-out.
 *
 * @example
 * const fetch = connectionFetch({ broker, principal: rootPrincipal(), connectionId: 'acme/alice/linear' });
 *
 * @see [docs/api.md §5](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#5-connections) "Credentials"; [RFC 6750 §2.1](https://www.rfc-editor.org/rfc/rfc6750.html#section-2.1)
 */
export function connectionFetch(options: {
  broker: Broker;
  principal: Principal;
  connectionId: string;
  fetch?: ConnectionFetchOptions['fetch'];
}): FetchLike {
  return createConnectionFetch(
    ({ forceRefresh }) =>
      options.broker.connections[TRUSTED_HAND_OUT](
        options.principal,
        options.connectionId,
        forceRefresh,
      ),
    options.fetch === undefined ? {} : { fetch: options.fetch },
  );
}
