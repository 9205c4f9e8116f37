import { json, oauthError } from './http.js';
import type { Failure } from './options.js';

/**
 * The answer of an endpoint told to fail (`failures` option): a 500, JSON that does not
 * parse, a body over the size limit, or no answer at all until the caller gives up.
 */
export function failureResponse(
  failure: Failure,
  signal: AbortSignal | null | undefined,
): Promise<Response> {
  switch (failure) {
    case 'server_error':
      return Promise.resolve(oauthError(500, 'server_error', 'injected failure'));
    case 'malformed_json':
      return Promise.resolve(
        new Response('{"issuer": "https://', { headers: { 'content-type': 'application/json' } }),
      );
    case 'oversized':
      return Promise.resolve(json(200, { padding: 'x'.repeat(2 * 1024 * 1024) }));
    case 'timeout':
      return new Promise((_, reject) => {
        signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
      });
  }
}
