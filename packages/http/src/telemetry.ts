import type { Principal } from '@keyway/core';
import { withHeaders } from '@keyway/core/outbound';
import { activeTracer, NO_SPAN } from '@keyway/core/telemetry';
import {
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type TextMapGetter,
} from '@opentelemetry/api';
import type { Incoming } from './incoming.js';
import type { Reply } from './responses.js';
import type { Route } from './routes/index.js';

/*
 * What the handler reports of each request (docs/api.md §16): a server span through
 * `@opentelemetry/api` (a no-op until an SDK is registered), and a record for request logs
 * and metrics. Both name the route's template, never the path or the query (a resource
 * path names a tenant; a query may carry a secret), and never a credential.
 */

/**
 * One request, as a request log line and the request metrics take it.
 *
 * @see [docs/api.md §16](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#16-health-metrics-logs-shutdown)
 */
export interface RequestRecord {
  /** When the request arrived, epoch milliseconds. */
  time: number;
  /** This request's id, also sent back as `X-Request-Id`. */
  requestId: string;
  method: string;
  /** The route's template as mounted (`/api/admin/tokens/{name}`), or `null` when none matched. */
  route: string | null;
  /** The route's OpenAPI `operationId`, or `null`. */
  operation: string | null;
  status: number;
  /** From arrival until the answer was ready, in milliseconds. */
  durationMs: number;
  /** Who made it: `root` or `token:<name>`; `null` on a public route or a refused credential. */
  principal: string | null;
  /** The client's address as the limit of failed authentications sees it, or `null`. */
  clientAddress: string | null;
  /** The trace's id when a span was recorded, else `null`. */
  traceId: string | null;
}

/** What the dispatcher learned of a request while answering it. */
export interface Seen {
  route: Route | null;
  principal: Principal | null;
}

/** How a principal is named in a record: `root` or `token:<name>`, as the audit log does. */
function nameOf(principal: Principal | null): string | null {
  if (principal === null) return null;
  return principal.kind === 'root' ? 'root' : `token:${principal.name}`;
}

/** Reads propagation headers (`traceparent`, `tracestate`) from a request. */
const HEADERS: TextMapGetter<Incoming> = {
  keys: () => [],
  get: (incoming, key) => incoming.header(key) ?? undefined,
};

/**
 * Wraps the dispatcher: each request runs in a server span continued from the caller's
 * `traceparent`, named `METHOD /route/{template}`, with the status and the operation; when
 * `onRequest` is given, each answer carries `X-Request-Id` and its record goes to it.
 */
export function observed(
  answer: (incoming: Incoming, seen: Seen) => Promise<Reply>,
  options: {
    basePath: string;
    onRequest: ((record: RequestRecord) => void) | undefined;
    clientAddress: (incoming: Incoming) => string | null;
  },
): (incoming: Incoming) => Promise<Reply> {
  const { basePath, onRequest } = options;
  return (incoming) => {
    const time = Date.now();
    const started = performance.now();
    const method = incoming.method.toUpperCase();
    const run = async (span: Span): Promise<Reply> => {
      const seen: Seen = { route: null, principal: null };
      try {
        const reply = await answer(incoming, seen);
        const route = seen.route === null ? null : `${basePath}${seen.route.path}`;
        if (route !== null) {
          span.updateName(`${method} ${route}`);
          span.setAttribute('http.route', route);
          span.setAttribute('keyway.operation', seen.route?.id ?? '');
        }
        span.setAttribute('http.response.status_code', reply.status);
        if (reply.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
        if (onRequest === undefined) return reply;
        const requestId = crypto.randomUUID();
        reply.headers = withHeaders(reply.headers, { 'x-request-id': requestId });
        const context = span.spanContext();
        try {
          onRequest({
            time,
            requestId,
            method,
            route,
            operation: seen.route?.id ?? null,
            status: reply.status,
            durationMs: performance.now() - started,
            principal: nameOf(seen.principal),
            clientAddress: options.clientAddress(incoming),
            traceId: span.isRecording() ? context.traceId : null,
          });
        } catch {
          // A log or metrics hook that throws must not change the answer.
        }
        return reply;
      } finally {
        span.end();
      }
    };
    const tracer = activeTracer();
    if (tracer === null) return run(NO_SPAN);
    const parent = propagation.extract(ROOT_CONTEXT, incoming, HEADERS);
    return tracer.startActiveSpan(
      method,
      { kind: SpanKind.SERVER, attributes: { 'http.request.method': method } },
      parent,
      run,
    );
  };
}
