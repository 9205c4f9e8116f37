import { classifyAddress, isIpLiteral } from '../platform/address.js';
import { readBounded } from '../platform/bytes.js';
import { allowedHostSet, normalizeHost } from './hosts.js';
import { networkFailure, OutboundError } from './network-failure.js';
import { defaultTransport, type Transport } from './transport.js';

/** The guarded fetch every remote call of Keyway goes through. */
export type OutboundFetch = (url: string | URL, init?: RequestInit) => Promise<Response>;

/** Options of {@link createOutboundFetch}. */
export interface OutboundOptions {
  /**
   * The transport; default {@link defaultTransport}: on Node one that resolves, checks and
   * pins addresses; on Deno and Bun one that resolves and checks them first; elsewhere
   * host names are refused unless allowed.
   */
  fetch?: Transport;
  /**
   * Host names (or IP literals) that may be reached over plain `http` and on loopback or
   * private addresses: for development and tests only. Default none.
   */
  allowedHosts?: readonly string[];
  /** Whole-request timeout, body included, in ms. Default 10000. */
  timeoutMs?: number;
  /** Largest response body read, in bytes. Default 1 MiB. */
  maxResponseBytes?: number;
  /** Same-origin redirects followed at most (none for a request with `redirect: 'error'`). Default 5. */
  maxRedirects?: number;
}

const REDIRECT = new Set([301, 302, 303, 307, 308]);
const NULL_BODY = new Set([101, 103, 204, 205, 304]);

/**
 * The server-side request forgery policy for one URL, before any connection: `https` only
 * (plain `http` for allowed hosts), no credentials in the URL, and no IP literal or
 * `localhost` name that is not publicly routable unless the host is allowed. Host names
 * are checked again on their resolved addresses by a resolving transport.
 *
 * @throws {OutboundError}
 */
export function assertOutboundUrl(url: URL, allowedHosts: ReadonlySet<string>): void {
  const host = normalizeHost(url.hostname);
  const allowed = allowedHosts.has(host);
  if (url.username !== '' || url.password !== '') {
    throw new OutboundError('invalid_url', `${url.origin}: credentials in a URL are not allowed`);
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && allowed)) {
    throw new OutboundError(
      'insecure_scheme',
      `${url.origin}: only https is allowed${url.protocol === 'http:' ? ' (plain http only for allowed hosts)' : ''}`,
    );
  }
  if (allowed) return;
  if (host === 'localhost' || host.endsWith('.localhost')) {
    throw new OutboundError(
      'blocked_address',
      `${url.origin}: loopback host names are not allowed`,
    );
  }
  if (isIpLiteral(host)) {
    const kind = classifyAddress(host);
    if (kind !== 'public') {
      throw new OutboundError(
        'blocked_address',
        `${url.origin}: ${kind} addresses are not allowed`,
      );
    }
  }
}

/**
 * Why an endpoint URL taken from a remote server's metadata may not be used, or `null` when
 * it may: it must be absolute `https` (plain `http` only for allowed hosts), without user
 * info or fragment, and pass {@link assertOutboundUrl}. A browser is sent to the
 * authorization endpoint, so a `javascript:` or `data:` URL there would run in the user's
 * session; every other endpoint receives secrets.
 */
export function endpointProblem(text: string, allowedHosts: ReadonlySet<string>): string | null {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'is not an absolute URL';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'must use https';
  if (url.hash !== '' || text.includes('#')) return 'must not have a fragment';
  try {
    assertOutboundUrl(url, allowedHosts);
  } catch (error) {
    if (!(error instanceof OutboundError)) throw error;
    if (error.failure === 'insecure_scheme')
      return 'must use https (plain http only for allowed hosts)';
    if (error.failure === 'invalid_url') return 'must not contain user info';
    return 'names an address that is not allowed';
  }
  return null;
}

/**
 * A promise that rejects when the signal aborts: raced against the transport and the body,
 * the deadline holds even when a transport ignores the signal (or a signal it derived
 * from ours is lost, as a Request's own signal can be).
 */
export function abortion(signal: AbortSignal): Promise<never> {
  const aborted = new Promise<never>((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
  aborted.catch(() => {});
  return aborted;
}

function readCapped(
  response: Response,
  limit: number,
  origin: string,
  aborted: Promise<never>,
): Promise<Uint8Array<ArrayBuffer>> {
  const tooLarge = () =>
    new OutboundError('too_large', `${origin}: the response is larger than ${limit} bytes`);
  return readBounded(response, limit, { tooLarge }, aborted);
}

/** The URL of an outbound request. @throws {OutboundError} `invalid_url`. */
export function outboundUrl(input: string | URL): URL {
  try {
    return new URL(input);
  } catch (cause) {
    throw new OutboundError('invalid_url', 'not an absolute URL', { cause });
  }
}

/**
 * Creates the guarded fetch: every URL (and every redirect target) passes
 * {@link assertOutboundUrl}; redirects are followed only within the same origin; the whole
 * exchange, body included, is bounded in time and size. The returned response is fully
 * read (at most `maxResponseBytes`), so a slow or endless body cannot hold a request.
 *
 * @example
 * const outbound = createOutboundFetch({ allowedHosts: ['localhost'] });
 * const response = await outbound('https://mcp.example.com/.well-known/oauth-protected-resource');
 */
export function createOutboundFetch(options: OutboundOptions = {}): OutboundFetch {
  const transport: Transport = options.fetch ?? defaultTransport(options.allowedHosts ?? []);
  const allowedHosts = allowedHostSet(options.allowedHosts);
  const timeoutMs = options.timeoutMs ?? 10_000;
  const maxBytes = options.maxResponseBytes ?? 1024 * 1024;
  const maxRedirects = options.maxRedirects ?? 5;

  return async function outboundFetch(input, init = {}) {
    let url = outboundUrl(input);
    // A timer of our own, held until the request ends and then cleared.
    const deadline = new AbortController();
    const timer = setTimeout(
      () => deadline.abort(new DOMException('the request timed out', 'TimeoutError')),
      timeoutMs,
    );
    const timeout = deadline.signal;
    const signal = init.signal ? AbortSignal.any([init.signal, timeout]) : timeout;
    const aborted = abortion(signal);
    let method = (init.method ?? 'GET').toUpperCase();
    let body = init.body;
    const origin = url.origin;
    try {
      for (let hop = 0; ; hop++) {
        assertOutboundUrl(url, allowedHosts);
        let response: Response;
        try {
          response = await Promise.race([
            transport(url.href, { ...init, method, body, redirect: 'manual', signal }),
            aborted,
          ]);
        } catch (cause) {
          if (cause instanceof OutboundError || timeout.aborted) throw cause;
          throw new OutboundError('network', `${url.origin}: ${networkFailure(cause)}`, { cause });
        }
        const location = response.headers.get('location');
        if (REDIRECT.has(response.status) && location !== null) {
          await response.body?.cancel().catch(() => {});
          // A document that must come from its own URL (a client's metadata) follows none.
          if (init.redirect === 'error') {
            throw new OutboundError('redirect', `${url.origin}: the answer was a redirect`);
          }
          const next = new URL(location, url);
          if (next.origin !== origin) {
            throw new OutboundError(
              'redirect',
              `${url.origin}: a redirect to another origin was refused`,
            );
          }
          if (hop >= maxRedirects) {
            throw new OutboundError(
              'redirect',
              `${url.origin}: more than ${maxRedirects} redirects`,
            );
          }
          if (
            response.status === 303 ||
            ((response.status === 301 || response.status === 302) && method === 'POST')
          ) {
            method = 'GET';
            body = null;
          }
          url = next;
          continue;
        }
        const bytes = NULL_BODY.has(response.status)
          ? null
          : await readCapped(response, maxBytes, url.origin, aborted);
        return new Response(bytes, {
          status: response.status,
          statusText: response.statusText,
          headers: response.headers,
        });
      }
    } catch (error) {
      if (timeout.aborted && !(error instanceof OutboundError && error.failure !== 'network')) {
        throw new OutboundError(
          'timeout',
          `${url.origin}: no complete answer within ${timeoutMs} ms`,
          {
            cause: error,
          },
        );
      }
      throw error;
    } finally {
      clearTimeout(timer);
    }
  };
}
