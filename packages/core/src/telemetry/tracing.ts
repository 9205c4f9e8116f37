import {
  type Attributes,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import { KeywayError } from '../contract/errors.js';
import { OutboundError } from '../outbound/errors.js';

/*
 * OpenTelemetry spans (docs/api.md §16) through `@opentelemetry/api`: a no-op until the
 * application registers an SDK. Attributes name what happened (the provider id, the
 * outcome, the server's host), never a secret: no token, code, verifier, state, URL query
 * or body is ever an attribute.
 */

/**
 * The tracer of Keyway's spans, looked up at each use: a tracer kept from before an SDK was
 * registered would stay a no-op when the application's copy of `@opentelemetry/api` is
 * another than this package's (each copy has its own proxy; only the global is shared).
 */
export const tracer = (): Tracer => trace.getTracer('keyway');

/** The outcome attribute of a span, and of the metric of the same work. */
export const OUTCOME = 'keyway.outcome';
/** The provider id attribute. */
export const PROVIDER = 'keyway.provider.id';

/** What may be an outcome: a code, never free text. */
const CODE = /^[A-Za-z_]{1,64}$/;

/** The code of a failure as spans and metrics name it: Keyway's or the outbound guard's. */
export function failureCode(error: unknown): string {
  if (error instanceof KeywayError || error instanceof OutboundError) return error.code;
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
  return tracer().startActiveSpan(name, { kind, attributes }, async (span) => {
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
