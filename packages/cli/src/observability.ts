import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RequestRecord } from '@keyway/http';
import type { MetricsExposition } from '@keyway/http/metrics';
import { type DestinationStream, pino } from 'pino';

/*
 * What `keyway serve` tells an operator while it runs (docs/api.md §16): a JSON line per
 * request (pino), Prometheus metrics on a listener of their own, and OpenTelemetry spans
 * when the standard OTEL_* variables name an exporter.
 */

/** The levels of `KEYWAY_LOG_LEVEL`, most severe first; `silent` logs nothing. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Where serve's log lines go, and what writes them. */
export interface ServerLog {
  /** The handler's `onRequest`: one line per request, `error` for a 5xx, else `info`. */
  request(record: RequestRecord): void;
  /** An error the caller only saw as `500 internal_error`, or one of background work. */
  failure(message: string, error: unknown): void;
  /** Writes what is buffered, and stops the timer that writes it (at close). */
  flush(): void;
}

/**
 * What an error may say in a log line: its type, message and stack, never the properties
 * a library hung on it (a request's options, a driver's parameters).
 */
function errorFields(error: unknown): { type: string; message: string; stack?: string } {
  if (!(error instanceof Error)) return { type: typeof error, message: String(error) };
  return {
    // The class (`DatabaseError`, `TypeError`), which says more than a `name` some set to
    // `error`.
    type: error.constructor.name || error.name,
    message: error.message,
    ...(error.stack === undefined ? {} : { stack: error.stack }),
  };
}

/**
 * The request log: a JSON line per request with `time`, `level`, `msg: "request"` and the
 * request's fields (`request_id`, `method`, `route`, `operation`, `status`, `duration_ms`,
 * `principal`, `client_address`, `trace_id`). Only a route's template is logged, never the
 * path or query, and never a header: no credential, token, code or secret can reach it.
 * `fields` are added to every line (a worker's `pid`).
 */
export function serverLog(
  level: LogLevel,
  destination?: DestinationStream,
  fields: Record<string, string | number> | null = null,
): ServerLog {
  // Alone, standard output in batches of at least 4 KiB (one write per a dozen lines, not
  // one per request), and at least every second, so a quiet broker's lines are not held
  // back; written out whole at close and at exit. Each write takes everything buffered (up
  // to 1 MiB): one write per event-loop turn in 16 KiB pieces (the default) fell behind a
  // sustained load and held the backlog on the heap (the soak: 44 MB of log lines after
  // 300,000 requests in 100,000-request stretches). A worker of KEYWAY_WORKERS (which has
  // `fields`) shares the pipe with the others: each line is then one write of its own, which
  // a pipe takes whole (below PIPE_BUF), so the workers' lines never cut into each other.
  const stdout =
    destination === undefined
      ? fields === null
        ? pino.destination({ dest: 1, sync: false, minLength: 4096, maxWrite: 1024 * 1024 })
        : pino.destination({ dest: 1, sync: true })
      : null;
  const flushing = stdout === null ? undefined : setInterval(() => stdout.flush(), 1000);
  flushing?.unref();
  const logger = pino(
    {
      level,
      base: fields,
      messageKey: 'msg',
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      // `err` is written as errorFields made it: pino's own serializer would take the plain
      // object's class (`Object`) for its type.
      serializers: { err: (fields: unknown) => fields },
    },
    stdout ?? destination,
  );
  return {
    request(record) {
      const fields = {
        request_id: record.requestId,
        method: record.method,
        route: record.route,
        operation: record.operation,
        status: record.status,
        duration_ms: Math.round(record.durationMs * 1000) / 1000,
        principal: record.principal,
        client_address: record.clientAddress,
        trace_id: record.traceId,
      };
      if (record.status >= 500) logger.error(fields, 'request');
      else logger.info(fields, 'request');
    },
    failure(message, error) {
      logger.error({ err: errorFields(error) }, message);
    },
    flush() {
      clearInterval(flushing);
      if (stdout !== null) stdout.flushSync();
    },
  };
}

/** A listener that serves `GET /metrics` and nothing else. */
export interface MetricsServer {
  readonly server: Server;
  /** `http://host:port/metrics`. */
  readonly url: string;
  close(): Promise<void>;
}

/**
 * Serves the metrics on their own listener (`KEYWAY_METRICS_PORT`, on `127.0.0.1` unless
 * `KEYWAY_METRICS_HOST` says otherwise): they say how the broker is used, so they are not
 * on its public port.
 */
export async function serveMetrics(
  metrics: MetricsExposition,
  host: string,
  port: number,
): Promise<MetricsServer> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('not found\n');
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    metrics.text().then(
      (text) => {
        res.writeHead(200, { 'content-type': metrics.contentType, 'cache-control': 'no-store' });
        res.end(req.method === 'HEAD' ? undefined : text);
      },
      () => res.writeHead(500).end(),
    );
  });
  server.listen(port, host);
  await Promise.race([
    once(server, 'listening'),
    once(server, 'error').then(([error]) => Promise.reject(error)),
  ]);
  const { port: listening } = server.address() as AddressInfo;
  const shown = host.includes(':') ? `[${host}]` : host;
  return {
    server,
    url: `http://${shown}:${listening}/metrics`,
    async close() {
      const closed = once(server, 'close');
      server.close();
      server.closeAllConnections();
      await closed;
    },
  };
}

/**
 * Whether the standard OpenTelemetry variables name a trace exporter: `OTEL_TRACES_EXPORTER`
 * other than `none`, or an OTLP endpoint; never with `OTEL_SDK_DISABLED=true`.
 */
export function tracingRequested(env: Record<string, string | undefined>): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false;
  const exporters = env.OTEL_TRACES_EXPORTER?.trim();
  if (exporters !== undefined && exporters !== '') {
    return exporters.split(',').some((name) => name.trim() !== 'none' && name.trim() !== '');
  }
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

/**
 * Registers the OpenTelemetry Node SDK, configured by the standard `OTEL_*` variables
 * (exporter, endpoint, protocol, headers, sampler; the service name defaults to `keyway`),
 * when they name an exporter; otherwise nothing, and spans stay no-ops.
 *
 * @returns what flushes and stops it, or `null`.
 */
export async function startTracing(
  env: Record<string, string | undefined>,
): Promise<{ shutdown(): Promise<void> } | null> {
  if (!tracingRequested(env)) return null;
  // Traces only: metrics are Prometheus's, and the log is standard output. The SDK reads
  // these from the environment; an operator's own choice stands.
  process.env.OTEL_METRICS_EXPORTER ??= 'none';
  process.env.OTEL_LOGS_EXPORTER ??= 'none';
  const { NodeSDK } = await import('@opentelemetry/sdk-node');
  const sdk = new NodeSDK({
    ...(env.OTEL_SERVICE_NAME ? {} : { serviceName: 'keyway' }),
    instrumentations: [],
  });
  sdk.start();
  return {
    // Spans that cannot be sent at exit are lost, and said so; the exit code stays the
    // broker's.
    shutdown: () =>
      sdk.shutdown().catch((error: unknown) => {
        console.error(
          `keyway: spans could not be sent at shutdown: ${error instanceof Error ? error.message : String(error)}`,
        );
      }),
  };
}
