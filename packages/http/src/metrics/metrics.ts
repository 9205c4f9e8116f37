import type { Observation } from '@keyway/core';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { RequestRecord } from '../telemetry.js';

/** Options of {@link createMetrics}. */
export interface MetricsOptions {
  /** The registry to add Keyway's metrics to; default a new one. */
  registry?: Registry;
  /** Also collect the process's metrics (CPU, memory, event loop lag, GC); default true. */
  processMetrics?: boolean;
  /** Buckets of the request duration histogram, in seconds. */
  durationBuckets?: number[];
  /**
   * The most distinct values a label that tenants choose (a provider id) takes per metric;
   * further ones are counted as `other`. Default 100. A provider's series go when it is
   * deleted, so its value is free again.
   */
  maxLabelValues?: number;
}

/** The value tenant-chosen labels past {@link MetricsOptions.maxLabelValues} are counted as. */
export const OVERFLOW_LABEL = 'other';

/**
 * The values a tenant-chosen label has taken, at most `max`: a new one past it is
 * {@link OVERFLOW_LABEL}, so tenants who create and delete providers cannot grow the
 * exposition without bound.
 */
class BoundedLabel {
  readonly #seen = new Set<string>();

  constructor(readonly max: number) {}

  of(value: string): string {
    if (this.#seen.has(value)) return value;
    if (this.#seen.size >= this.max) return OVERFLOW_LABEL;
    this.#seen.add(value);
    return value;
  }

  /** Frees a value (its series were removed). */
  forget(value: string): boolean {
    return this.#seen.delete(value);
  }
}

/** What {@link createMetrics} gives: two hooks and the exposition. */
export interface KeywayMetrics {
  readonly registry: Registry;
  /** The broker's `observe` hook (`createBroker({ observe })`). */
  observe(observation: Observation): void;
  /** The handler's `onRequest` hook (`createHandler(broker, { onRequest })`). */
  onRequest(record: RequestRecord): void;
  /** The media type of {@link KeywayMetrics.text}. */
  readonly contentType: string;
  /** Every metric in the Prometheus text format. */
  text(): Promise<string>;
}

/** The label of a request that matched no route (its path is never a label). */
const UNMATCHED = 'unmatched';

/**
 * Creates Keyway's Prometheus metrics (docs/api.md §16):
 *
 * - `keyway_http_requests_total{route,method,status}` and
 *   `keyway_http_request_duration_seconds{route,method}`: `route` is the template
 *   (`/api/admin/tokens/{name}`), never a path;
 * - `keyway_token_checks_total{outcome}`: `root`, `token`, `refused`, `limited`;
 * - `keyway_refreshes_total{provider,outcome}`: `refreshed`, `kept`, `superseded`,
 *   `reauthorization_required`, `failed`;
 * - `keyway_webhook_deliveries_total{outcome}`: `delivered`, `retrying`, `failed`;
 * - `keyway_outbound_requests_total{host_class,outcome}`: `allowed` or `public`, and the
 *   status class (`2xx`) or the failure (`timeout`, `blocked_address`, …);
 * - `keyway_rate_limited_total{limit}`: `auth`, `mint`, `discover`;
 * - `keyway_gateway_requests_total{provider,outcome}` and `keyway_gateway_open_streams`;
 * - `keyway_portal_tool_calls_total{alias,outcome}` (`ok`, `tool_error`, `input_required`,
 *   `consent_required`, `error`) and `keyway_portal_open_sessions`;
 *
 * A `provider` or `alias` label takes at most `maxLabelValues` values per metric (then `other`), and a
 * deleted provider's series go with it: tenants who create providers cannot grow the
 * exposition without bound.
 *
 * and, unless `processMetrics: false`, the process's own (`process_cpu_seconds_total`, …).
 *
 * @see [docs/api.md §16](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#16-health-metrics-logs-shutdown)
 */
export function createMetrics(options: MetricsOptions = {}): KeywayMetrics {
  const registry = options.registry ?? new Registry();
  const registers = [registry];
  if (options.processMetrics !== false) collectDefaultMetrics({ register: registry });
  const requests = new Counter({
    name: 'keyway_http_requests_total',
    help: 'HTTP requests answered, by route template, method and status.',
    labelNames: ['route', 'method', 'status'],
    registers,
  });
  const duration = new Histogram({
    name: 'keyway_http_request_duration_seconds',
    help: 'Time from a request to its answer, by route template and method.',
    labelNames: ['route', 'method'] as const,
    buckets: options.durationBuckets ?? [
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
    ],
    registers,
  });
  const counter = <L extends string>(name: string, help: string, labelNames: readonly L[]) =>
    new Counter<L>({ name, help, labelNames, registers });
  const tokenChecks = counter(
    'keyway_token_checks_total',
    'Credentials checked, by outcome: root, token, refused, limited.',
    ['outcome'],
  );
  const refreshes = counter(
    'keyway_refreshes_total',
    'Connection refreshes, by provider and outcome.',
    ['provider', 'outcome'],
  );
  const deliveries = counter(
    'keyway_webhook_deliveries_total',
    'Webhook delivery attempts, by outcome: delivered, retrying, failed.',
    ['outcome'],
  );
  const outbound = counter(
    'keyway_outbound_requests_total',
    'Requests to remote servers, by host class (allowed, public) and outcome.',
    ['host_class', 'outcome'],
  );
  const limited = counter(
    'keyway_rate_limited_total',
    'Requests refused by a rate limit, by limit: auth, mint, discover.',
    ['limit'],
  );

  const gateway = counter(
    'keyway_gateway_requests_total',
    'MCP gateway requests, by provider and outcome: the upstream status class (2xx…5xx), step_up, consent_required, ' +
      'upstream_error.',
    ['provider', 'outcome'],
  );
  const streams = new Gauge({
    name: 'keyway_gateway_open_streams',
    help: 'Upstream requests of the MCP gateway open now (answers still streaming).',
    registers,
  });

  const portalCalls = counter(
    'keyway_portal_tool_calls_total',
    'Tools called through the portal, by connection alias and outcome: ok, tool_error, input_required, ' +
      'consent_required, error.',
    ['alias', 'outcome'],
  );
  const portalSessions = new Gauge({
    name: 'keyway_portal_open_sessions',
    help: 'Portal sessions open now (the stateful 2025-11-25 wire).',
    registers,
  });

  const max = options.maxLabelValues ?? 100;
  if (!Number.isInteger(max) || max < 1)
    throw new TypeError('"maxLabelValues" must be a positive integer');
  const byProvider = [
    { counter: refreshes, label: new BoundedLabel(max) },
    { counter: gateway, label: new BoundedLabel(max) },
  ];
  const [refreshProvider, gatewayProvider] = byProvider.map(({ label }) => label) as [
    BoundedLabel,
    BoundedLabel,
  ];
  const portalAlias = new BoundedLabel(max);
  /** Removes every series of a deleted provider, and frees its label value. */
  const forgetProvider = async (provider: string) => {
    for (const { counter, label } of byProvider) {
      if (!label.forget(provider)) continue;
      for (const { labels } of (await counter.get()).values) {
        if (labels.provider === provider) counter.remove(labels as Record<string, string>);
      }
    }
  };

  return {
    registry,
    observe(observation) {
      switch (observation.kind) {
        case 'token_check':
          tokenChecks.inc({ outcome: observation.outcome });
          return;
        case 'refresh':
          refreshes.inc({
            provider: refreshProvider.of(observation.provider),
            outcome: observation.outcome,
          });
          return;
        case 'webhook_delivery':
          deliveries.inc({ outcome: observation.outcome });
          return;
        case 'outbound':
          outbound.inc({ host_class: observation.hostClass, outcome: observation.outcome });
          return;
        case 'rate_limited':
          limited.inc({ limit: observation.limit });
          return;
        case 'gateway':
          gateway.inc({
            provider: gatewayProvider.of(observation.provider),
            outcome: observation.outcome,
          });
          return;
        case 'gateway_streams':
          streams.set(observation.open);
          return;
        case 'portal_call':
          portalCalls.inc({
            alias: portalAlias.of(observation.alias),
            outcome: observation.outcome,
          });
          return;
        case 'portal_sessions':
          portalSessions.set(observation.open);
          return;
        case 'provider_deleted':
          void forgetProvider(observation.provider);
          return;
      }
    },
    onRequest(record) {
      const route = record.route ?? UNMATCHED;
      requests.inc({ route, method: record.method, status: record.status });
      duration.observe({ route, method: record.method }, record.durationMs / 1000);
    },
    contentType: registry.contentType,
    text: () => registry.metrics(),
  };
}
