import {
  type Attributes,
  type Span,
  type SpanOptions,
  type Tracer,
  type TracerProvider,
  trace,
} from '@opentelemetry/api';
import { afterEach, describe, expect, it } from 'vitest';
import { activeTracer, inSpan, NO_SPAN } from '../src/telemetry/tracing.js';

/*
 * Spans are made only when an SDK is registered (docs/api.md §16): without one they would be
 * no-ops, and the work runs as it is. A provider registered later, or through another copy
 * of `@opentelemetry/api`, is used from the next span on.
 */

interface Recorded {
  name: string;
  attributes: Attributes;
  ended: boolean;
}

/** A tracer provider that records each span's name, attributes and end. */
function recordingProvider(spans: Recorded[]): TracerProvider {
  const tracer = {
    startActiveSpan(name: string, options: SpanOptions, fn: (span: Span) => unknown) {
      const recorded: Recorded = { name, attributes: { ...options.attributes }, ended: false };
      spans.push(recorded);
      const span = {
        setAttribute(key: string, value: unknown) {
          recorded.attributes[key] = value as string;
          return span;
        },
        setStatus: () => span,
        end() {
          recorded.ended = true;
        },
        isRecording: () => true,
      } as unknown as Span;
      return fn(span);
    },
  } as unknown as Tracer;
  return { getTracer: (name) => (name === 'keyway' ? tracer : trace.getTracer(name)) };
}

/** Where every copy of the API (major version 1) finds the registered providers. */
const GLOBAL = Symbol.for('opentelemetry.js.api.1');

afterEach(() => {
  trace.disable();
});

describe('activeTracer() and inSpan()', () => {
  it('makes no span while no SDK is registered, and runs the work as it is', async () => {
    expect(activeTracer()).toBeNull();
    const seen: Span[] = [];
    const result = await inSpan('keyway.refresh', { 'keyway.provider.id': 'p' }, async (span) => {
      seen.push(span);
      return 42;
    });
    expect(result).toBe(42);
    expect(seen).toEqual([NO_SPAN]);
    expect(NO_SPAN.isRecording()).toBe(false);
    const failure = new Error('the server went away');
    await expect(
      inSpan('keyway.refresh', {}, async () => {
        throw failure;
      }),
    ).rejects.toBe(failure);
  });

  it('uses a provider registered after the first span, from the next span on', async () => {
    await inSpan('keyway.before', {}, async () => 'ok');
    const spans: Recorded[] = [];
    expect(trace.setGlobalTracerProvider(recordingProvider(spans))).toBe(true);
    expect(activeTracer()).not.toBeNull();
    expect(await inSpan('keyway.refresh', { 'keyway.provider.id': 'p' }, async () => 7)).toBe(7);
    expect(spans).toEqual([
      {
        name: 'keyway.refresh',
        attributes: { 'keyway.provider.id': 'p', 'keyway.outcome': 'ok' },
        ended: true,
      },
    ]);
    trace.disable();
    expect(activeTracer()).toBeNull();
  });

  it('uses a provider registered through another copy of @opentelemetry/api', async () => {
    const spans: Recorded[] = [];
    const registry = globalThis as unknown as Record<symbol, unknown>;
    // What another copy's setGlobalTracerProvider leaves: its own proxy, not this copy's.
    registry[GLOBAL] = { version: '1.9.0', trace: recordingProvider(spans) };
    try {
      expect(activeTracer()).not.toBeNull();
      await inSpan('keyway.discovery', {}, async () => null);
      expect(spans.map(({ name, ended }) => [name, ended])).toEqual([['keyway.discovery', true]]);
    } finally {
      delete registry[GLOBAL];
    }
    expect(activeTracer()).toBeNull();
  });
});
