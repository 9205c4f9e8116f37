/*
 * A JWT of RFC 7523 checked as an authorization server must: a client assertion (§2.2,
 * `private_key_jwt`) — an ES256 JWT signed by the client's registered key, issued by and
 * about the client, for this server, unexpired, never seen before (its `jti`) — or an
 * authorization grant (§2.1, a workload's token): signed by its issuer's key, for this
 * server, unexpired.
 */

const decoder = new TextDecoder();
const fromB64url = (text: string) =>
  Uint8Array.from(atob(text.replace(/-/g, '+').replace(/_/g, '/')), (c) => c.charCodeAt(0));

/**
 * Why `assertion` is not a valid assertion from `expected.iss` (about `expected.sub`) for
 * `audiences`, or `null`. With `seenJtis`, a `jti` is required and single-use.
 */
export async function assertionProblem(
  assertion: string,
  expected: { iss: string; sub?: string },
  publicJwk: JsonWebKey | undefined,
  audiences: readonly string[],
  nowMs: number,
  seenJtis: Set<string> | null,
): Promise<string | null> {
  if (publicJwk === undefined) return 'the client has no registered key';
  const parts = assertion.split('.');
  if (parts.length !== 3) return 'not a compact JWT';
  const [header, payload, signature] = parts as [string, string, string];
  let head: { alg?: string };
  let claims: Record<string, unknown>;
  try {
    head = JSON.parse(decoder.decode(fromB64url(header)));
    claims = JSON.parse(decoder.decode(fromB64url(payload)));
  } catch {
    return 'not a JWT';
  }
  if (head.alg !== 'ES256') return 'this server verifies ES256 assertions';
  const key = await crypto.subtle.importKey(
    'jwk',
    publicJwk,
    { name: 'ECDSA', namedCurve: 'P-256' },
    false,
    ['verify'],
  );
  const signed = new TextEncoder().encode(`${header}.${payload}`);
  const valid = await crypto.subtle.verify(
    { name: 'ECDSA', hash: 'SHA-256' },
    key,
    fromB64url(signature),
    signed,
  );
  if (!valid) return 'the signature does not verify';
  if (claims.iss !== expected.iss) return `iss must be ${expected.iss}`;
  if (expected.sub !== undefined && claims.sub !== expected.sub)
    return `sub must be ${expected.sub}`;
  const aud = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
  if (!aud.some((value) => audiences.includes(String(value)))) return 'not for this server';
  if (typeof claims.exp !== 'number' || claims.exp * 1000 <= nowMs) return 'expired';
  if (seenJtis === null) return null;
  if (typeof claims.jti !== 'string' || claims.jti === '') return 'no jti';
  if (seenJtis.has(claims.jti)) return 'this assertion was used before (its jti)';
  seenJtis.add(claims.jti);
  return null;
}
