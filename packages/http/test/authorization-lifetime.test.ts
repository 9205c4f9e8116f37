import { createTestWorld } from '@keyway/testing';
import { describe, expect, it } from 'vitest';
import { ROOT_KEY, storageFactories } from './harness.js';
import { probePerTest, VICTIM } from './probe-support.js';

/*
 * An authorization lives no longer than the broker token and the connection it was
 * started for (docs/api.md §5).
 */

describe.each(storageFactories)('authorization lifetime ($name storage)', (factory) => {
  const suite = probePerTest(factory);

  describe('an authorization lives no longer than the token and the connection it was started for', () => {
    async function started(token: string, connectionId = VICTIM) {
      const reply = await suite.h.call('POST', '/api/oauth/authorize/linear', {
        token,
        body: { connection_id: connectionId },
      });
      expect(reply.status).toBe(201);
      return reply.body.authorization_url as string;
    }
    const REVOKED =
      'the broker token that started this authorization was revoked, expired or narrowed meanwhile: start it again';

    async function setup() {
      const world = createTestWorld({ now: () => suite.h.now });
      await suite.harness(world.fetch);
      await suite.h.call('PUT', '/api/admin/providers/linear', {
        body: { template: 'mcp', configuration: { resource_url: world.resourceUrl } },
      });
      const app = await suite.h.mint('app', ['tenants', 'linear']);
      return { world, app };
    }

    it('refuses the callback of an authorization whose token was revoked meanwhile, exchanging nothing', async () => {
      const { world, app } = await setup();
      const url = await started(app);
      expect((await suite.h.call('DELETE', '/api/admin/tokens/app')).status).toBe(204);
      const back = new URL(world.consent(url));
      const reply = await suite.h.call('GET', `${back.pathname}${back.search}`, { token: null });
      expect(reply.text).toContain('Not connected');
      expect(world.stats.codeExchanges).toBe(0);
      const view = await suite.h.call('GET', `/api/oauth/connections/${VICTIM}`);
      expect(view.body.status).toBe('error');
      expect(view.body.error).toEqual({ code: 'invalid_request', description: REVOKED });
    });

    it('refuses it when the token was narrowed away from the connection, and completes it while the token still covers it', async () => {
      const { world, app } = await setup();
      const narrowed = await started(app);
      const kept = await started(app, 'tenants/carol/linear');
      const patch = await suite.h.call('PATCH', '/api/admin/tokens/app', {
        body: { scopes: ['tenants/carol', 'linear'] },
      });
      expect(patch.status).toBe(200);
      const refused = new URL(world.consent(narrowed));
      expect(
        (await suite.h.call('GET', `${refused.pathname}${refused.search}`, { token: null })).text,
      ).toContain('Not connected');
      const completed = new URL(world.consent(kept));
      expect(
        (await suite.h.call('GET', `${completed.pathname}${completed.search}`, { token: null }))
          .text,
      ).toContain('Connected');
      expect(world.stats.codeExchanges).toBe(1);
      expect(
        (await suite.h.call('GET', '/api/oauth/connections/tenants/carol/linear')).body.status,
      ).toBe('active');
    });

    it('gives a connection deleted (and created again) meanwhile nothing of the old authorization', async () => {
      const { world } = await setup();
      const old = await started(ROOT_KEY);
      expect((await suite.h.call('DELETE', `/api/oauth/connections/${VICTIM}`)).status).toBe(204);
      const fresh = await started(ROOT_KEY);
      const stale = new URL(world.consent(old));
      const reply = await suite.h.call('GET', `${stale.pathname}${stale.search}`, { token: null });
      expect(reply.text).toContain('Not connected');
      expect(reply.text).toContain('connection_deleted');
      expect(world.stats.codeExchanges).toBe(0);
      expect((await suite.h.call('GET', `/api/oauth/connections/${VICTIM}`)).body.status).toBe(
        'pending',
      );
      const back = new URL(world.consent(fresh));
      expect(
        (await suite.h.call('GET', `${back.pathname}${back.search}`, { token: null })).text,
      ).toContain('Connected');
      expect(world.stats.codeExchanges).toBe(1);
    });
    it('completes an authorization started before another one of the same connection completed', async () => {
      const { world, app } = await setup();
      const first = await started(app);
      const second = await started(app);
      for (const url of [second, first]) {
        const back = new URL(world.consent(url));
        expect(
          (await suite.h.call('GET', `${back.pathname}${back.search}`, { token: null })).text,
        ).toContain('Connected');
      }
      expect(world.stats.codeExchanges).toBe(2);
    });
  });
});
