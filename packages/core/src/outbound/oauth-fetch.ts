import * as oauth from 'oauth4webapi';
import type { OutboundFetch } from './fetch.js';

/* How oauth4webapi's requests go out: through Keyway's guarded fetch, and nothing else. */

/**
 * A fetch as oauth4webapi calls it (`customFetch`), sending through `send`. Its body type is
 * one of fetch's own (string, bytes, URLSearchParams, a stream), declared apart.
 */
export function oauthFetch(send: (url: string, init: RequestInit) => Promise<Response>) {
  return <Method, Body>(url: string, options: oauth.CustomFetchOptions<Method, Body>) =>
    send(url, {
      method: String(options.method),
      headers: options.headers,
      body: options.body as BodyInit | null | undefined,
      redirect: options.redirect,
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    });
}

/** oauth4webapi options: our guarded fetch, whose policy decides http vs https. */
export function libraryOptions(outbound: OutboundFetch) {
  return {
    [oauth.customFetch]: oauthFetch(outbound),
    [oauth.allowInsecureRequests]: true,
  } as const;
}

/**
 * A response rebuilt from its JSON object body as `edit` changes it (the body and the
 * status), for answers that real servers write a little off the RFCs. A body that is not a
 * JSON object passes unchanged, for oauth4webapi to judge.
 */
export async function editJsonAnswer(
  response: Response,
  edit: (
    body: Record<string, unknown>,
    status: number,
  ) => { body: Record<string, unknown>; status: number },
): Promise<Response> {
  const text = await response.text();
  const headers = new Headers(response.headers);
  headers.delete('content-length');
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return new Response(text, { status: response.status, headers });
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return new Response(text, { status: response.status, headers });
  }
  const edited = edit({ ...(body as Record<string, unknown>) }, response.status);
  headers.set('content-type', 'application/json');
  return new Response(JSON.stringify(edited.body), { status: edited.status, headers });
}
