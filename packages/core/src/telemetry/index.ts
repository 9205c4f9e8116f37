/**
 * `@keyway/core/telemetry`: the tracer Keyway's spans go through (docs/api.md §16), for the
 * HTTP layer and other runtime adapters that make spans of their own — so that every span of
 * a broker is made, or skipped while no OpenTelemetry SDK is registered, by one rule.
 *
 * @module
 */
export { activeTracer, NO_SPAN } from './tracing.js';
