import { memoryStorage } from '@keyway/store-memory';
import { parseMetrics } from '@keyway/test-support/prometheus';
import { createTestWorld } from '@keyway/testing';
import { describe, expect, it } from 'vitest';
import { createMetrics } from '../src/metrics/index.js';
import { connectThroughConsent, Harness, harnessPerTest } from './harness.js';

/*
 * Metrics stay bounded whatever tenants name (docs/api.md §16, docs/operations.md): a label a
 * tenant chooses (a provider id) takes at most `maxLabelValues` values per metric, the rest
 * counted as `other`, and a deleted provider's series go with it. The attack was written
 * first: 120 providers created and deleted by one scoped token left 120 series of
 * `keyway_gateway_requests_total`.
 */

const BASE = 'https://keyway.example.test';

/** The `provider` label of every sample of a metric. */
async function providersOf(metrics: { text(): Promise<string> }, name: string) {
  const family = parseMetrics(await metrics.text()).find((f) => f.name === name);
  return (family?.metrics ?? []).map((metric) => metric.labels?.provider);
}

describe('metrics labelled with tenant-chosen names', () => {
  const slot = harnessPerTest();

  it('drop a deleted provider’s series, so creating and deleting providers grows nothing', async () => {
    const metrics = createMetrics({ processMetrics: false });
    const world = createTestWorld({ now: () => h.now });
    const h = new Harness(memoryStorage(), {
      baseUrl: BASE,
      providerManagement: true,
      fetch: world.fetch,
      observe: metrics.observe,
    });
    slot.h = h;
    const tenant = await h.mint('tenant', ['tenants/eve']);
    for (let i = 0; i < 12; i++) {
      const id = `tenants/eve/p${i}`;
      const put = await h.call('PUT', `/api/admin/providers/${id}`, {
        token: tenant,
        body: { template: 'mcp', configuration: { resource_url: world.resourceUrl } },
      });
      expect(put.status, put.text).toBe(201);
      const connection = `tenants/eve/c${i}`;
      expect((await connectThroughConsent(h, world, connection, id)).status).toBe(200);
      const call = await h.call('POST', `/mcp/${connection}`, {
        token: tenant,
        body: { jsonrpc: '2.0', id: 1, method: 'ping' },
        headers: { accept: 'application/json, text/event-stream' },
      });
      expect(call.status).toBe(200);
      const forced = await h.call('GET', `/api/oauth/credentials/${connection}?force_refresh=true`);
      expect(forced.status).toBe(200);
      expect(await providersOf(metrics, 'keyway_gateway_requests_total')).toEqual([id]);
      expect(await providersOf(metrics, 'keyway_refreshes_total')).toEqual([id]);
      expect((await h.call('DELETE', `/api/oauth/connections/${connection}`)).status).toBe(204);
      const deleted = await h.call('DELETE', `/api/admin/providers/${id}`, { token: tenant });
      expect(deleted.status).toBe(204);
      await expect.poll(() => providersOf(metrics, 'keyway_gateway_requests_total')).toEqual([]);
      await expect.poll(() => providersOf(metrics, 'keyway_refreshes_total')).toEqual([]);
    }
  });

  it('count values past maxLabelValues as other', async () => {
    const metrics = createMetrics({ processMetrics: false, maxLabelValues: 3 });
    for (const provider of ['a', 'b', 'c', 'd', 'e', 'a']) {
      metrics.observe({ kind: 'gateway', provider, outcome: '2xx' });
    }
    const family = parseMetrics(await metrics.text()).find(
      (f) => f.name === 'keyway_gateway_requests_total',
    );
    expect(
      family?.metrics.map((metric) => [metric.labels?.provider, Number(metric.value)]),
    ).toEqual([
      ['a', 2],
      ['b', 1],
      ['c', 1],
      ['other', 2],
    ]);
    // A deleted provider frees its place: the next new value gets a series of its own.
    metrics.observe({ kind: 'provider_deleted', provider: 'b' });
    await expect
      .poll(async () => (await providersOf(metrics, 'keyway_gateway_requests_total')).length)
      .toBe(3);
    metrics.observe({ kind: 'gateway', provider: 'f', outcome: '2xx' });
    expect(await providersOf(metrics, 'keyway_gateway_requests_total')).toEqual([
      'a',
      'c',
      'other',
      'f',
    ]);
    expect(() => createMetrics({ processMetrics: false, maxLabelValues: 0 })).toThrow(
      '"maxLabelValues" must be a positive integer',
    );
  });
});
