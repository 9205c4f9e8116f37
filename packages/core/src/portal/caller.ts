import type { Server, ServerContext } from '@modelcontextprotocol/server';
import type { Principal } from '../auth/principal.js';
import type { UpstreamSessions } from './upstreams.js';

/* Who a portal session serves, and what the rest of the portal reads of a session. */

/** The caller of a portal session. */
export interface PortalCaller {
  /** The caller as it authenticated last. */
  principal: Principal;
  readonly prefix: string;
}

/** What the portal's shared parts read of a session. */
export interface PortalSessionLike {
  readonly server: Server;
  readonly caller: PortalCaller;
  readonly upstreams: UpstreamSessions;
  /** The calls in flight, by connection: where a server's sampling request goes. */
  readonly inflight: Map<string, ServerContext[]>;
}
