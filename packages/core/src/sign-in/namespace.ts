import { resourcePathProblem } from '../auth/resource-path.js';

/*
 * Where a user who signed in through the upstream OpenID provider lands in Keyway's
 * namespace (docs/api.md §17): a path template such as `acme/users/{sub}`, filled from the
 * ID token's claims. A claim must fill exactly one valid path segment, so a subject such as
 * `../bob` or `a/b` can never reach another user's paths.
 */

/** The claims a template may name. */
const PLACEHOLDERS = new Set(['sub', 'email', 'preferred_username']);
const PLACEHOLDER = /\{([^{}]*)\}/g;

/** Why `template` is no namespace template, or `null`. */
export function namespaceTemplateProblem(template: string): string | null {
  const names = [...template.matchAll(PLACEHOLDER)].map((match) => match[1] as string);
  if (names.length === 0) {
    return 'names no claim: every user would get the same namespace (use {sub})';
  }
  const unknown = names.find((name) => !PLACEHOLDERS.has(name));
  if (unknown !== undefined) {
    return `names {${unknown}}; the claims are {sub}, {email}, {preferred_username}`;
  }
  const segments = template.split('/');
  if (segments.some((segment) => segment.includes('{') && !/^\{[a-z_]+\}$/.test(segment))) {
    return 'puts a claim beside other text in a segment: each claim is a segment of its own';
  }
  // The template with each claim as a plain segment must be a valid path.
  const problem = resourcePathProblem(template.replace(PLACEHOLDER, 'x'));
  return problem === null ? null : `is not a path template: ${problem.message}`;
}

/** The claims of an ID token a namespace is filled from. */
export interface NamespaceClaims {
  sub?: unknown;
  email?: unknown;
  email_verified?: unknown;
  preferred_username?: unknown;
}

/**
 * The namespace of a user, or why there is none, in words for the user and the operator:
 * a claim that is missing, unverified (`email` without `email_verified: true`), or not
 * exactly one valid path segment.
 */
export function fillNamespace(
  template: string,
  claims: NamespaceClaims,
): { namespace: string } | { problem: string } {
  let problem: string | null = null;
  const filled = template.replace(PLACEHOLDER, (_, name: string) => {
    if (problem !== null) return '';
    const value = claims[name as keyof NamespaceClaims];
    if (typeof value !== 'string' || value === '') {
      problem = `the identity provider sent no "${name}" claim`;
      return '';
    }
    if (name === 'email' && claims.email_verified !== true) {
      problem = 'the identity provider has not verified the email address';
      return '';
    }
    const segment = value.normalize('NFC');
    if (segment.includes('/') || resourcePathProblem(segment) !== null) {
      problem = `the "${name}" claim is not one valid path segment`;
      return '';
    }
    return segment;
  });
  if (problem !== null) return { problem };
  const invalid = resourcePathProblem(filled);
  return invalid === null
    ? { namespace: filled }
    : { problem: `the namespace is not a valid path: ${invalid.message}` };
}
