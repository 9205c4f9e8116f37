/*
 * Globs over tool names (docs/api.md §18) — the portal's `<alias>__<name>` for a token, a
 * server's own names for a connection's policy — where `*` stands for any run of
 * characters and every other character for itself. A broker token may be
 * minted with such globs, and a delegated token's globs must each fall within one of its
 * parent's.
 */

const compiled = new Map<string, RegExp>();

/** The glob as an anchored expression (kept: a token's few globs are matched per call). */
function expressionOf(glob: string): RegExp {
  let expression = compiled.get(glob);
  if (expression === undefined) {
    // Only `*` is special; everything else stands for itself.
    const literal = (part: string) => part.replace(/[.+?^${}()|[\]\\/-]/g, '\\$&');
    expression = new RegExp(`^${glob.split('*').map(literal).join('.*')}$`, 's');
    if (compiled.size >= 1024) compiled.clear();
    compiled.set(glob, expression);
  }
  return expression;
}

/** Whether a name matches a glob. */
export function globMatches(glob: string, name: string): boolean {
  if (!glob.includes('*')) return glob === name;
  return expressionOf(glob).test(name);
}

/** Whether a name matches any glob of a list. */
export function anyGlobMatches(globs: readonly string[], name: string): boolean {
  for (const glob of globs) if (globMatches(glob, name)) return true;
  return false;
}

/**
 * Whether every name `inner` matches is matched by `outer`. Decided by matching `inner`'s
 * text against `outer`: a `*` of `inner` can only be consumed by a `*` of `outer` (a
 * literal never matches `*`), and whatever stands in for it then stays within that `*`'s
 * span. Sound (never says yes wrongly); a pair it cannot prove is refused.
 */
export function globCovers(outer: string, inner: string): boolean {
  return globMatches(outer, inner);
}

/**
 * Whether a list of globs is within another: each glob of `inner` within one of `outer`.
 * Without `outer` (no restriction), anything is within it.
 */
export function globsWithin(
  inner: readonly string[],
  outer: readonly string[] | undefined,
): boolean {
  if (outer === undefined) return true;
  return inner.every((glob) => outer.some((parent) => globCovers(parent, glob)));
}
