import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { bundleCli, startBrokerProcess } from '@keyway/test-support/processes';
import { parseMetrics, sampleOf } from '@keyway/test-support/prometheus';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/*
 * docs/api.md §16 as an operator sees `keyway serve`: a JSON line per request on standard
 * output, Prometheus metrics on a listener of their own, and spans sent to a real OTLP/HTTP
 * receiver on loopback when the standard OTEL_* variables name one.
 */

const ROOT_KEY = 'observability-root-key-0123456789abcdefgh';
const WRONG = 'kw_not-a-token-but-a-guess';

interface OtlpAttribute {
  key: string;
  value: { stringValue?: string; intValue?: string | number };
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes?: OtlpAttribute[];
}
interface OtlpExport {
  resourceSpans: {
    resource: { attributes: OtlpAttribute[] };
    scopeSpans: { spans: OtlpSpan[] }[];
  }[];
}

const attributesOf = (list: OtlpAttribute[] = []) =>
  Object.fromEntries(
    list.map(({ key, value }) => [
      key,
      value.stringValue ?? (value.intValue === undefined ? null : Number(value.intValue)),
    ]),
  );

async function listen(server: Server): Promise<string> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('keyway serve, observed', () => {
  /** What the OTLP receiver was sent, one JSON body per export. */
  const exports: OtlpExport[] = [];
  const receiver = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (chunk: string) => {
      body += chunk;
    });
    req.on('end', () => {
      if (req.url === '/v1/traces' && req.headers['content-type'] === 'application/json') {
        exports.push(JSON.parse(body) as OtlpExport);
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  /** A remote server that is down: its requests are the outbound ones counted. */
  let remoteRequests = 0;
  const remote = createServer((_req, res) => {
    remoteRequests++;
    res.writeHead(503).end();
  });
  let receiverUrl = '';
  let remoteUrl = '';

  beforeAll(async () => {
    receiverUrl = await listen(receiver);
    remoteUrl = await listen(remote);
  });
  afterAll(() => {
    receiver.close();
    remote.close();
  });

  it('logs a line per request, serves metrics on their own port, and sends spans over OTLP', async () => {
    const broker = await startBrokerProcess({
      KEYWAY_ROOT_KEY: ROOT_KEY,
      KEYWAY_DATABASE: ':memory:',
      KEYWAY_ALLOWED_HOSTS: '127.0.0.1',
      KEYWAY_METRICS_PORT: '0',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiverUrl,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '50',
    });
    const exited = once(broker.child, 'exit');
    const call = (method: string, path: string, token: string | null, body?: unknown) =>
      fetch(`${broker.url}${path}`, {
        method,
        headers: {
          ...(token === null ? {} : { authorization: `Bearer ${token}` }),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    const answers = [
      await call('GET', '/api/admin/tokens', ROOT_KEY),
      await call('GET', '/api/admin/tokens', WRONG),
      await call('POST', '/api/admin/discover', ROOT_KEY, { resource_url: `${remoteUrl}/mcp` }),
      await call('GET', '/readyz', null),
      // Metrics are not on the broker's port.
      await call('GET', '/metrics', ROOT_KEY),
    ];
    expect(answers.map((answer) => answer.status)).toEqual([200, 401, 200, 200, 404]);
    const discovered = (await answers[2]?.json()) as { ok: boolean; error: string };
    expect([discovered.ok, discovered.error]).toEqual([false, 'discovery_failed']);

    // ── metrics, on 127.0.0.1 and another port ──
    const metricsUrl = broker.output().match(/^Metrics at (\S+)$/m)?.[1] as string;
    expect(new URL(metricsUrl).hostname).toBe('127.0.0.1');
    expect(new URL(metricsUrl).port).not.toBe(new URL(broker.url).port);
    const scraped = await fetch(metricsUrl);
    expect(scraped.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    const families = parseMetrics(await scraped.text());
    const value = (name: string, labels: Record<string, string>) =>
      sampleOf(families, name, labels);
    const requests = (route: string, method: string, status: string) =>
      value('keyway_http_requests_total', { route, method, status });
    expect([
      requests('/api/admin/tokens', 'GET', '200'),
      requests('/api/admin/tokens', 'GET', '401'),
      requests('/api/admin/discover', 'POST', '200'),
      requests('/readyz', 'GET', '200'),
      requests('unmatched', 'GET', '404'),
    ]).toEqual([1, 1, 1, 1, 1]);
    expect(value('keyway_token_checks_total', { outcome: 'root' })).toBe(3);
    expect(value('keyway_token_checks_total', { outcome: 'refused' })).toBe(1);
    expect(remoteRequests).toBeGreaterThan(0);
    expect(value('keyway_outbound_requests_total', { host_class: 'allowed', outcome: '5xx' })).toBe(
      remoteRequests,
    );
    expect(families.some((family) => family.name === 'process_cpu_seconds_total')).toBe(true);
    expect((await fetch(metricsUrl.replace('/metrics', '/other'))).status).toBe(404);

    // ── the log is written while the broker runs, not only at exit (a quiet broker's lines
    // go out within a second) ──
    for (
      let attempt = 0;
      attempt < 400 && !broker.output().includes('"route":"/readyz"');
      attempt++
    ) {
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect(broker.output()).toContain('"route":"/readyz"');
    expect(broker.child.exitCode).toBeNull();

    // ── stop: requests are done, spans are flushed, the process exits 0 ──
    broker.child.kill('SIGTERM');
    const [code] = await exited;
    expect(code).toBe(0);

    // ── the request log: one JSON line per request, nothing else of the request ──
    const lines = broker
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(
      lines.map((line) => [line.msg, line.level, line.method, line.route, line.status]),
    ).toEqual([
      ['request', 'info', 'GET', '/api/admin/tokens', 200],
      ['request', 'info', 'GET', '/api/admin/tokens', 401],
      ['request', 'info', 'POST', '/api/admin/discover', 200],
      ['request', 'info', 'GET', '/readyz', 200],
      ['request', 'info', 'GET', null, 404],
    ]);
    for (const [index, line] of lines.entries()) {
      expect(Object.keys(line).sort()).toEqual(
        [
          'client_address',
          'duration_ms',
          'level',
          'method',
          'msg',
          'operation',
          'principal',
          'request_id',
          'route',
          'status',
          'time',
          'trace_id',
        ].sort(),
      );
      expect(line.request_id).toBe(answers[index]?.headers.get('x-request-id'));
      expect(line.client_address).toBe('127.0.0.1');
      expect(line.trace_id).toMatch(/^[0-9a-f]{32}$/);
    }
    expect(lines.map((line) => line.principal)).toEqual(['root', null, 'root', null, 'root']);
    expect(broker.output()).not.toContain(ROOT_KEY);
    expect(broker.output()).not.toContain(WRONG);

    // ── the spans, as the OTLP receiver got them ──
    expect(exports.length).toBeGreaterThan(0);
    const resources = exports.flatMap((sent) => sent.resourceSpans);
    expect(attributesOf(resources[0]?.resource.attributes)['service.name']).toBe('keyway');
    const spans = resources.flatMap((resource) =>
      resource.scopeSpans.flatMap((scope) => scope.spans),
    );
    const discover = spans.find((span) => span.name === 'POST /api/admin/discover') as OtlpSpan;
    expect(attributesOf(discover.attributes)).toEqual({
      'http.request.method': 'POST',
      'http.route': '/api/admin/discover',
      'keyway.operation': 'discover',
      'http.response.status_code': 200,
    });
    // The log line and the span name the same trace.
    expect(lines[2]?.trace_id).toBe(discover.traceId);
    const discovery = spans.find((span) => span.name === 'keyway.discovery') as OtlpSpan;
    expect(discovery.parentSpanId).toBe(discover.spanId);
    expect(attributesOf(discovery.attributes)).toEqual({ 'keyway.outcome': 'discovery_failed' });
    const outbound = spans.filter((span) => span.parentSpanId === discovery.spanId);
    expect(outbound.length).toBe(remoteRequests);
    // The probe first (an MCP initialize), then metadata reads.
    expect(outbound.map((span) => span.name)).toEqual([
      'POST',
      ...outbound.slice(1).map(() => 'GET'),
    ]);
    expect(attributesOf(outbound[0]?.attributes)).toEqual({
      'http.request.method': 'POST',
      'server.address': '127.0.0.1',
      'server.port': Number(new URL(remoteUrl).port),
      'url.scheme': 'http',
      'keyway.host_class': 'allowed',
      'http.response.status_code': 503,
      'keyway.outcome': '5xx',
    });
    expect(spans.map((span) => span.name).sort()).toEqual(
      [
        'GET /api/admin/tokens',
        'GET /api/admin/tokens',
        'GET /readyz',
        // The unmatched request: a server span has no route to name.
        'GET',
        'POST /api/admin/discover',
        'keyway.discovery',
        ...outbound.map((span) => span.name),
      ].sort(),
    );
    const sent = JSON.stringify(exports);
    expect(sent).not.toContain(ROOT_KEY);
    expect(sent).not.toContain(WRONG);
  }, 60_000);

  it('KEYWAY_LOG_LEVEL=warn logs no answered request, and an unknown level is refused by name', async () => {
    const broker = await startBrokerProcess({
      KEYWAY_ROOT_KEY: ROOT_KEY,
      KEYWAY_DATABASE: ':memory:',
      KEYWAY_LOG_LEVEL: 'warn',
    });
    const answers = await Promise.all([
      fetch(`${broker.url}/healthz`),
      fetch(`${broker.url}/api/admin/tokens`, { headers: { authorization: `Bearer ${WRONG}` } }),
    ]);
    expect(answers.map((answer) => answer.status)).toEqual([200, 401]);
    await broker.stop();
    expect(broker.output()).not.toContain('{');

    const refused = await promisify(execFile)(process.execPath, [await bundleCli(), 'serve'], {
      env: { PATH: process.env.PATH ?? '', PORT: '0', KEYWAY_LOG_LEVEL: 'loud' },
    }).then(
      () => ({ code: 0, stderr: '' }),
      (error: { code: number; stderr: string }) => error,
    );
    expect([refused.code, refused.stderr]).toEqual([
      1,
      'keyway: KEYWAY_LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, not "loud"\n',
    ]);
  }, 60_000);
});
