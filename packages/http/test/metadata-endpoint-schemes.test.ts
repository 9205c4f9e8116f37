import { createTestWorld } from '@keyway/testing';
import { describe, expect, it } from 'vitest';
import { Harness, storageFactories } from './harness.js';
import { APP, BASE, type ProviderState, probePerTest, VICTIM } from './probe-support.js';

/*
 * Every endpoint read from authorization-server metadata is scheme-checked before use
 * (https, or http on a host the configuration allows), stored ones included.
 */

describe.each(storageFactories)('endpoints from metadata ($name storage)', (factory) => {
  const suite = probePerTest(factory, { allowedRedirects: [APP] });

  describe('every endpoint from authorization-server metadata is scheme-checked', () => {
    it.each([
      ['authorization_endpoint', 'javascript:alert(document.domain)//', 'must use https'],
      ['authorization_endpoint', 'data:text/html,<script>alert(1)</script>', 'must use https'],
      [
        'authorization_endpoint',
        'http://auth.example.test/oauth/authorize',
        'must use https (plain http only for allowed hosts)',
      ],
      ['token_endpoint', 'https://user:pw@auth.example.test/token', 'must not contain user info'],
      ['token_endpoint', 'https://auth.example.test/token#frag', 'must not have a fragment'],
      ['registration_endpoint', 'ftp://auth.example.test/register', 'must use https'],
      [
        'revocation_endpoint',
        'http://169.254.169.254/latest',
        'must use https (plain http only for allowed hosts)',
      ],
      ['revocation_endpoint', 'https://127.0.0.1/revoke', 'names an address that is not allowed'],
      ['jwks_uri', 'file:///etc/passwd', 'must use https'],
      ['jwks_uri', 'not a url', 'is not an absolute URL'],
    ])('refuses %s %s with 422 naming the field', async (field, value, problem) => {
      const world = createTestWorld({
        now: () => suite.h.now,
        serverMetadataOverrides: { [field]: value },
      });
      await suite.harness(world.fetch);
      const reply = await suite.h.call('PUT', '/api/admin/providers/linear', {
        body: { template: 'mcp', configuration: { resource_url: world.resourceUrl } },
      });
      expect(reply.status).toBe(422);
      expect(reply.body.error).toBe('unsupported_authorization_server');
      // The field and the value as the server published it, so an operator sees the fault.
      const note = `"${field}" ${JSON.stringify(value)} ${problem}`;
      expect(reply.body.error_description).toBe(
        `the authorization server does not meet what Keyway requires (${note})`,
      );
      expect(reply.body.details.at(-1)).toEqual({
        step: 'requirements',
        url: null,
        status: null,
        ok: false,
        note,
      });
      expect(await suite.h.storage.getProvider('linear')).toBeNull();
      expect(world.stats.registrations).toBe(0);
    });

    it('refuses to hand out a consent address built from a stored endpoint that is not https', async () => {
      const world = createTestWorld({ now: () => suite.h.now });
      await suite.harness(world.fetch);
      await suite.h.call('PUT', '/api/admin/providers/linear', {
        body: { template: 'mcp', configuration: { resource_url: world.resourceUrl } },
      });
      // A record written before endpoints were checked.
      const record = await suite.h.storage.getProvider('linear');
      const state = structuredClone(record?.state) as unknown as ProviderState;
      state.authorization_server.authorization_endpoint = 'javascript:alert(1)//';
      await suite.h.storage.compareAndSetProvider(
        { ...(record as NonNullable<typeof record>), state: state as never, version: 2 },
        1,
      );
      const reply = await suite.h.call('POST', '/api/oauth/authorize/linear', {
        body: { connection_id: VICTIM },
      });
      expect(reply.status).toBe(422);
      expect(reply.body).toEqual({
        error: 'unsupported_authorization_server',
        error_description: 'authorization_endpoint must use https',
        details: [
          { path: 'authorization_endpoint', message: 'authorization_endpoint must use https' },
        ],
      });
      expect(reply.text).not.toContain('javascript');
    });

    it('accepts plain http endpoints on a host the configuration allows', async () => {
      const world = createTestWorld({
        now: () => suite.h.now,
        resourceUrl: 'http://localhost:9/mcp',
        issuer: 'http://localhost:9',
      });
      suite.h = new Harness(await factory.create(), {
        fetch: world.fetch,
        baseUrl: BASE,
        providerManagement: true,
        allowedHosts: ['localhost'],
      });
      const reply = await suite.h.call('PUT', '/api/admin/providers/linear', {
        body: { template: 'mcp', configuration: { resource_url: world.resourceUrl } },
      });
      expect(reply.status).toBe(201);
      expect(reply.body.authorization_server.token_endpoint).toBe('http://localhost:9/oauth/token');
    });
  });
});
