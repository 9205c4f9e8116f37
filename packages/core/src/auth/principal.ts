import { KeywayError } from '../contract/errors.js';
import { isDescendantName } from './delegation.js';
import { type Scope, setCoversPath } from './scope.js';

/**
 * Who is making a request, as established by `broker.authenticate()`. Every core operation
 * takes one and checks it itself, so an app that embeds core without the HTTP package gets
 * the same protection.
 *
 * @see [docs/api.md §1.1](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#11-authentication), §3.1
 */
export type Principal = RootPrincipal | TokenPrincipal;

/**
 * The holder of the root key: may do everything.
 *
 * @see [docs/api.md §1.1](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#11-authentication)
 */
export interface RootPrincipal {
  readonly kind: 'root';
}

/**
 * The holder of a live broker token, as its record stood when the request was authenticated.
 *
 * @see [docs/api.md §3](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#3-broker-tokens)
 */
export interface TokenPrincipal {
  readonly kind: 'token';
  readonly name: string;
  readonly scopes: readonly Scope[];
  /** Expiry, epoch milliseconds. */
  readonly expiresAt: number;
  /**
   * The key of the token's stored record (the hash of its random identifier; not a
   * credential): what an authorization started by this token is tied to, so that revoking
   * the token ends it. Absent on principals built by hand.
   */
  readonly idHash?: string;
  /**
   * The one endpoint the token is accepted at, for a token issued to an MCP client that
   * signed in (docs/api.md §17); absent for a token every route takes.
   */
  readonly audience?: string;
  /**
   * Globs over the portal's tool names the token may list and call (docs/api.md §18);
   * absent: no restriction beyond each connection's policy.
   */
  readonly tools?: readonly string[];
}

const ROOT: RootPrincipal = Object.freeze({ kind: 'root' });

/**
 * The root principal, for trusted server code that embeds core and acts with full rights
 * (the equivalent of presenting the root key).
 *
 * @see [docs/api.md §1.1](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#11-authentication)
 */
export function rootPrincipal(): RootPrincipal {
  return ROOT;
}

/** How a principal is named in records and events: `root` or `token:<name>`. */
export function actorOf(principal: Principal): string {
  return principal.kind === 'root' ? 'root' : `token:${principal.name}`;
}

/**
 * Refuses unless the principal's scopes cover a resource path.
 *
 * @throws {KeywayError} `insufficient_scope`.
 */
export function assertCoversPath(principal: Principal, path: string): void {
  if (principal.kind === 'root' || setCoversPath(principal.scopes, path)) return;
  throw new KeywayError(
    'insufficient_scope',
    `the credential's scopes do not cover ${JSON.stringify(path)}`,
  );
}

/**
 * Refuses unless the principal may read or change the token called `name`: the root key,
 * the token itself, or one of its ancestors by name (docs/api.md §3.3).
 *
 * @throws {KeywayError} `delegation_denied`.
 */
export function assertManagesToken(principal: Principal, name: string): void {
  if (principal.kind === 'root') return;
  if (principal.name === name || isDescendantName(principal.name, name)) return;
  throw new KeywayError(
    'delegation_denied',
    `token ${JSON.stringify(name)} is neither this token nor one of its descendants`,
  );
}
