import type { KeywayEvent } from '@keyway/core';
import { createTestWorld } from '@keyway/testing';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  captureConsole,
  Harness,
  type Reply,
  ROOT_KEY,
  START,
  storageFactories,
} from './harness.js';

const BASE = 'https://keyway.example.test';
const HOOK = 'https://hooks.example.test/keyway';
const WEBHOOK_SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

describe.each(storageFactories)('no secret leaks out of connections ($name storage)', (factory) => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('keeps tokens, client secrets, verifiers and states out of every response, event, log line and error', async () => {
    const logged: string[] = [];
    captureConsole(logged);
    const events: KeywayEvent[] = [];
    let h!: Harness;
    const world = createTestWorld({
      now: () => h?.now ?? START,
      rotateRefreshTokens: true,
      challengeScope: 'read',
    });
    /** What webhook endpoints received: headers and bodies. */
    const delivered: string[] = [];
    h = new Harness(await factory.create(), {
      fetch: async (url, init) => {
        if (!url.startsWith(HOOK)) return world.fetch(url, init);
        delivered.push(`${JSON.stringify(init.headers)}\n${String(init.body)}`);
        return new Response(null, { status: 204 });
      },
      webhooks: [{ url: HOOK, secret: WEBHOOK_SECRET }],
      webhookPollIntervalMs: false,
      baseUrl: BASE,
      providerManagement: true,
      allowedRedirects: ['https://app.example.test'],
      onEvent: (event) => {
        events.push(event);
      },
    });
    /** Answers that may carry a secret by design: the consent URL (state) and credentials. */
    const byDesign: Reply[] = [];
    const checked: Reply[] = [];
    const call = async (
      method: string,
      path: string,
      options: Parameters<Harness['call']>[2] = {},
      designed = false,
    ) => {
      const reply = await h.call(method, path, options);
      (designed ? byDesign : checked).push(reply);
      return reply;
    };
    const back = async (url: string) => {
      const { pathname, search } = new URL(url);
      return call('GET', `${pathname}${search}`, { token: null });
    };

    await call('PUT', '/api/admin/providers/linear', {
      body: { template: 'mcp', configuration: { resource_url: world.resourceUrl } },
    });
    const connect = async (
      id: string,
      decision: 'approve' | 'deny' = 'approve',
      redirect = false,
    ) => {
      const started = await call(
        'POST',
        '/api/oauth/authorize/linear',
        {
          body: {
            connection_id: id,
            ...(redirect ? { redirect_to: 'https://app.example.test/' } : {}),
          },
        },
        true,
      );
      return back(world.consent(started.body.authorization_url, decision));
    };
    // Success, denial, a redirect, a token endpoint failure, a replay.
    const url = world.consent(
      (
        await call(
          'POST',
          '/api/oauth/authorize/linear',
          { body: { connection_id: 'acme/a' } },
          true,
        )
      ).body.authorization_url,
    );
    await back(url);
    await back(url); // replay
    await connect('acme/b', 'deny');
    await connect('acme/c', 'approve', true);
    world.set({ failures: { token: 'server_error' } });
    await connect('acme/d');
    world.set({ failures: {} });
    // Credentials, refresh, a failed refresh, invalid_grant.
    await call('GET', '/api/oauth/credentials/acme/a', {}, true);
    await call('GET', '/api/oauth/credentials/acme/a?force_refresh=true', {}, true);
    world.set({ failures: { token: 'server_error' } });
    h.now = START + 4 * 3_600_000;
    await call('GET', '/api/oauth/credentials/acme/a');
    world.set({ failures: {} });
    await call('GET', '/api/oauth/connections');
    await call('GET', '/api/oauth/connections/acme/a');
    await call('DELETE', '/api/oauth/connections/acme/c');
    await call('GET', '/api/oauth/credentials/acme/b');
    // Broker tokens and vault secrets: their events, too, carry none.
    const minted = await call(
      'POST',
      '/api/admin/tokens',
      { body: { name: 'ci', scopes: ['acme'] } },
      true,
    );
    const value = 'vault-value-4f1c9a7e-do-not-leak';
    await call('PUT', '/api/vault/secrets/acme/api-key', { body: { value } });
    await call('GET', '/api/vault/secrets/acme/api-key', {}, true);
    await call('PATCH', '/api/admin/tokens/ci', { body: { scopes: ['acme/a'] } });
    await call('DELETE', '/api/admin/tokens/ci');
    const audit = await call('GET', '/api/admin/audit?limit=500');
    expect(audit.body.items.length).toBeGreaterThan(15);
    // A round the broker woke for the last events may still hold a lease on one of them
    // (deliverDue skips a leased delivery): rounds until every one arrived, 1 s at most.
    for (let round = 0; round < 100 && delivered.length < audit.body.items.length; round++) {
      await h.broker.events.deliverDue();
      if (delivered.length < audit.body.items.length) await new Promise((r) => setTimeout(r, 10));
    }
    expect(delivered.length).toBe(audit.body.items.length);
    await call('GET', '/api/admin/webhooks/deliveries?limit=500');

    const secrets = [
      ...world.secrets(),
      minted.body.access_token as string,
      value,
      ROOT_KEY,
      WEBHOOK_SECRET,
      WEBHOOK_SECRET.slice('whsec_'.length),
    ];
    expect(secrets.length).toBeGreaterThan(10);
    const texts = [
      ...checked.map((reply) => `${[...reply.headers].join('\n')}\n${reply.text}`),
      JSON.stringify(events),
      ...delivered,
      ...logged,
      // The request records a request log writes (docs/api.md §16).
      ...h.requestLog,
      ...h.errors.map((error) => `${(error as Error).message} ${(error as Error).stack}`),
    ];
    expect(h.requestLog.length).toBe(checked.length + byDesign.length);
    for (const text of texts) {
      for (const secret of secrets) expect(text).not.toContain(secret);
    }
    // The answers that carry one by design carry only what they must.
    for (const reply of byDesign) {
      const allowed = reply.body.authorization_url
        ? [new URL(reply.body.authorization_url).searchParams.get('state')]
        : [reply.body.access_token, reply.body.value];
      for (const secret of secrets) {
        if (!allowed.includes(secret)) expect(reply.text).not.toContain(secret);
      }
    }
    const raw = await factory.rawText(h.storage);
    if (raw !== null) for (const secret of secrets) expect(raw).not.toContain(secret);
    await h.broker.close();
  });
});
