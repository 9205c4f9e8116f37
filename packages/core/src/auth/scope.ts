import { MAX_SCOPES } from '../contract/codes.js';
import { KeywayError } from '../contract/errors.js';
import { compareCodePoints, resourcePathProblem } from './resource-path.js';

/** The scope that covers every resource path. */
export const ROOT_SCOPE = '**';

const SUBTREE = '/**';

/**
 * A canonical scope: `**`, or `p/**` for a valid resource path `p` (docs/api.md §3.1). Produced by
 * {@link parseScope} and {@link canonicalizeScopes}; every other function here expects it.
 */
export type Scope = string;

function invalidScope(message: string, index?: number): KeywayError {
  return new KeywayError('invalid_scope', message, {
    details: [index === undefined ? { message } : { path: `scopes.${index}`, message }],
  });
}

/**
 * Canonicalizes one submitted scope: `**` stays, `p` and `p/**` become `p/**`, where `p` is
 * a valid resource path in NFC.
 *
 * @throws {KeywayError} `invalid_scope`.
 * @example
 * parseScope('a/b');    // 'a/b/**'
 * parseScope('a/b/**'); // 'a/b/**'
 * parseScope('**');     // '**'
 */
export function parseScope(input: unknown, index?: number): Scope {
  if (typeof input !== 'string') throw invalidScope('a scope must be a string', index);
  if (input === ROOT_SCOPE) return ROOT_SCOPE;
  if (input.length > 4096) throw invalidScope('the scope is too long', index);
  const normalized = input.isWellFormed() ? input.normalize('NFC') : input;
  const path = normalized.endsWith(SUBTREE) ? normalized.slice(0, -SUBTREE.length) : normalized;
  const problem = resourcePathProblem(path);
  if (problem !== null) {
    throw invalidScope(`scope ${JSON.stringify(input.slice(0, 64))}: ${problem.message}`, index);
  }
  return `${path}${SUBTREE}`;
}

/** The resource path a canonical scope is rooted at, or `null` for `**`. */
function scopeRoot(scope: Scope): string | null {
  return scope === ROOT_SCOPE ? null : scope.slice(0, -SUBTREE.length);
}

/**
 * Whether a canonical scope covers a resource path: `p/**` covers `p` and every path below
 * it, never a sibling that merely shares a string prefix.
 *
 * @example
 * coversPath('a/b/**', 'a/b/c');  // true
 * coversPath('a/b/**', 'a/b-x');  // false
 */
export function coversPath(scope: Scope, path: string): boolean {
  const root = scopeRoot(scope);
  if (root === null) return true;
  return (
    path.length >= root.length &&
    path.startsWith(root) &&
    (path.length === root.length || path.charCodeAt(root.length) === 0x2f) /* '/' */
  );
}

/** Whether canonical scope `a` covers everything canonical scope `b` covers. */
export function coversScope(a: Scope, b: Scope): boolean {
  const bRoot = scopeRoot(b);
  return bRoot === null ? a === ROOT_SCOPE : coversPath(a, bRoot);
}

/** Whether any scope of a canonical set covers `path`. */
export function setCoversPath(scopes: readonly Scope[], path: string): boolean {
  for (const scope of scopes) if (coversPath(scope, path)) return true;
  return false;
}

/**
 * Reduces canonical scopes to a canonical set: duplicates and scopes covered by another
 * removed, sorted by code point.
 */
export function reduceScopes(scopes: readonly Scope[]): Scope[] {
  const unique = [...new Set(scopes)];
  const kept = unique.filter(
    (scope, i) => !unique.some((other, j) => j !== i && coversScope(other, scope)),
  );
  return kept.sort(compareCodePoints);
}

/**
 * Validates and canonicalizes a submitted scope list (docs/api.md §3.1): 1 to 32 entries, each
 * canonicalized, then reduced to a canonical set.
 *
 * @throws {KeywayError} `invalid_scope`.
 * @example
 * canonicalizeScopes(['b', 'a/x', 'a', 'a/**']); // ['a/**', 'b/**']
 */
export function canonicalizeScopes(input: unknown): Scope[] {
  if (!Array.isArray(input)) throw invalidScope('"scopes" must be an array of strings');
  if (input.length === 0) throw invalidScope('"scopes" must not be empty');
  if (input.length > MAX_SCOPES) {
    throw invalidScope(`"scopes" has ${input.length} entries; at most ${MAX_SCOPES} are allowed`);
  }
  return reduceScopes(input.map((scope, i) => parseScope(scope, i)));
}

/**
 * Whether scope set `a` is equal to or narrower than scope set `b`: every scope of `a` is
 * covered by a scope of `b`.
 *
 * @example
 * isNarrowerOrEqual(['a/b/**'], ['a/**']); // true
 * isNarrowerOrEqual(['**'], ['a/**']);     // false
 */
export function isNarrowerOrEqual(a: readonly Scope[], b: readonly Scope[]): boolean {
  return a.every((scope) => b.some((other) => coversScope(other, scope)));
}

/**
 * The intersection of two canonical scope sets: for every pair, the narrower of the two when
 * one covers the other; reduced to a canonical set. May be empty.
 *
 * @example
 * intersectScopes(['a/**', 'b/x/**'], ['a/y/**', 'b/**']); // ['a/y/**', 'b/x/**']
 */
export function intersectScopes(a: readonly Scope[], b: readonly Scope[]): Scope[] {
  const result: Scope[] = [];
  for (const x of a) {
    for (const y of b) {
      if (coversScope(x, y)) result.push(y);
      else if (coversScope(y, x)) result.push(x);
    }
  }
  return reduceScopes(result);
}
