import { createBroker, rootPrincipal } from '@keyway/core';
import { memoryStorage } from '@keyway/store-memory';
import { startWebhookReceiver } from '@keyway/test-support/webhooks';
import { afterEach, describe, expect, it } from 'vitest';
import { ROOT_KEY } from './harness.js';

const SECRET = 'whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD';
const HOUR = 3_600_000;

async function until(condition: () => boolean | Promise<boolean>, what: string) {
  for (let waited = 0; !(await condition()); waited += 10) {
    if (waited > 10_000) throw new Error(`waited 10 s for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('webhooks to a real receiver on loopback', () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0)) await close();
  });

  /** A broker whose clock stands at now and moves only when the test says. */
  async function setup(url: string, extra: Record<string, unknown> = {}) {
    const start = Date.now();
    let offset = 0;
    const background: unknown[] = [];
    const broker = createBroker({
      rootKey: ROOT_KEY,
      storage: memoryStorage(),
      now: () => start + offset,
      allowedHosts: ['127.0.0.1'],
      purgeIntervalMs: false,
      webhookPollIntervalMs: false,
      webhooks: [{ url, secret: SECRET }],
      onBackgroundError: (error) => background.push(error),
      ...extra,
    });
    closers.push(() => broker.close());
    const deliveries = async (status: 'pending' | 'delivered' | 'failed') =>
      (await broker.events.deliveries(rootPrincipal(), { status })).items;
    return {
      broker,
      background,
      deliveries,
      advance: (ms: number) => {
        offset += ms;
      },
    };
  }

  it('signs every delivery so the library verifies it; three tries of one event carry one webhook-id', async () => {
    const hook = await startWebhookReceiver({
      secret: SECRET,
      status: (_, nth) => (nth <= 2 ? 503 : 204),
    });
    closers.push(hook.close);
    const { broker, background, deliveries, advance } = await setup(hook.url);
    await broker.tokens.mint(rootPrincipal(), { name: 'ci', scopes: ['acme'] });
    // The first attempt starts at once, after the commit.
    await until(() => hook.received.length === 1, 'the first attempt');
    await until(async () => (await deliveries('pending'))[0]?.attempts === 1, 'its outcome');
    const [first] = await deliveries('pending');
    expect(first).toMatchObject({ attempts: 1, last_status: 503, last_error: 'HTTP 503' });
    // Not due again before 5 s.
    advance(4_000);
    expect(await broker.events.deliverDue()).toBe(0);
    advance(1_000);
    expect(await broker.events.deliverDue()).toBe(1);
    advance(59_000);
    expect(await broker.events.deliverDue()).toBe(0);
    advance(1_000);
    expect(await broker.events.deliverDue()).toBe(1);
    expect(hook.received).toHaveLength(3);

    const [event] = (await broker.events.list(rootPrincipal())).items;
    expect(event?.type).toBe('token.created');
    for (const delivery of hook.received) {
      expect(delivery.verified).toBe(true);
      expect(delivery.id).toBe(event?.id);
      expect(delivery.event).toEqual(event);
    }
    // Each attempt is signed at its own time.
    expect(new Set(hook.received.map((r) => r.timestamp)).size).toBe(3);
    const [done] = await deliveries('delivered');
    expect(done).toMatchObject({
      event,
      url: hook.url,
      status: 'delivered',
      attempts: 3,
      next_attempt_at: null,
      last_status: 204,
      last_error: null,
    });
    expect(await deliveries('pending')).toEqual([]);
    expect(background).toEqual([]);
  });

  it('retries on the schedule for 3 days, then lists the delivery as failed', async () => {
    const hook = await startWebhookReceiver({ secret: SECRET, status: () => 500 });
    closers.push(hook.close);
    const { broker, deliveries, advance } = await setup(hook.url);
    await broker.secrets.put(rootPrincipal(), 'acme/key', { value: 'v' });
    await until(() => hook.received.length === 1, 'the first attempt');
    await until(async () => (await deliveries('pending'))[0]?.attempts === 1, 'its outcome');
    const waits = [5_000, 60_000, 600_000, HOUR, 6 * HOUR, 12 * HOUR, 12 * HOUR, 12 * HOUR];
    waits.push(12 * HOUR, 12 * HOUR);
    for (const wait of waits) {
      advance(wait - 1);
      expect(await broker.events.deliverDue()).toBe(0);
      advance(1);
      expect(await broker.events.deliverDue()).toBe(1);
    }
    // 11 attempts; the next would be more than 3 days after the event.
    expect(hook.received).toHaveLength(11);
    advance(12 * HOUR);
    expect(await broker.events.deliverDue()).toBe(0);
    expect(await deliveries('pending')).toEqual([]);
    const [failed] = await deliveries('failed');
    expect(failed).toMatchObject({
      status: 'failed',
      attempts: 11,
      next_attempt_at: null,
      last_status: 500,
      last_error: 'HTTP 500',
    });
    expect(failed?.event.type).toBe('secret.created');
    expect(new Set(hook.received.map((r) => r.id))).toEqual(new Set([failed?.event.id]));
  });

  it('sends only the types an endpoint asks for, and records a refused address as a failed attempt', async () => {
    const hook = await startWebhookReceiver({ secret: SECRET, status: () => 200 });
    closers.push(hook.close);
    const { broker, deliveries } = await setup(hook.url, {
      allowedHosts: [],
      webhooks: [
        { url: 'https://hooks.example.invalid/a', secret: SECRET, types: ['token.deleted'] },
      ],
    });
    await broker.tokens.mint(rootPrincipal(), { name: 'ci', scopes: ['acme'] });
    expect(await deliveries('pending')).toEqual([]);
    await broker.tokens.delete(rootPrincipal(), 'ci');
    await until(async () => (await deliveries('pending'))[0]?.attempts === 1, 'an attempt');
    const [pending] = await deliveries('pending');
    expect(pending?.event.type).toBe('token.deleted');
    expect(pending?.last_status).toBe(null);
    expect(['network', 'blocked_address']).toContain(pending?.last_error);
  });

  it('refuses a bad webhook configuration with a TypeError naming it', () => {
    const base = { rootKey: ROOT_KEY, storage: memoryStorage() };
    expect(() =>
      createBroker({ ...base, webhooks: [{ url: 'http://hooks.example/a', secret: SECRET }] }),
    ).toThrow(/"webhooks\.0\.url"/);
    expect(() =>
      createBroker({
        ...base,
        webhooks: [{ url: 'https://hooks.example/a', secret: 'not-a-secret' }],
      }),
    ).toThrow(/whsec_/);
    expect(() =>
      createBroker({
        ...base,
        webhooks: [
          { url: 'https://hooks.example/a', secret: SECRET, types: ['token.renamed' as never] },
        ],
      }),
    ).toThrow(TypeError);
    expect(() => createBroker({ ...base, auditRetentionDays: 0 })).toThrow(
      '"auditRetentionDays" must be an integer from 1 to 3650',
    );
  });
});
