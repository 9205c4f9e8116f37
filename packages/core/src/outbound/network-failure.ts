/* The failures of outbound requests, in words; the error that carries one is the contract's. */

export { OutboundError, type OutboundFailure } from '../contract/errors.js';

/** Network failures by their system or undici code, in words for a trace. */
const NETWORK_CAUSES: Record<string, string> = {
  ECONNREFUSED: 'the connection was refused',
  ECONNRESET: 'the connection was reset',
  ENOTFOUND: 'the host name does not resolve',
  EAI_AGAIN: 'the host name could not be resolved now',
  ETIMEDOUT: 'the connection timed out',
  EHOSTUNREACH: 'the host cannot be reached',
  ENETUNREACH: 'the network cannot be reached',
  EPIPE: 'the connection closed while sending',
  UND_ERR_SOCKET: 'the connection closed before an answer',
  UND_ERR_CONNECT_TIMEOUT: 'the connection timed out',
  UND_ERR_HEADERS_TIMEOUT: 'no answer came in time',
};

/**
 * Why a request failed on the network, in words: `the request failed: the connection was
 * refused (ECONNREFUSED)`. Reads only the `code` of the error or its causes (a system
 * error's, undici's, a TLS one's), never a message that could quote a header or a body.
 */
export function networkFailure(cause: unknown): string {
  let error: unknown = cause;
  for (let depth = 0; depth < 5 && error instanceof Error; depth++) {
    const code = (error as Error & { code?: unknown }).code;
    if (typeof code === 'string' && /^[A-Z0-9_]{2,64}$/.test(code)) {
      const words =
        NETWORK_CAUSES[code] ??
        (/CERT|TLS|SSL|SIGNATURE/.test(code) ? 'the TLS certificate was refused' : 'it failed');
      return `the request failed: ${words} (${code})`;
    }
    error = error.cause;
  }
  return 'the request failed';
}
