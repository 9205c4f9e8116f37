import { createTestWorld, type TestWorld } from '@keyway/testing';
import { describe, expect, it } from 'vitest';
import {
  connectThroughConsent,
  Harness,
  harnessPerTest,
  ROOT_KEY,
  storageFactories,
} from './harness.js';

/*
 * Inject-only stays inject-only (docs/api.md §13, docs/security.md "agent tokens"): only the
 * root key lets an inject-only provider hand out tokens again, and a connection authorized
 * while its provider was inject-only keeps its tokens in the broker until it is authorized
 * again. The attack was written first: an agent token covering the connection and the
 * provider (what the gateway's consent elicitation needs) PUT `"hand_out": true` and read
 * the upstream token from `/api/oauth/credentials`.
 */

const BASE = 'https://keyway.example.test';
const CONNECTION = 'acme/users/alice/linear';

describe.each(storageFactories)('inject-only connections ($name storage)', (factory) => {
  const slot = harnessPerTest();

  async function setUp(): Promise<{ h: Harness; world: TestWorld; agent: string }> {
    const h = new Harness(await factory.create(), {
      baseUrl: BASE,
      providerManagement: true,
      fetch: (input, init) => world.fetch(input, init),
    });
    slot.h = h;
    const world = createTestWorld({ now: () => h.now });
    const put = await h.call('PUT', '/api/admin/providers/linear', {
      body: {
        template: 'mcp',
        hand_out: false,
        configuration: { resource_url: world.resourceUrl },
      },
    });
    expect(put.status, put.text).toBe(201);
    expect((await connectThroughConsent(h, world, CONNECTION)).status).toBe(200);
    const agent = await h.mint('agent', [CONNECTION, 'linear']);
    return { h, world, agent };
  }

  const provider = (h: Harness, world: TestWorld, token: string, extra: object = {}) =>
    h.call('PUT', '/api/admin/providers/linear', {
      token,
      body: { template: 'mcp', ...extra, configuration: { resource_url: world.resourceUrl } },
    });

  it('refuses a broker token that turns hand-outs on, whether it says so or leaves it out', async () => {
    const { h, world, agent } = await setUp();
    const message =
      'provider "linear" is inject-only: only the root key may let it hand out tokens (send "hand_out": false to keep it so)';
    for (const extra of [{ hand_out: true }, {}]) {
      const refused = await provider(h, world, agent, extra);
      expect(refused.status).toBe(403);
      expect(refused.body).toEqual({
        error: 'insufficient_scope',
        error_description: message,
        details: [{ path: 'hand_out', message }],
      });
    }
    const credentials = await h.call('GET', `/api/oauth/credentials/${CONNECTION}`, {
      token: agent,
    });
    expect(credentials.status).toBe(403);
    expect(credentials.body.error).toBe('credentials_not_exportable');
    expect(credentials.text).not.toContain((await h.storedTokens(CONNECTION)).access_token);
    // Keeping it inject-only is still the manager's to do.
    const kept = await provider(h, world, agent, { hand_out: false, label: 'Linear' });
    expect(kept.status, kept.text).toBe(200);
    expect(kept.body.hand_out).toBe(false);
    const audit = await h.call('GET', '/api/admin/audit?type=credentials.issued');
    expect(audit.body.items).toEqual([]);
  });

  it('keeps a connection authorized while inject-only sealed until it is authorized again', async () => {
    const { h, world } = await setUp();
    const opened = await provider(h, world, ROOT_KEY, { hand_out: true });
    expect(opened.status, opened.text).toBe(200);
    expect(opened.body.hand_out).toBe(true);
    const sealed = await h.call('GET', `/api/oauth/credentials/${CONNECTION}`);
    expect(sealed.status).toBe(403);
    expect(sealed.body).toEqual({
      error: 'credentials_not_exportable',
      error_description: `connection "${CONNECTION}" was authorized while its provider was inject-only: its tokens never leave the broker until it is authorized again; call the server through the gateway ({base}/mcp/${CONNECTION})`,
    });
    // Its refreshes keep it sealed.
    const forced = await h.call('GET', `/api/oauth/credentials/${CONNECTION}?force_refresh=true`);
    expect(forced.status).toBe(403);
    expect((await h.storedTokens(CONNECTION)).party.inject_only).toBe(true);
    // A new consent, given while the provider hands out, releases it.
    expect((await connectThroughConsent(h, world, CONNECTION)).status).toBe(200);
    const released = await h.call('GET', `/api/oauth/credentials/${CONNECTION}`);
    expect(released.status, released.text).toBe(200);
    expect(world.isValidAccessToken(released.body.access_token)).toBe(true);
  });
});
