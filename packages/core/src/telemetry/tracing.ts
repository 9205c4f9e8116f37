import {
  type Attributes,
  INVALID_SPAN_CONTEXT,
  ProxyTracerProvider,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import { KeywayError, OutboundError } from '../contract/errors.js';

/*
 * OpenTelemetry spans (docs/api.md §16) through `@opentelemetry/api`: a no-op until the
 * application registers an SDK. Attributes name what happened (the provider id, the
 * outcome, the server's host), never a secret: no token, code, verifier, state, URL query
 * or body is ever an attribute.
 */

/**
 * The tracer of Keyway's spans, or `null` while no SDK is registered: every span would then
 * be a no-op, and the caller skips making it (the span, its attributes, its context: a few
 * hundred bytes and about a microsecond per request). Looked up at each use: a tracer kept
 * from before an SDK was registered would stay a no-op when the application's copy of
 * `@opentelemetry/api` is another than this package's (each copy has its own proxy; only
 * the global is shared). Registered through this copy, the global proxy has a delegate;
 * through another copy, the global is that copy's proxy, not an instance of this one's, and
 * is used as it is.
 */
export function activeTracer(): Tracer | null {
  const provider = trace.getTracerProvider();
  if (
    provider instanceof ProxyTracerProvider &&
    provider.getDelegateTracer('keyway') === undefined
  ) {
    return null;
  }
  return provider.getTracer('keyway');
}

/** The span handed to work that runs without a tracer: records nothing. */
export const NO_SPAN: Span = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

/** The outcome attribute of a span, and of the metric of the same work. */
export const OUTCOME = 'keyway.outcome';
/** The provider id attribute. */
export const PROVIDER = 'keyway.provider.id';

/** What may be an outcome: a code, never free text. */
const CODE = /^[A-Za-z_]{1,64}$/;

/** The code of a failure as spans and metrics name it: Keyway's or the outbound guard's. */
export function failureCode(error: unknown): string {
  if (error instanceof OutboundError) return error.failure;
  if (error instanceof KeywayError) return error.code;
  if (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError')) {
    return 'timeout';
  }
  // An OAuth error answer (`invalid_grant`), or oauth4webapi's code for a refused answer
  // (`OAUTH_INVALID_RESPONSE`): names from a fixed vocabulary, never a value.
  const { error: oauthError, code } = (error ?? {}) as { error?: unknown; code?: unknown };
  if (typeof oauthError === 'string' && CODE.test(oauthError)) return oauthError;
  if (typeof code === 'string' && CODE.test(code)) return code.toLowerCase();
  return 'error';
}

/**
 * Runs `work` inside a span named `name` (e.g. `keyway.refresh`), with `attributes`, and
 * ends it with `keyway.outcome`: what `outcomeOf` says of the result (default `ok`), or the
 * failure's code, the span then marked as an error. The error's message is not recorded:
 * it may quote a server's answer.
 */
export function inSpan<T>(
  name: string,
  attributes: Attributes,
  work: (span: Span) => Promise<T>,
  outcomeOf: (result: T) => string = () => 'ok',
  kind: SpanKind = SpanKind.INTERNAL,
): Promise<T> {
  const active = activeTracer();
  if (active === null) return work(NO_SPAN);
  return active.startActiveSpan(name, { kind, attributes }, async (span) => {
    try {
      const result = await work(span);
      span.setAttribute(OUTCOME, outcomeOf(result));
      return result;
    } catch (error) {
      const code = failureCode(error);
      span.setAttribute(OUTCOME, code);
      span.setStatus({ code: SpanStatusCode.ERROR, message: code });
      throw error;
    } finally {
      span.end();
    }
  });
}
