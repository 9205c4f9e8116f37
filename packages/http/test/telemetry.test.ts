import { memoryStorage } from '@keyway/store-memory';
import { parseMetrics, sampleOf as sample } from '@keyway/test-support/prometheus';
import { createTestWorld } from '@keyway/testing';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHandler, type RequestRecord } from '../src/index.js';
import { createMetrics } from '../src/metrics/index.js';
import { Harness, ROOT_KEY, START } from './harness.js';

/*
 * docs/api.md §16: request records (for logs and metrics), Prometheus metrics and
 * OpenTelemetry spans, each naming what happened and never a secret.
 */

const BASE = 'https://keyway.example.test';
const HOOK = 'https://hooks.example.test/keyway';
const WEBHOOK_SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const CONNECTION = 'acme/alice/linear';

describe('request records', () => {
  it('names the route template, operation, status, principal and client, never the path', async () => {
    const records: RequestRecord[] = [];
    const h = new Harness(memoryStorage());
    const handler = createHandler(h.broker, {
      basePath: '/keyway',
      onRequest: (record) => records.push(record),
    });
    const call = (path: string, authorization?: string, method = 'GET') =>
      handler(
        new Request(`http://keyway.test${path}`, {
          method,
          headers: authorization === undefined ? {} : { authorization },
        }),
        { clientAddress: '203.0.113.9' },
      );
    const minted = await h.mint('ci', ['acme']);

    const [startedAt, startedTick] = [Date.now(), performance.now()];
    const ok = await call('/keyway/api/admin/tokens/ci', `Bearer ${ROOT_KEY}`);
    const scoped = await call('/keyway/api/vault/secrets/acme/private/key', `Bearer ${minted}`);
    const refused = await call('/keyway/api/admin/tokens/ci', 'Bearer kw_wrong');
    const unknown = await call('/keyway/nowhere/acme', `Bearer ${ROOT_KEY}`);
    const wrongMethod = await call('/keyway/healthz', undefined, 'DELETE');
    const health = await call('/keyway/healthz');
    const [endedAt, elapsed] = [Date.now(), performance.now() - startedTick];

    expect([ok, scoped, refused, unknown, wrongMethod, health].map((r) => r.status)).toEqual([
      200, 404, 401, 404, 405, 200,
    ]);
    expect(records.map(({ time, requestId, durationMs, traceId, ...rest }) => rest)).toEqual([
      {
        method: 'GET',
        route: '/keyway/api/admin/tokens/{name}',
        operation: 'getToken',
        status: 200,
        principal: 'root',
        clientAddress: '203.0.113.9',
      },
      {
        method: 'GET',
        route: '/keyway/api/vault/secrets/{path}',
        operation: 'getSecret',
        status: 404,
        principal: 'token:ci',
        clientAddress: '203.0.113.9',
      },
      {
        method: 'GET',
        route: '/keyway/api/admin/tokens/{name}',
        operation: 'getToken',
        status: 401,
        principal: null,
        clientAddress: '203.0.113.9',
      },
      {
        method: 'GET',
        route: null,
        operation: null,
        status: 404,
        principal: 'root',
        clientAddress: '203.0.113.9',
      },
      {
        method: 'DELETE',
        route: '/keyway/healthz',
        operation: 'healthz',
        status: 405,
        principal: null,
        clientAddress: '203.0.113.9',
      },
      {
        method: 'GET',
        route: '/keyway/healthz',
        operation: 'healthz',
        status: 200,
        principal: null,
        clientAddress: '203.0.113.9',
      },
    ]);
    // Each answer names its record; ids differ; no span was recording.
    expect(ok.headers.get('x-request-id')).toBe(records[0]?.requestId);
    expect(new Set(records.map((record) => record.requestId)).size).toBe(6);
    for (const record of records) {
      expect(record.requestId).toMatch(/^[0-9a-f-]{36}$/);
      expect(record.traceId).toBeNull();
      // Within the calls that made them, whatever the machine's speed.
      expect(record.durationMs >= 0 && record.durationMs <= elapsed).toBe(true);
      expect(record.time >= startedAt && record.time <= endedAt).toBe(true);
    }
    expect(JSON.stringify(records)).not.toContain(minted);
    expect(JSON.stringify(records)).not.toContain('private');
    await h.broker.close();
  });

  it('answers the same when the hook throws, and sends no X-Request-Id without one', async () => {
    const h = new Harness(memoryStorage());
    const throwing = createHandler(h.broker, {
      onRequest: () => {
        throw new Error('the log is full');
      },
    });
    const request = () =>
      new Request('http://keyway.test/api/admin/tokens', {
        headers: { authorization: `Bearer ${ROOT_KEY}` },
      });
    const answered = await throwing(request());
    expect(answered.status).toBe(200);
    expect(answered.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const plain = await h.handler(request());
    expect(plain.status).toBe(200);
    expect(await plain.json()).toEqual(await answered.json());
    const quiet = createHandler(h.broker);
    expect((await quiet(request())).headers.get('x-request-id')).toBeNull();
    await h.broker.close();
  });
});

describe('metrics and spans over the whole connect flow', () => {
  const exporter = new InMemorySpanExporter();
  const contextManager = new AsyncLocalStorageContextManager();
  const metrics = createMetrics({ processMetrics: false });
  let h: Harness;
  let world: ReturnType<typeof createTestWorld>;
  /** Every secret the flow handled: none may be a metric, an attribute or a span name. */
  const secrets: string[] = [ROOT_KEY, WEBHOOK_SECRET, WEBHOOK_SECRET.slice(6)];

  beforeAll(async () => {
    let hooked: () => void = () => {};
    const delivered = new Promise<void>((resolve) => {
      hooked = resolve;
    });
    context.setGlobalContextManager(contextManager.enable());
    trace.setGlobalTracerProvider(
      new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
    );
    world = createTestWorld({ now: () => h?.now ?? START, rotateRefreshTokens: true });
    h = new Harness(memoryStorage(), {
      fetch: async (url, init) => {
        if (!url.startsWith(HOOK)) return world.fetch(url, init);
        hooked();
        return new Response(null, { status: 204 });
      },
      baseUrl: BASE,
      providerManagement: true,
      webhooks: [{ url: HOOK, secret: WEBHOOK_SECRET, types: ['connection.refreshed'] }],
      webhookPollIntervalMs: false,
      rateLimits: { auth: { limit: 2, windowSeconds: 60 } },
      observe: metrics.observe,
    });
    h.handler = createHandler(h.broker, { onRequest: metrics.onRequest });

    const put = await h.call('PUT', '/api/admin/providers/linear', {
      body: { template: 'mcp', configuration: { resource_url: world.resourceUrl } },
    });
    expect(put.status).toBe(201);
    const started = await h.call('POST', '/api/oauth/authorize/linear', {
      body: { connection_id: CONNECTION },
    });
    const back = new URL(world.consent(started.body.authorization_url));
    secrets.push(back.searchParams.get('code') as string, back.searchParams.get('state') as string);
    expect((await h.call('GET', `${back.pathname}${back.search}`, { token: null })).status).toBe(
      200,
    );
    const first = await h.storedTokens(CONNECTION);
    const refreshed = await h.call(
      'GET',
      `/api/oauth/credentials/${CONNECTION}?force_refresh=true`,
    );
    expect(refreshed.status).toBe(200);
    const second = await h.storedTokens(CONNECTION);
    secrets.push(
      first.access_token,
      first.refresh_token as string,
      second.access_token,
      second.refresh_token as string,
    );
    // The refresh's event goes out at once, after its commit.
    await delivered;
    expect((await h.call('DELETE', `/api/oauth/connections/${CONNECTION}`)).status).toBe(204);
    for (let i = 0; i < 3; i++) {
      await h.call('GET', '/api/admin/tokens', {
        token: 'kw_guess',
        clientAddress: '198.51.100.7',
      });
    }
    secrets.push(...world.secrets());
  });

  afterAll(async () => {
    await h.broker.close();
    trace.disable();
    context.disable();
  });

  it('counts requests, token checks, refreshes, deliveries, outbound requests and limits', async () => {
    const text = await metrics.text();
    const families = parseMetrics(text);
    expect(families.map((family) => [family.name, family.type]).sort()).toEqual([
      ['keyway_gateway_open_streams', 'GAUGE'],
      ['keyway_gateway_requests_total', 'COUNTER'],
      ['keyway_http_request_duration_seconds', 'HISTOGRAM'],
      ['keyway_http_requests_total', 'COUNTER'],
      ['keyway_outbound_requests_total', 'COUNTER'],
      ['keyway_portal_open_sessions', 'GAUGE'],
      ['keyway_portal_tool_calls_total', 'COUNTER'],
      ['keyway_rate_limited_total', 'COUNTER'],
      ['keyway_refreshes_total', 'COUNTER'],
      ['keyway_token_checks_total', 'COUNTER'],
      ['keyway_webhook_deliveries_total', 'COUNTER'],
    ]);
    const requests = (route: string, method: string, status: string) =>
      sample(families, 'keyway_http_requests_total', { route, method, status });
    expect(requests('/api/admin/providers/{id}', 'PUT', '201')).toBe(1);
    expect(requests('/api/oauth/authorize/{provider_id}', 'POST', '201')).toBe(1);
    expect(requests('/api/oauth/callback/{server_key}', 'GET', '200')).toBe(1);
    expect(requests('/api/oauth/credentials/{id}', 'GET', '200')).toBe(1);
    expect(requests('/api/oauth/connections/{id}', 'DELETE', '204')).toBe(1);
    // Two refused guesses, then the third is refused by the limit before it is checked.
    expect(requests('/api/admin/tokens', 'GET', '401')).toBe(2);
    expect(requests('/api/admin/tokens', 'GET', '429')).toBe(1);
    expect(sample(families, 'keyway_token_checks_total', { outcome: 'root' })).toBe(4);
    expect(sample(families, 'keyway_token_checks_total', { outcome: 'refused' })).toBe(2);
    expect(sample(families, 'keyway_token_checks_total', { outcome: 'limited' })).toBe(1);
    expect(sample(families, 'keyway_rate_limited_total', { limit: 'auth' })).toBe(1);
    expect(
      sample(families, 'keyway_refreshes_total', { provider: 'linear', outcome: 'refreshed' }),
    ).toBe(1);
    expect(sample(families, 'keyway_webhook_deliveries_total', { outcome: 'delivered' })).toBe(1);
    // Every request went to a public host (none is in allowedHosts), and all answered 2xx
    // but the MCP server's 401 challenge of the discovery probe.
    const outbound = families.find((family) => family.name === 'keyway_outbound_requests_total');
    expect(outbound?.metrics.map((metric) => metric.labels?.host_class)).toEqual(
      outbound?.metrics.map(() => 'public'),
    );
    const total = (outbound?.metrics ?? []).reduce((sum, metric) => sum + Number(metric.value), 0);
    expect(total).toBe(world.requests.length + 1);
    for (const secret of secrets) expect(text).not.toContain(secret);
  });

  it('traces each operation and each outbound OAuth request, with provider and outcome', () => {
    const spans = exporter.getFinishedSpans();
    const named = (name: string) => spans.filter((span) => span.name === name);
    const attributes = (span: ReadableSpan | undefined) => span?.attributes ?? {};
    expect(attributes(named('PUT /api/admin/providers/{id}')[0])).toEqual({
      'http.request.method': 'PUT',
      'http.route': '/api/admin/providers/{id}',
      'keyway.operation': 'putProvider',
      'http.response.status_code': 201,
    });
    expect(attributes(named('keyway.discovery')[0])).toEqual({
      'keyway.provider.id': 'linear',
      'keyway.outcome': 'ok',
    });
    expect(named('keyway.registration').map(attributes)).toEqual([
      { 'keyway.provider.id': 'linear', 'keyway.outcome': 'dynamic' },
    ]);
    expect(named('keyway.code_exchange').map(attributes)).toEqual([
      { 'keyway.provider.id': 'linear', 'keyway.outcome': 'ok' },
    ]);
    expect(named('keyway.refresh').map(attributes)).toEqual([
      { 'keyway.provider.id': 'linear', 'keyway.outcome': 'refreshed' },
    ]);
    expect(named('keyway.revocation').map(attributes)).toEqual([
      { 'keyway.provider.id': 'linear', 'keyway.outcome': 'revoked' },
    ]);
    expect(named('keyway.webhook_delivery').map(attributes)).toEqual([
      { 'keyway.webhook.attempt': 1, 'keyway.outcome': 'delivered' },
    ]);
    // The refresh is a child of its request's span, and its token request a child of it.
    const request = named('GET /api/oauth/credentials/{id}')[0];
    const refresh = named('keyway.refresh')[0];
    expect(refresh?.parentSpanContext?.spanId).toBe(request?.spanContext().spanId);
    const tokenRequest = spans.find(
      (span) => span.parentSpanContext?.spanId === refresh?.spanContext().spanId,
    );
    expect(tokenRequest?.name).toBe('POST');
    expect(tokenRequest?.attributes).toEqual({
      'http.request.method': 'POST',
      'server.address': new URL(world.issuer).hostname,
      'server.port': 443,
      'url.scheme': 'https',
      'keyway.host_class': 'public',
      'http.response.status_code': 200,
      'keyway.outcome': '2xx',
    });
    const limited = named('GET /api/admin/tokens').at(-1);
    expect(limited?.attributes['http.response.status_code']).toBe(429);
    // Nothing a span carries is a secret: names, attributes, status messages, events.
    const everything = JSON.stringify(
      spans.map((span) => [span.name, span.attributes, span.status, span.events]),
    );
    for (const secret of secrets) expect(everything).not.toContain(secret);
    expect(everything).not.toContain(CONNECTION);
  });
});

describe('request spans and the SDK', () => {
  it('answers without a span until an SDK is registered, then traces the next request', async () => {
    const records: RequestRecord[] = [];
    const h = new Harness(memoryStorage());
    const handler = createHandler(h.broker, { onRequest: (record) => records.push(record) });
    const call = () =>
      handler(
        new Request('http://keyway.test/api/admin/tokens', {
          headers: { authorization: `Bearer ${ROOT_KEY}` },
        }),
      );
    const exporter = new InMemorySpanExporter();
    try {
      expect((await call()).status).toBe(200);
      // Registered after the handler was made: used from the next request on.
      trace.setGlobalTracerProvider(
        new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
      );
      expect((await call()).status).toBe(200);
      const [span, ...more] = exporter.getFinishedSpans();
      expect(more).toEqual([]);
      expect(span?.name).toBe('GET /api/admin/tokens');
      expect(span?.attributes).toEqual({
        'http.request.method': 'GET',
        'http.route': '/api/admin/tokens',
        'keyway.operation': 'listTokens',
        'http.response.status_code': 200,
      });
      expect(records.map(({ route, status, traceId }) => [route, status, traceId])).toEqual([
        ['/api/admin/tokens', 200, null],
        ['/api/admin/tokens', 200, span?.spanContext().traceId],
      ]);
    } finally {
      trace.disable();
      await h.broker.close();
    }
  });
});
