import { describe, expect, it } from 'vitest';
import { fillNamespace, namespaceTemplateProblem } from '../../src/sign-in/namespace.js';
import { redirectMatches, redirectUriProblem, returnHost } from '../../src/sign-in/redirects.js';

/*
 * What a client's redirect URI may be, and when a requested one is the client's
 * (docs/api.md §17; RFC 8252 §7; RFC 9700 §4.1), and where a user of the upstream
 * provider lands in the namespace.
 */

describe('a client’s redirect URIs', () => {
  it.each([
    ['https://app.example.com/callback', null],
    ['http://127.0.0.1/callback', null],
    ['http://127.0.0.1:33418/callback', null],
    ['http://[::1]:8080/cb', null],
    ['http://localhost:6274/oauth/callback', null],
    ['com.example.app:/oauth2redirect', null],
    ['cursor://anysphere.cursor-retrieval/oauth/callback', null],
    ['javascript:alert(document.cookie)//', 'must not use the javascript: scheme'],
    ['JavaScript:alert(1)', 'must not use the javascript: scheme'],
    ['data:text/html,<script>alert(1)</script>', 'must not use the data: scheme'],
    ['file:///etc/passwd', 'must not use the file: scheme'],
    [
      'http://app.example.com/callback',
      'must use https (plain http only on the loopback interface: 127.0.0.1, [::1], localhost)',
    ],
    [
      'http://127.0.0.1.evil.example/callback',
      'must use https (plain http only on the loopback interface: 127.0.0.1, [::1], localhost)',
    ],
    ['https://app.example.com/callback#frag', 'must not have a fragment'],
    ['https://user:pw@app.example.com/callback', 'must not contain user info'],
    ['/callback', 'is not an absolute URL'],
  ])('%s: %s', (uri, problem) => {
    expect(redirectUriProblem(uri)).toBe(problem);
  });

  it('matches a registered URI exactly, never a prefix, another path, port or query', () => {
    const registered = ['https://app.example.com/callback'];
    expect(redirectMatches(registered, 'https://app.example.com/callback')).toBe(true);
    for (const trick of [
      'https://app.example.com/callback/../evil',
      'https://app.example.com/callbackx',
      'https://app.example.com/callback/',
      'https://app.example.com/callback?x=1',
      'https://app.example.com:8443/callback',
      'https://APP.example.com/callback',
      'https://app.example.com.evil.example/callback',
      'https://app.example.com/callback#x',
      'https://app.example.com/Callback',
    ]) {
      expect(redirectMatches(registered, trick), trick).toBe(false);
    }
  });

  it('matches a loopback URI on any port, and nothing else about it (RFC 8252 §7.3)', () => {
    const registered = ['http://127.0.0.1/callback', 'http://localhost:3000/cb'];
    expect(redirectMatches(registered, 'http://127.0.0.1:49152/callback')).toBe(true);
    expect(redirectMatches(registered, 'http://127.0.0.1/callback')).toBe(true);
    expect(redirectMatches(registered, 'http://localhost:61000/cb')).toBe(true);
    for (const trick of [
      'http://127.0.0.1:49152/callback/x',
      'http://127.0.0.1:49152/other',
      'http://localhost:49152/callback',
      'http://127.0.0.1:49152/callback#x',
      'http://127.0.0.1:49152/callback?code=x',
      'http://127.0.0.2:49152/callback',
      'https://127.0.0.1:49152/callback',
    ]) {
      expect(redirectMatches(registered, trick), trick).toBe(false);
    }
    // Only loopback URIs float: an https one keeps its port.
    expect(redirectMatches(['https://app.example.com/cb'], 'https://app.example.com:444/cb')).toBe(
      false,
    );
  });

  it('names where a URI returns to: its host, or an app’s scheme', () => {
    expect(returnHost('https://app.example.com/callback')).toBe('app.example.com');
    expect(returnHost('http://127.0.0.1:33418/callback')).toBe('127.0.0.1:33418');
    expect(returnHost('com.example.app:/oauth2redirect')).toBe('com.example.app:');
  });
});

describe('the namespace of a user of the upstream provider', () => {
  it('checks a template: a claim per segment, known claims, a valid path', () => {
    expect(namespaceTemplateProblem('acme/users/{sub}')).toBeNull();
    expect(namespaceTemplateProblem('acme/{preferred_username}/{sub}')).toBeNull();
    expect(namespaceTemplateProblem('acme/users')).toBe(
      'names no claim: every user would get the same namespace (use {sub})',
    );
    expect(namespaceTemplateProblem('acme/{name}')).toBe(
      'names {name}; the claims are {sub}, {email}, {preferred_username}',
    );
    expect(namespaceTemplateProblem('acme/user-{sub}')).toBe(
      'puts a claim beside other text in a segment: each claim is a segment of its own',
    );
    expect(namespaceTemplateProblem('acme//{sub}')).toBe(
      'is not a path template: segment 2 of "acme//x" is empty',
    );
  });

  it('fills one segment per claim, and refuses what would reach another path', () => {
    expect(fillNamespace('acme/users/{sub}', { sub: 'alice' })).toEqual({
      namespace: 'acme/users/alice',
    });
    expect(fillNamespace('acme/users/{sub}', { sub: '../bob' })).toEqual({
      problem: 'the "sub" claim is not one valid path segment',
    });
    expect(fillNamespace('acme/users/{sub}', { sub: 'a/b' })).toEqual({
      problem: 'the "sub" claim is not one valid path segment',
    });
    expect(fillNamespace('acme/users/{sub}', { sub: '**' })).toEqual({
      problem: 'the "sub" claim is not one valid path segment',
    });
    expect(fillNamespace('acme/users/{sub}', {})).toEqual({
      problem: 'the identity provider sent no "sub" claim',
    });
    expect(fillNamespace('acme/users/{email}', { email: 'a@example.com' })).toEqual({
      problem: 'the identity provider has not verified the email address',
    });
    expect(
      fillNamespace('acme/users/{email}', { email: 'a@example.com', email_verified: true }),
    ).toEqual({ namespace: 'acme/users/a@example.com' });
  });
});
