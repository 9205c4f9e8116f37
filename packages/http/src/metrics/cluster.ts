import { AggregatorRegistry } from 'prom-client';
import type { KeywayMetrics } from './metrics.js';

/** What a metrics listener serves: the Prometheus text and its media type. */
export type MetricsExposition = Pick<KeywayMetrics, 'contentType' | 'text'>;

/**
 * In a `node:cluster` worker: answers the primary's requests for this worker's metrics
 * (prom-client's cluster protocol), so that {@link clusterMetrics} in the primary sums them.
 */
export function shareWithPrimary(metrics: KeywayMetrics): void {
  // Constructing one installs the worker's listener; the registry itself is not used.
  new AggregatorRegistry();
  AggregatorRegistry.setRegistries(metrics.registry);
}

/**
 * In a `node:cluster` primary: the metrics of every worker that called
 * {@link shareWithPrimary}, aggregated as prom-client does (counters, histograms and gauges
 * summed; a worker that does not answer within 5 s fails the scrape).
 */
export function clusterMetrics(): MetricsExposition {
  const aggregator = new AggregatorRegistry();
  return { contentType: aggregator.contentType, text: () => aggregator.clusterMetrics() };
}
