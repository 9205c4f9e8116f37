import type { EventLog } from '../events/log.js';
import type { GrantDeps } from '../grants/deps.js';
import type { ClientProfile } from '../providers/registration.js';
import type { Observer } from '../telemetry/observation.js';

/**
 * What the connections need, handed to each of their parts by `createBroker`: a grant's
 * dependencies (the guarded fetch, the clock, the providers, storage and vault, assertion
 * sources), and the rest of a connection's life — randomness for states and flow ids, the
 * event log, the deployment's callbacks and redirect policy, the refresh's margin and lease,
 * and where refresh outcomes are reported.
 */
export interface ConnectionDeps extends GrantDeps {
  randomBytes: (length: number) => Uint8Array;
  /** The deployment as authorization servers see it (its callbacks); `null` without `baseUrl`. */
  profile: ClientProfile | null;
  /** Origins `redirect_to` may point to. */
  allowedRedirects: readonly string[];
  /** Hosts that may be reached over plain http and on private addresses (development). */
  allowedHosts: readonly string[];
  /** Makes the audit events of each change. */
  events: EventLog;
  /** Refresh when the access token expires within this many ms (at most half its lifetime). */
  refreshMarginMs: number;
  /**
   * How long one instance holds a connection's refresh lease before another may take it;
   * renewed every third of it while the refresh runs.
   */
  refreshLeaseMs: number;
  /** Refresh connections no refresh has touched for this long (`false`: never on its own). */
  refreshIdleAfterMs: number | false;
  /**
   * Refresh ahead (docs/connections.md): `rotating` connections whose refresh tokens rotate,
   * `all` every refreshable one, before their access token expires; `false`: at first use.
   */
  refreshAhead: false | 'rotating' | 'all';
  /** Send `connection.expiring` this long before a refresh token's known end. */
  expiringNoticeMs: number;
  /** Told of every refresh's outcome (docs/api.md §16 metrics). */
  observe: Observer;
}
