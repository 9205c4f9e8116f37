import { type BrokerConfig, resolveBrokerConfig } from './config.js';
import { assertCoversPath, type Principal } from './principal.js';
import { parseResourcePath } from './resource-path.js';
import type { Storage } from './storage.js';
import { TokenService } from './tokens.js';

/** A Keyway broker: every operation of the HTTP contract, callable in process. */
export interface Broker {
  /** Broker tokens (API.md §3). */
  readonly tokens: TokenService;
  /** The storage the broker was built with. */
  readonly storage: Storage;
  /**
   * Establishes the principal behind a bearer credential (the root key or a broker token).
   *
   * @throws {KeywayError} `invalid_token`.
   */
  authenticate(credential: string | null | undefined): Promise<Principal>;
  /**
   * Checks that a principal's scopes cover a resource path, for apps that guard their own
   * resources in the namespace with broker tokens. Returns the canonical path.
   *
   * @throws {KeywayError} `invalid_path`, `insufficient_scope`.
   */
  authorize(principal: Principal, path: string): string;
  /** Closes the storage. */
  close(): Promise<void>;
}

/**
 * Creates a broker. Options are validated up front: a mistake is a `TypeError` naming it.
 *
 * @example
 * import { createBroker, rootPrincipal } from '@keyway/core';
 * import { memoryStorage } from '@keyway/store-memory';
 *
 * const broker = createBroker({ rootKey: process.env.KEYWAY_ROOT_KEY, storage: memoryStorage() });
 * const { access_token } = await broker.tokens.mint(rootPrincipal(), {
 *   name: 'alice',
 *   scopes: ['acme/users/alice'],
 * });
 */
export function createBroker(config: BrokerConfig): Broker {
  const resolved = resolveBrokerConfig(config);
  const tokens = new TokenService(resolved);
  return {
    tokens,
    storage: resolved.storage,
    authenticate: (credential) => tokens.authenticate(credential),
    authorize(principal, path) {
      const canonical = parseResourcePath(path);
      assertCoversPath(principal, canonical);
      return canonical;
    },
    async close() {
      await resolved.storage.close?.();
    },
  };
}
