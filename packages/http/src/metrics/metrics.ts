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
    'MCP gateway requests, by provider and outcome: the upstream status class (2xx…5xx), step_up, consent_required, upstream_error.',
    ['provider', 'outcome'],
  );
  const streams = new Gauge({
    name: 'keyway_gateway_open_streams',
    help: 'Upstream requests of the MCP gateway open now (answers still streaming).',
    registers,
  });

  return {
    registry,
    observe(observation) {
      switch (observation.kind) {
        case 'token_check':
          tokenChecks.inc({ outcome: observation.outcome });
          return;
        case 'refresh':
          refreshes.inc({ provider: observation.provider, outcome: observation.outcome });
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
          gateway.inc({ provider: observation.provider, outcome: observation.outcome });
          return;
        case 'gateway_streams':
          streams.set(observation.open);
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
