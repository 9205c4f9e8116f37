/**
 * `@keyway/http/metrics`: Prometheus metrics of a broker and its handler (docs/api.md §16),
 * with `prom-client`. One {@link createMetrics} gives the broker's `observe` hook, the
 * handler's `onRequest` hook and the text to serve at `/metrics`; serve that on a listener
 * of its own, not on the broker's public port.
 *
 * @example
 * import { createMetrics } from '@keyway/http/metrics';
 * const metrics = createMetrics();
 * const broker = createBroker({ rootKey, storage, observe: metrics.observe });
 * const handler = createHandler(broker, { onRequest: metrics.onRequest });
 * // on an internal port:
 * createServer(async (_req, res) => {
 *   res.setHeader('content-type', metrics.contentType).end(await metrics.text());
 * }).listen(9464, '127.0.0.1');
 *
 * Under `node:cluster` (`keyway serve` with `KEYWAY_WORKERS`), each worker calls
 * {@link shareWithPrimary} and the primary serves {@link clusterMetrics}: one scrape, the
 * workers' figures summed.
 *
 * @module
 */
export { clusterMetrics, type MetricsExposition, shareWithPrimary } from './cluster.js';
export { createMetrics, type KeywayMetrics, type MetricsOptions } from './metrics.js';
