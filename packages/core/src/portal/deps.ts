import type { Principal } from '../auth/principal.js';
import type { AuthorizeResult } from '../connections/authorization.js';
import type { EventLog } from '../events/log.js';
import type { Storage } from '../storage/contract.js';
import type { Observer } from '../telemetry/observation.js';
import type { Gateway } from '../upstream/gateway.js';
import type { PortalSettings } from './portal-options.js';

/**
 * What the portal needs, handed by `createBroker`: the gateway every upstream request goes
 * through, the storage its connections are listed from, a way to start an authorization,
 * its settings, and what it records.
 */
export interface PortalDeps {
  gateway: Gateway;
  storage: Storage;
  /** Starts an authorization (the connection service's `authorize`). */
  authorize: (
    principal: Principal,
    providerId: string,
    input: { connection_id: string; scopes?: string[] },
  ) => Promise<AuthorizeResult>;
  settings: PortalSettings;
  events: EventLog;
  observe: Observer;
  now: () => number;
  randomBytes: (length: number) => Uint8Array;
  /** Told of an error no caller may see (a storage failure): the caller gets a generic one. */
  onError: (error: unknown) => void;
}
