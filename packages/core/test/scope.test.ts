import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  canonicalizeScopes,
  coversPath,
  coversScope,
  intersectScopes,
  isNarrowerOrEqual,
  parseScope,
  reduceScopes,
} from '../src/auth/scope.js';

describe('parseScope()', () => {
  it('canonicalizes a path p to p/**', () => {
    expect(parseScope('a/b')).toBe('a/b/**');
    expect(parseScope('a/b/**')).toBe('a/b/**');
    expect(parseScope('**')).toBe('**');
  });

  it('normalizes to NFC', () => {
    expect(parseScope('cafe\u0301')).toBe('caf\u00e9/**');
  });

  it('refuses malformed scopes with invalid_scope, naming the index', () => {
    for (const bad of ['', 'a//b', 'a/*', 'a/**/b', '*', '***', 'a/../b', '/**', 'a%2Fb', 42]) {
      expect(() => parseScope(bad, 3)).toThrow(
        expect.objectContaining({
          code: 'invalid_scope',
          details: [expect.objectContaining({ path: 'scopes.3' })],
        }),
      );
    }
  });
});

describe('coversPath()', () => {
  it('covers the exact path and every descendant', () => {
    expect(coversPath('a/b/**', 'a/b')).toBe(true);
    expect(coversPath('a/b/**', 'a/b/c')).toBe(true);
    expect(coversPath('a/b/**', 'a/b/c/d')).toBe(true);
  });

  it('does not let a/b cover the sibling a/b-x or the parent a', () => {
    expect(coversPath('a/b/**', 'a/b-x')).toBe(false);
    expect(coversPath('a/b/**', 'a/bc')).toBe(false);
    expect(coversPath('a/b/**', 'a')).toBe(false);
    expect(coversPath('a/b/**', 'b')).toBe(false);
  });

  it('lets ** cover everything', () => {
    expect(coversPath('**', 'anything/at/all')).toBe(true);
  });
});

describe('canonicalizeScopes()', () => {
  it('removes duplicates and covered scopes and sorts by code point', () => {
    expect(canonicalizeScopes(['b', 'a/x', 'a', 'a/**', 'b/**'])).toEqual(['a/**', 'b/**']);
    expect(canonicalizeScopes(['z', '**', 'a'])).toEqual(['**']);
    expect(canonicalizeScopes(['\u{1F600}', '\uFF5E'])).toEqual(['\uFF5E/**', '\u{1F600}/**']);
  });

  it('accepts 32 scopes and refuses 33, an empty list and a non-array', () => {
    const many = Array.from({ length: 33 }, (_, i) => `s${i}`);
    expect(canonicalizeScopes(many.slice(0, 32))).toHaveLength(32);
    expect(() => canonicalizeScopes(many)).toThrow(
      expect.objectContaining({ code: 'invalid_scope' }),
    );
    expect(() => canonicalizeScopes([])).toThrow(
      expect.objectContaining({ code: 'invalid_scope' }),
    );
    expect(() => canonicalizeScopes('a')).toThrow(
      expect.objectContaining({ code: 'invalid_scope' }),
    );
  });

  it('counts the submitted list, before duplicates are removed', () => {
    expect(() => canonicalizeScopes(Array.from({ length: 33 }, () => 'a'))).toThrow(
      expect.objectContaining({ code: 'invalid_scope' }),
    );
  });
});

describe('isNarrowerOrEqual()', () => {
  it('compares scope sets by coverage', () => {
    expect(isNarrowerOrEqual(['a/b/**'], ['a/**'])).toBe(true);
    expect(isNarrowerOrEqual(['a/**'], ['a/**'])).toBe(true);
    expect(isNarrowerOrEqual(['a/**', 'b/c/**'], ['**'])).toBe(true);
    expect(isNarrowerOrEqual(['**'], ['a/**'])).toBe(false);
    expect(isNarrowerOrEqual(['a/b-x/**'], ['a/b/**'])).toBe(false);
    expect(isNarrowerOrEqual(['a/**', 'c/**'], ['a/**', 'b/**'])).toBe(false);
  });
});

describe('intersectScopes()', () => {
  it('keeps the narrower of each overlapping pair', () => {
    expect(intersectScopes(['a/**', 'b/x/**'], ['a/y/**', 'b/**'])).toEqual(['a/y/**', 'b/x/**']);
    expect(intersectScopes(['**'], ['a/**'])).toEqual(['a/**']);
    expect(intersectScopes(['a/b/**'], ['a/b-x/**'])).toEqual([]);
  });
});

// Canonical scopes from a small alphabet, so that random pairs often overlap.
const segment = fc.constantFrom('a', 'b', 'c', 'a-x', 'é', '😀');
const path = fc.array(segment, { minLength: 1, maxLength: 4 }).map((s) => s.join('/'));
const scope = fc.oneof(
  path.map((p) => `${p}/**`),
  fc.constant('**'),
);
const scopeSet = fc.array(scope, { minLength: 1, maxLength: 6 }).map(reduceScopes);

describe('scope algebra (properties)', () => {
  it('canonicalization is idempotent', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(path, scope), { minLength: 1, maxLength: 32 }), (input) => {
        const once = canonicalizeScopes(input);
        expect(canonicalizeScopes(once)).toEqual(once);
      }),
    );
  });

  it('covers is reflexive', () => {
    fc.assert(fc.property(scope, (s) => coversScope(s, s)));
    fc.assert(fc.property(path, (p) => coversPath(`${p}/**`, p)));
  });

  it('covers is transitive', () => {
    fc.assert(
      fc.property(scope, scope, scope, path, (x, y, z, p) => {
        if (coversScope(x, y) && coversScope(y, z)) expect(coversScope(x, z)).toBe(true);
        if (coversScope(x, y) && coversPath(y, p)) expect(coversPath(x, p)).toBe(true);
      }),
    );
  });

  it('intersection is narrower-or-equal than both sides', () => {
    fc.assert(
      fc.property(scopeSet, scopeSet, (a, b) => {
        const both = intersectScopes(a, b);
        expect(isNarrowerOrEqual(both, a)).toBe(true);
        expect(isNarrowerOrEqual(both, b)).toBe(true);
      }),
    );
  });

  it('intersection covers exactly the paths both sides cover', () => {
    fc.assert(
      fc.property(scopeSet, scopeSet, path, (a, b, p) => {
        const inBoth = a.some((s) => coversPath(s, p)) && b.some((s) => coversPath(s, p));
        expect(intersectScopes(a, b).some((s) => coversPath(s, p))).toBe(inBoth);
      }),
    );
  });

  it('no scope p covers the sibling p-x', () => {
    fc.assert(fc.property(path, (p) => !coversPath(`${p}/**`, `${p}-x`)));
  });
});
