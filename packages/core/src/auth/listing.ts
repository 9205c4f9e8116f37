import type { Principal } from './principal.js';
import { parseResourcePath } from './resource-path.js';
import { intersectScopes, ROOT_SCOPE } from './scope.js';

/* What a principal may list (docs/api.md §1.4: "a list returns only what the caller's scopes cover"). */

/**
 * The subtrees a principal may list, narrowed to an optional prefix: `undefined` means
 * everything (the root key without a prefix), `[]` nothing.
 */
export function listableSubtrees(
  principal: Principal,
  prefix: string | undefined,
): string[] | undefined {
  const wanted = prefix === undefined ? [ROOT_SCOPE] : [`${prefix}/**`];
  const held = principal.kind === 'root' ? [ROOT_SCOPE] : [...principal.scopes];
  const both = intersectScopes(held, wanted);
  if (both.includes(ROOT_SCOPE)) return undefined;
  return both.map((scope) => scope.slice(0, -'/**'.length));
}

/**
 * Where a list may look, as a storage query's `within`: the principal's subtrees narrowed to
 * the query's `prefix` (a resource path, checked). {@link pathsQuery} sets it into the query.
 *
 * @throws {KeywayError} `invalid_path` for a prefix that is not a resource path.
 */
export function listScope(principal: Principal, prefix: string | undefined): { within?: string[] } {
  const within = listableSubtrees(
    principal,
    prefix === undefined ? undefined : parseResourcePath(prefix, 'prefix'),
  );
  return within === undefined ? {} : { within };
}

/**
 * The storage query of a list of resource paths: its window and its scope, set field by
 * field. Built by spreads (`{ ...scope, ...window }`), the query took a hidden class of its
 * own on every request on Node 20 (see `withHeaders`, docs/benchmarks.md #51); so do the
 * lists whose queries have other fields.
 */
export function pathsQuery(
  scope: { within?: string[] },
  window: { limit: number; after?: string },
): { limit: number; after?: string; within?: string[] } {
  const query: { limit: number; after?: string; within?: string[] } = { limit: window.limit };
  if (window.after !== undefined) query.after = window.after;
  if (scope.within !== undefined) query.within = scope.within;
  return query;
}
