import type { Principal } from '../auth/principal.js';
import type { RateLimiter } from '../auth/rate-limit.js';
import type { EventLog } from '../events/log.js';
import type { OutboundFetch } from '../outbound/fetch.js';
import type { Storage } from '../storage/contract.js';
import type { TokenCodec } from '../tokens/format.js';
import type { AuthenticationContext } from '../tokens/service.js';
import type { Vault } from '../vault/vault.js';
import type { SignInSettings } from './settings.js';

/**
 * What Keyway needs as the authorization server of its MCP endpoints (docs/api.md §17),
 * handed by `createBroker`: the settings, the deployment's base URL (the issuer), the
 * storage and vault (clients, pending requests, codes, grants), the token codec (access
 * tokens are broker tokens), the guarded fetch (client metadata documents, the upstream
 * OpenID provider), the event log, the limiter, the clock and randomness.
 */
export interface SignInDeps {
  settings: SignInSettings;
  /** The issuer: `KEYWAY_BASE_URL`, without a trailing slash. */
  issuer: string;
  storage: Storage;
  vault: () => Vault;
  codec: TokenCodec;
  outbound: OutboundFetch;
  events: EventLog;
  /** Counts registrations and sign-in attempts per client address; `null` when off. */
  limiter: RateLimiter | null;
  now: () => number;
  randomBytes: (length: number) => Uint8Array;
  /** Checks a pasted broker token, counting failures per client address. */
  authenticate: (credential: string, context: AuthenticationContext) => Promise<Principal>;
}
