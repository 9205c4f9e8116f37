import { type Span, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { setBounded } from '../platform/bounded.js';
import type { HostClass, Observer } from '../telemetry/observation.js';
import { activeTracer, failureCode, NO_SPAN, OUTCOME } from '../telemetry/tracing.js';
import type { OutboundFetch } from './fetch.js';
import { normalizeHost } from './hosts.js';
import type { StreamingFetch } from './stream.js';

/**
 * The guarded fetch, observed: each request is a client span (method, the server's host and
 * port, the status; never the path or query, which may carry a secret — some servers put a
 * key in their URL path) and an `outbound` observation by host class and outcome.
 */
export function observedOutbound<F extends OutboundFetch>(
  outbound: F,
  allowedHosts: ReadonlySet<string>,
  observe: Observer,
): F {
  const observed: OutboundFetch = (input, init = {}) =>
    observedCall(urlOf(input), init.method, allowedHosts, observe, () => outbound(input, init));
  // The streaming fetch's piped requests, observed the same way: the URL parsed here (a
  // copy of the caller's) is the one the request goes to, not parsed a second time; an
  // endpoint given as text is parsed once (the gateway's few endpoints, on every call).
  const { piped } = outbound as StreamingFetch;
  if (piped !== undefined) {
    const parsed = new Map<string, URL | null>();
    (observed as StreamingFetch).piped = (input, init) => {
      let url = typeof input === 'string' ? parsed.get(input) : undefined;
      if (url === undefined) {
        url = urlOf(input);
        if (typeof input === 'string') setBounded(parsed, input, url, PARSED_URLS);
      }
      return observedCall(url, init.method, allowedHosts, observe, () => piped(url ?? input, init));
    };
  }
  return observed as F;
}

/**
 * How many endpoints' parsed URLs the piped fetch keeps (past it, the one parsed first is
 * dropped). Each is only read once made (checked, then taken apart by the transport), never
 * changed.
 */
const PARSED_URLS = 1024;

/** A request's URL, or `null` when it is none (the guarded fetch refuses it, and that refusal is counted). */
function urlOf(input: string | URL): URL | null {
  try {
    return new URL(input);
  } catch {
    return null;
  }
}

/** One outbound request to `url` (`null`: not a URL), its span and its observation; `send` makes it. */
function observedCall<T extends { status: number }>(
  url: URL | null,
  requestMethod: string | undefined,
  allowedHosts: ReadonlySet<string>,
  observe: Observer,
  send: () => Promise<T>,
): Promise<T> {
  const hostClass: HostClass =
    url !== null && allowedHosts.has(normalizeHost(url.hostname)) ? 'allowed' : 'public';
  const method = (requestMethod ?? 'GET').toUpperCase();
  const run = async (span: Span): Promise<T> => {
    let outcome = 'error';
    try {
      const response = await send();
      outcome = `${Math.floor(response.status / 100)}xx`;
      span.setAttribute('http.response.status_code', response.status);
      if (response.status >= 400) span.setStatus({ code: SpanStatusCode.ERROR });
      return response;
    } catch (error) {
      outcome = failureCode(error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: outcome });
      throw error;
    } finally {
      span.setAttribute(OUTCOME, outcome);
      span.end();
      observe({ kind: 'outbound', hostClass, outcome });
    }
  };
  const active = activeTracer();
  if (active === null) return run(NO_SPAN);
  const attributes =
    url === null
      ? { 'http.request.method': method, 'keyway.host_class': hostClass }
      : {
          'http.request.method': method,
          'server.address': url.hostname,
          'server.port': Number(url.port || (url.protocol === 'https:' ? 443 : 80)),
          'url.scheme': url.protocol.slice(0, -1),
          'keyway.host_class': hostClass,
        };
  return active.startActiveSpan(method, { kind: SpanKind.CLIENT, attributes }, run);
}
