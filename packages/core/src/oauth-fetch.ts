import * as oauth from 'oauth4webapi';
import type { OutboundFetch } from './outbound.js';

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
