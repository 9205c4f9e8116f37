/*
 * The redirect URIs of the MCP clients that sign in to Keyway (docs/api.md §17): what one
 * may be, and when a requested one matches a client's. An authorization server that
 * redirects where it should not hands its codes to an attacker (RFC 9700 §4.1), so a
 * redirect URI is `https`, loopback `http` (a native app's port changes from run to run,
 * RFC 8252 §7.3) or a private-use scheme of an app (RFC 8252 §7.1), and is matched exactly.
 */

/** Schemes that are never an app's own: they run code, read files or reach another party. */
const FORBIDDEN_SCHEMES = new Set([
  'javascript',
  'data',
  'vbscript',
  'file',
  'blob',
  'about',
  'filesystem',
  'ftp',
  'ws',
  'wss',
  'mailto',
  'tel',
  'sms',
  'view-source',
  'intent',
]);

/** The names of the loopback interface a native app listens on (RFC 8252 §7.3, §8.3). */
const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);

/** A URL's scheme without its colon, lower case. */
const schemeOf = (url: URL) => url.protocol.slice(0, -1).toLowerCase();

/** Whether `url` is plain `http` on the loopback interface. */
function isLoopbackHttp(url: URL): boolean {
  return url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname.toLowerCase());
}

/**
 * Why `uri` cannot be a client's redirect URI, in words for the client's developer, or
 * `null` when it can.
 */
export function redirectUriProblem(uri: string): string | null {
  if (uri.length > 2000) return 'is longer than 2000 characters';
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return 'is not an absolute URL';
  }
  if (uri.includes('#')) return 'must not have a fragment';
  if (url.username !== '' || url.password !== '') return 'must not contain user info';
  const scheme = schemeOf(url);
  if (scheme === 'https') return url.hostname === '' ? 'names no host' : null;
  if (scheme === 'http') {
    return isLoopbackHttp(url)
      ? null
      : 'must use https (plain http only on the loopback interface: 127.0.0.1, [::1], localhost)';
  }
  if (FORBIDDEN_SCHEMES.has(scheme)) return `must not use the ${scheme}: scheme`;
  // A private-use scheme of an app (`com.example.app:/callback`, `cursor://…`).
  return /^[a-z][a-z0-9+.-]*$/.test(scheme) ? null : 'has a scheme that is not a URI scheme';
}

/** A loopback `http` URI as written, its port left out: `http://127.0.0.1/callback`. */
const LOOPBACK_PORT = /^(http:\/\/(?:127\.0\.0\.1|\[::1\]|localhost))(?::\d{1,5})?(?=[/?]|$)/;

/**
 * Whether a redirect URI an authorization request names is one of the client's: the same
 * string, except that a loopback `http` one may name any port (RFC 8252 §7.3). Strings are
 * compared as written, never as parsed (no case folding, no added slash).
 */
export function redirectMatches(registered: readonly string[], requested: string): boolean {
  if (registered.includes(requested)) return true;
  if (!LOOPBACK_PORT.test(requested) || requested.includes('#')) return false;
  const portless = requested.replace(LOOPBACK_PORT, '$1');
  return registered.some(
    (uri) => LOOPBACK_PORT.test(uri) && uri.replace(LOOPBACK_PORT, '$1') === portless,
  );
}

/** The host a redirect URI returns to, as the consent page names it. */
export function returnHost(uri: string): string {
  const url = new URL(uri);
  const scheme = schemeOf(url);
  return scheme === 'https' || scheme === 'http' ? url.host : `${scheme}:`;
}
