import { createTestWorld, type TestWorld } from '@keyway/testing';
import { describe, expect, it } from 'vitest';
import { ROOT_KEY, storageFactories } from './harness.js';
import { APP, probePerTest, VICTIM } from './probe-support.js';

/*
 * User verification (docs/api.md §5): with verify_user, a consent link completes only once
 * the app confirms the flow for its own user.
 */

describe.each(storageFactories)('user verification ($name storage)', (factory) => {
  const suite = probePerTest(factory, { allowedRedirects: [APP] });

  describe('with verify_user, a consent link completes only for the app’s own user', () => {
    async function consentWithVerification(world: TestWorld, token = ROOT_KEY) {
      const started = await suite.h.call('POST', '/api/oauth/authorize/linear', {
        token,
        body: { connection_id: VICTIM, verify_user: true, redirect_to: `${APP}/done` },
      });
      expect(started.status).toBe(201);
      const back = new URL(world.consent(started.body.authorization_url));
      const reply = await suite.h.call('GET', `${back.pathname}${back.search}`, { token: null });
      expect(reply.status).toBe(302);
      const target = new URL(reply.headers.get('location') as string);
      expect(`${target.origin}${target.pathname}`).toBe(`${APP}/done`);
      expect(target.searchParams.get('connection_id')).toBe(VICTIM);
      expect(target.searchParams.get('status')).toBe('verification_required');
      expect(target.searchParams.get('error')).toBeNull();
      return target.searchParams.get('flow_id') as string;
    }

    async function providerFor(world: TestWorld) {
      await suite.harness(world.fetch);
      const created = await suite.h.call('PUT', '/api/admin/providers/linear', {
        body: { template: 'mcp', configuration: { resource_url: world.resourceUrl } },
      });
      expect(created.status).toBe(201);
    }

    it('leaves the connection pending after consent until the app confirms the flow', async () => {
      const world = createTestWorld({ now: () => suite.h.now });
      await providerFor(world);
      const flowId = await consentWithVerification(world);
      expect(flowId).toMatch(/^[A-Za-z0-9_-]{43}$/);
      const before = await suite.h.call('GET', `/api/oauth/connections/${VICTIM}`);
      expect(before.body.status).toBe('pending');
      expect((await suite.h.call('GET', `/api/oauth/credentials/${VICTIM}`)).status).toBe(409);
      expect(suite.events.map((e) => e.type)).not.toContain('connection.authorized');

      const confirmed = await suite.h.call('POST', '/api/oauth/verify', {
        body: { flow_id: flowId },
      });
      expect(confirmed.status).toBe(200);
      expect(confirmed.body.connection_id).toBe(VICTIM);
      expect(confirmed.body.status).toBe('active');
      const credentials = await suite.h.call('GET', `/api/oauth/credentials/${VICTIM}`);
      expect(credentials.status).toBe(200);
      expect(world.isValidAccessToken(credentials.body.access_token)).toBe(true);
      expect(suite.events.filter((e) => e.type === 'connection.authorized')).toEqual([
        expect.objectContaining({ actor: 'root', resource: VICTIM }),
      ]);
    });

    it('refuses another principal’s confirmation with 403, and the flow id is spent', async () => {
      const world = createTestWorld({ now: () => suite.h.now });
      await providerFor(world);
      const tenant = await suite.h.mint('bob-app', ['tenants/bob', 'linear']);
      const flowId = await consentWithVerification(world, tenant);
      const mallory = await suite.h.mint('mallory', ['tenants/mallory', 'linear']);
      const refused = await suite.h.call('POST', '/api/oauth/verify', {
        token: mallory,
        body: { flow_id: flowId },
      });
      expect(refused.status).toBe(403);
      expect(refused.body.error).toBe('insufficient_scope');
      const again = await suite.h.call('POST', '/api/oauth/verify', {
        token: tenant,
        body: { flow_id: flowId },
      });
      expect(again.status).toBe(400);
      expect(again.body.error).toBe('invalid_request');
      expect((await suite.h.call('GET', `/api/oauth/connections/${VICTIM}`)).body.status).toBe(
        'pending',
      );
    });

    it('answers 400 to a replayed, unknown or expired flow id', async () => {
      const world = createTestWorld({ now: () => suite.h.now });
      await providerFor(world);
      const flowId = await consentWithVerification(world);
      const first = await suite.h.call('POST', '/api/oauth/verify', { body: { flow_id: flowId } });
      expect(first.status).toBe(200);
      const replay = await suite.h.call('POST', '/api/oauth/verify', { body: { flow_id: flowId } });
      expect(replay.status).toBe(400);
      expect(replay.body).toEqual({
        error: 'invalid_request',
        error_description: 'this flow is unknown, expired or already used',
        details: [{ path: 'flow_id', message: 'this flow is unknown, expired or already used' }],
      });
      const unknown = await suite.h.call('POST', '/api/oauth/verify', {
        body: { flow_id: 'x'.repeat(43) },
      });
      expect(unknown.status).toBe(400);
      expect(unknown.body.error).toBe('invalid_request');

      const late = await consentWithVerification(world);
      suite.h.now += 11 * 60 * 1000;
      const expired = await suite.h.call('POST', '/api/oauth/verify', { body: { flow_id: late } });
      expect(expired.status).toBe(400);
      expect(expired.body.error).toBe('invalid_request');
      const malformed = await suite.h.call('POST', '/api/oauth/verify', { body: { flow: late } });
      expect(malformed.status).toBe(400);
      expect(malformed.body.error).toBe('invalid_request');
    });

    it('needs a redirect_to to ask for verification', async () => {
      const world = createTestWorld({ now: () => suite.h.now });
      await providerFor(world);
      const reply = await suite.h.call('POST', '/api/oauth/authorize/linear', {
        body: { connection_id: VICTIM, verify_user: true },
      });
      expect(reply.status).toBe(400);
      expect(reply.body.error).toBe('invalid_request');
      expect(reply.body.details).toEqual([
        {
          path: 'redirect_to',
          message: '"verify_user" needs a "redirect_to": the app confirms the flow there',
        },
      ]);
    });

    it('keeps an active connection on its previous tokens until a re-authorization is confirmed', async () => {
      const world = createTestWorld({ now: () => suite.h.now });
      await providerFor(world);
      expect((await suite.connect(world, VICTIM)).status).toBe(200);
      const previous = await suite.h.storedTokens(VICTIM);
      const flowId = await consentWithVerification(world);
      expect((await suite.h.storedTokens(VICTIM)).access_token).toBe(previous.access_token);
      expect((await suite.h.call('GET', `/api/oauth/connections/${VICTIM}`)).body.status).toBe(
        'active',
      );
      expect(
        (await suite.h.call('POST', '/api/oauth/verify', { body: { flow_id: flowId } })).status,
      ).toBe(200);
      const now = await suite.h.storedTokens(VICTIM);
      expect(now.access_token).not.toBe(previous.access_token);
      expect(now.generation).toBe(previous.generation + 1);
    });
  });
});
