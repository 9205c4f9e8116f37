import type { Principal } from '../auth/principal.js';
import type { AuthorizeResult } from '../connections/authorization.js';
import type { ConnectionRecords } from '../connections/records.js';
import type { Refresher } from '../connections/refresh.js';
import type { OutboundFetch } from '../outbound/fetch.js';
import type { StreamingFetch } from '../outbound/stream.js';
import type { ProviderRegistry } from '../providers/registry.js';
import type { Storage } from '../storage/contract.js';
import type { Observer } from '../telemetry/observation.js';
import type { GatewayLimits, StreamSlots } from './limits.js';

/**
 * What sending a request with a connection needs, handed by `createBroker` to the gateway,
 * the proxy and the probe: the connections (records, their single-flight refresher), the
 * providers, the guarded fetches (the streaming one for forwarded requests, the plain one
 * for the probe), the limits and their slots, and a way to start an authorization when the
 * user must consent again.
 */
export interface UpstreamDeps {
  records: ConnectionRecords;
  refresher: Refresher;
  providers: ProviderRegistry;
  storage: Storage;
  now: () => number;
  randomBytes: (length: number) => Uint8Array;
  /** The guarded fetch (the probe's conversation). */
  outbound: OutboundFetch;
  /** The guarded streaming fetch (no redirects, idle limit); `piped` on Node. */
  stream: StreamingFetch;
  limits: GatewayLimits;
  slots: StreamSlots;
  observe: Observer;
  /** Starts an authorization (the connection service's `authorize`). */
  authorize: (
    principal: Principal,
    providerId: string,
    input: { connection_id: string; scopes?: string[] },
  ) => Promise<AuthorizeResult>;
}
