import { type Span, SpanKind, SpanStatusCode } from '@opentelemetry/api';
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
    observedCall(input, init.method, allowedHosts, observe, () => outbound(input, init));
  // The streaming fetch's piped requests, observed the same way: the URL parsed here (a
  // copy of the caller's) is the one the request goes to, not parsed a second time.
  const { piped } = outbound as StreamingFetch;
  if (piped !== undefined) {
    (observed as StreamingFetch).piped = (input, init) =>
      observedCall(input, init.method, allowedHosts, observe, (url) => piped(url ?? input, init));
  }
  return observed as F;
}

/** One outbound request, its span and its observation; `send` makes it. */
function observedCall<T extends { status: number }>(
  input: string | URL,
  requestMethod: string | undefined,
  allowedHosts: ReadonlySet<string>,
  observe: Observer,
  send: (url: URL | null) => Promise<T>,
): Promise<T> {
  let url: URL | null = null;
  try {
    url = new URL(input);
  } catch {
    // The guarded fetch refuses it, and that refusal is counted below.
  }
  const hostClass: HostClass =
    url !== null && allowedHosts.has(normalizeHost(url.hostname)) ? 'allowed' : 'public';
  const method = (requestMethod ?? 'GET').toUpperCase();
  const run = async (span: Span): Promise<T> => {
    let outcome = 'error';
    try {
      const response = await send(url);
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
