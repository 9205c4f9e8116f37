import type { KeywayError } from '@keyway/core';

/* The responses every Keyway route and guard answers with (API.md §1.2, §1.3). */

const JSON_HEADERS = {
  'content-type': 'application/json; charset=utf-8',
  // Nothing an authenticated API answers belongs in a shared cache; responses that carry a
  // secret must not be stored at all (API.md §1.3).
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
};

export function json(
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): Response {
  return new Response(JSON.stringify(body), { status, headers: { ...JSON_HEADERS, ...headers } });
}

export function noContent(): Response {
  return new Response(null, { status: 204, headers: { 'cache-control': 'no-store' } });
}

/**
 * The API error body of a {@link KeywayError}, with `WWW-Authenticate` for `401`/`403`
 * (RFC 6750 §3) and `Retry-After` for `429`.
 */
export function errorResponse(error: KeywayError, credentialPresented: boolean): Response {
  const headers: Record<string, string> = {};
  if (error.code === 'invalid_token') {
    headers['www-authenticate'] = credentialPresented
      ? 'Bearer realm="keyway", error="invalid_token"'
      : 'Bearer realm="keyway"';
  } else if (error.code === 'insufficient_scope') {
    headers['www-authenticate'] = 'Bearer realm="keyway", error="insufficient_scope"';
  }
  if (error.retryAfter !== undefined) headers['retry-after'] = String(error.retryAfter);
  return json(error.status, error.toJSON(), headers);
}
