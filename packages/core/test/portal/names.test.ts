import { describe, expect, it } from 'vitest';
import { globCovers, globMatches, globsWithin } from '../../src/auth/tool-globs.js';
import { aliasesOf, portalName, portalUri } from '../../src/portal/names.js';
import { callerAllows, connectionAllows } from '../../src/portal/policy.js';

/* The portal's names and its tool policy (docs/api.md §18), one rule at a time. */

describe('portal names: <alias>__<name>, at most 64 characters of [A-Za-z0-9_-], stable', () => {
  it('keeps a name that is valid as it is', () => {
    expect(portalName('linear', 'search_issues')).toBe('linear__search_issues');
    expect(portalName('gh', 'get-repo')).toBe('gh__get-repo');
  });

  it('replaces characters outside the alphabet and ends the name with a digest of the original', () => {
    const dotted = portalName('notion', 'pages.search');
    expect(dotted).toMatch(/^notion__pages_search-[0-9a-f]{8}$/);
    // The name a server could also have: never the same portal name.
    expect(portalName('notion', 'pages_search')).toBe('notion__pages_search');
    expect(dotted).not.toBe(portalName('notion', 'pages_search'));
    expect(portalName('notion', 'pages.search')).toBe(dotted);
  });

  it('cuts a long name to 64 characters, two long names that share a beginning kept apart', () => {
    const long = 'x'.repeat(70);
    const a = portalName('sentry', `${long}_a`);
    const b = portalName('sentry', `${long}_b`);
    expect(a).toHaveLength(64);
    expect(b).toHaveLength(64);
    expect(a.slice(0, 55)).toBe(b.slice(0, 55));
    expect(a).not.toBe(b);
    expect(a).toMatch(/^sentry__x{47}-[0-9a-f]{8}$/);
    // Exactly 64 valid characters need no change.
    const fits = `sentry__${'y'.repeat(56)}`;
    expect(portalName('sentry', 'y'.repeat(56))).toBe(fits);
  });

  it('names a connection by its alias, its last segment, or — when two would meet — its path below the prefix', () => {
    const aliases = aliasesOf(
      [
        ['acme/users/alice/office/linear', undefined],
        ['acme/users/alice/home/linear', undefined],
        ['acme/users/alice/notion', undefined],
        ['acme/users/alice/github', 'gh'],
        ['acme/users/alice/tools/keyway', undefined],
        ['acme/users/alice/caf\u00e9', undefined],
      ],
      'acme/users/alice',
    );
    expect(aliases.get('acme/users/alice/office/linear')).toBe('office_linear');
    expect(aliases.get('acme/users/alice/home/linear')).toBe('home_linear');
    expect(aliases.get('acme/users/alice/notion')).toBe('notion');
    expect(aliases.get('acme/users/alice/github')).toBe('gh');
    // `keyway` is the built-in tools' own alias.
    expect(aliases.get('acme/users/alice/tools/keyway')).toMatch(/^keyway_[0-9a-f]{8}$/);
    expect(aliases.get('acme/users/alice/caf\u00e9')).toMatch(/^caf_-[0-9a-f]{8}$/);
    // The same connections give the same aliases in any order.
    const reversed = aliasesOf(
      [
        ['acme/users/alice/home/linear', undefined],
        ['acme/users/alice/office/linear', undefined],
      ],
      'acme/users/alice',
    );
    expect(reversed.get('acme/users/alice/office/linear')).toBe('office_linear');
  });

  it('keeps a resource URI unless two connections list it', () => {
    expect(portalUri('linear', 'file:///a.txt', false)).toBe('file:///a.txt');
    expect(portalUri('linear', 'file:///a.txt', true)).toBe(
      'keyway-portal://linear/file%3A%2F%2F%2Fa.txt',
    );
  });
});

describe('tool globs: `*` for any run of characters, everything else itself', () => {
  it('matches names', () => {
    expect(globMatches('linear__*', 'linear__search')).toBe(true);
    expect(globMatches('linear__*', 'linear__')).toBe(true);
    expect(globMatches('linear__*', 'notion__search')).toBe(false);
    expect(globMatches('*__search', 'notion__search')).toBe(true);
    expect(globMatches('pages.search', 'pagesXsearch')).toBe(false);
    expect(globMatches('a+b', 'aab')).toBe(false);
    expect(globMatches('a+b', 'a+b')).toBe(true);
    expect(globMatches('get_(x)', 'get_(x)')).toBe(true);
  });

  it('says a glob is within another only when every name it matches is', () => {
    expect(globCovers('linear__*', 'linear__search_*')).toBe(true);
    expect(globCovers('linear__*', 'linear__search')).toBe(true);
    expect(globCovers('*', 'anything*')).toBe(true);
    expect(globCovers('linear__search_*', 'linear__*')).toBe(false);
    expect(globCovers('linear__search', 'linear__*')).toBe(false);
    expect(globCovers('linear__*_x', 'linear__*')).toBe(false);
    expect(globsWithin(['linear__a', 'sentry__*'], ['linear__*', 'sentry__*'])).toBe(true);
    expect(globsWithin(['github__*'], ['linear__*', 'sentry__*'])).toBe(false);
    expect(globsWithin(['github__*'], undefined)).toBe(true);
    expect(globsWithin([], ['linear__*'])).toBe(true);
  });
});

describe('the tool policy of a connection and of a token', () => {
  const tool = (name: string, readOnly?: boolean) => ({
    name,
    inputSchema: { type: 'object' as const },
    ...(readOnly === undefined ? {} : { annotations: { readOnlyHint: readOnly } }),
  });

  it('allows, denies, and keeps only read-only tools', () => {
    expect(connectionAllows(undefined, tool('create'))).toBe(true);
    expect(connectionAllows({ allow: ['search*'] }, tool('search_issues'))).toBe(true);
    expect(connectionAllows({ allow: ['search*'] }, tool('create_issue'))).toBe(false);
    expect(connectionAllows({ deny: ['create_*'] }, tool('create_issue'))).toBe(false);
    expect(connectionAllows({ allow: ['*'], deny: ['admin'] }, tool('admin'))).toBe(false);
    expect(connectionAllows({ read_only: true }, tool('search', true))).toBe(true);
    expect(connectionAllows({ read_only: true }, tool('create', false))).toBe(false);
    // No annotation is no promise.
    expect(connectionAllows({ read_only: true }, tool('unknown'))).toBe(false);
  });

  it('lets a token call only what its globs name; the root and a token without globs any', () => {
    const token = (tools?: string[]) => ({
      kind: 'token' as const,
      name: 'agent',
      scopes: ['acme/**'],
      expiresAt: 0,
      ...(tools === undefined ? {} : { tools }),
    });
    expect(callerAllows({ kind: 'root' }, 'linear__admin')).toBe(true);
    expect(callerAllows(token(), 'linear__admin')).toBe(true);
    expect(callerAllows(token(['linear__search_*']), 'linear__search_issues')).toBe(true);
    expect(callerAllows(token(['linear__search_*']), 'linear__admin')).toBe(false);
    expect(callerAllows(token([]), 'keyway__connections')).toBe(false);
  });
});
