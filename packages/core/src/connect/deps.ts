import type { Principal } from '../auth/principal.js';
import type { RateLimiter } from '../auth/rate-limit.js';
import type { AuthorizeOptions, AuthorizeResult } from '../connections/authorization.js';
import type { EventLog } from '../events/log.js';
import type { Storage } from '../storage/contract.js';
import type { Vault } from '../vault/vault.js';

/**
 * What connect sessions need (docs/api.md §19), handed by `createBroker`: the page's
 * address, where sessions are kept, how an authorization starts and a connection ends, who
 * records what, and the limiter that counts a page's wrong secrets with failed
 * authentications.
 */
export interface ConnectDeps {
  /** `KEYWAY_BASE_URL` without its trailing slash: the page is `{base}/connect`. */
  baseUrl: string | null;
  /** Origins a `redirect_uri` may name (`KEYWAY_ALLOWED_REDIRECTS`). */
  allowedRedirects: readonly string[];
  storage: Storage;
  vault: () => Vault;
  events: EventLog;
  limiter: RateLimiter | null;
  /** Starts an authorization (the connection service's). */
  authorize: (
    principal: Principal,
    providerId: string,
    input: { connection_id: string; verify_user?: boolean; redirect_to?: string },
    options: AuthorizeOptions,
  ) => Promise<AuthorizeResult>;
  /** Deletes a connection (the connection service's). */
  disconnect: (principal: Principal, connectionId: string) => Promise<void>;
  now: () => number;
  randomBytes: (length: number) => Uint8Array;
}
