import type { OutboundFetch } from '../outbound/fetch.js';
import type { AssertionSource } from '../providers/assertion-sources.js';
import type { ProviderRegistry } from '../providers/registry.js';
import type { Storage } from '../storage/contract.js';
import type { Vault } from '../vault/vault.js';

/**
 * What a grant needs to talk to token endpoints, handed to it by `createBroker`: the guarded
 * fetch every token request goes through, the clock, the providers (their clients and
 * secrets), the storage and vault (an identity provider's secret), and the operator's
 * assertion sources. Nothing about connection records: a grant obtains and renews token
 * sets; the connections decide where they are kept.
 */
export interface GrantDeps {
  outbound: OutboundFetch;
  now: () => number;
  providers: ProviderRegistry;
  storage: Storage;
  vault: () => Vault;
  assertionSources: Readonly<Record<string, AssertionSource>>;
}
