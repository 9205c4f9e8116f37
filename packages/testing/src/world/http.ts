/* The HTTP pieces of the test world: responses, random values, URLs. */

export const ISSUED_CLIENT_PREFIX = 'client_';

export function b64url(bytes: Uint8Array): string {
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

export function random(prefix: string): string {
  return `${prefix}${b64url(crypto.getRandomValues(new Uint8Array(18)))}`;
}

export const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers },
  });

export const oauthError = (status: number, error: string, description?: string) =>
  json(status, { error, ...(description ? { error_description: description } : {}) });

export function withPath(
  base: URL,
  wellKnown: string,
  position: 'inserted' | 'appended' | 'root',
): string {
  const path = base.pathname === '/' ? '' : base.pathname.replace(/\/$/, '');
  if (position === 'root') return `${base.origin}/.well-known/${wellKnown}`;
  if (position === 'inserted') return `${base.origin}/.well-known/${wellKnown}${path}`;
  return `${base.origin}${path}/.well-known/${wellKnown}`;
}
