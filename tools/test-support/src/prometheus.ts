/// <reference path="./parse-prometheus-text-format.d.ts" />
import parse from 'parse-prometheus-text-format';

/* Prometheus's text format, read as a scraper reads it (parse-prometheus-text-format). */

/** One metric family of an exposition. */
export interface MetricFamily {
  name: string;
  help: string;
  type: 'COUNTER' | 'GAUGE' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED';
  metrics: { labels?: Record<string, string>; value?: string; buckets?: Record<string, string> }[];
}

/** Parses an exposition; throws on text a Prometheus server would refuse. */
export function parseMetrics(text: string): MetricFamily[] {
  return parse(text) as MetricFamily[];
}

/** The value of the sample of `name` with exactly these labels; 0 when there is none. */
export function sampleOf(
  families: MetricFamily[],
  name: string,
  labels: Record<string, string>,
): number {
  const wanted = JSON.stringify(Object.entries(labels).sort());
  const found = families
    .find((family) => family.name === name)
    ?.metrics.find(
      (metric) => JSON.stringify(Object.entries(metric.labels ?? {}).sort()) === wanted,
    );
  return found?.value === undefined ? 0 : Number(found.value);
}
