import { memoryStorage } from '@keyway/store-memory';
import { worstRequests } from '@keyway/test-support/worst-bodies';
import { describe, expect, it } from 'vitest';
import { Harness } from './harness.js';
import { BASE } from './probe-support.js';

/*
 * A validation answer never grows with the body that caused it: a bounded number of
 * details, each of bounded length, whatever the body.
 */

describe('a validation answer never grows with the body that caused it', () => {
  /** Largest answer to any body, in bytes: 20 details of at most 300 characters each, and some. */
  const MAX_ANSWER = 16 * 1024;

  it.each(worstRequests().map((request) => [request.name, request] as const))(
    '%s: a 400 of bounded size',
    async (_name, request) => {
      const h = new Harness(memoryStorage(), { providerManagement: true, baseUrl: BASE });
      const reply = await h.call(request.method, request.path, { raw: request.body });
      expect(request.body.length).toBeGreaterThan(900_000);
      expect(reply.status).toBe(400);
      expect(['invalid_request', 'invalid_scope']).toContain(reply.body.error);
      expect(reply.text.length).toBeLessThanOrEqual(MAX_ANSWER);
      expect(reply.body.details?.length ?? 0).toBeLessThanOrEqual(20);
      await h.broker.close();
    },
  );

  it('refuses an object of more than 64 fields anywhere in a body before reading them', async () => {
    const h = new Harness(memoryStorage(), { providerManagement: true, baseUrl: BASE });
    const params = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`p${i}`, 'v']));
    const reply = await h.call('PUT', '/api/admin/providers/p', {
      body: {
        template: 'mcp',
        configuration: {
          resource_url: 'https://mcp.example.test/mcp',
          authorization_params: params,
        },
      },
    });
    expect(reply.status).toBe(400);
    expect(reply.body).toEqual({
      error: 'invalid_request',
      error_description: '"configuration.authorization_params" has more than 64 fields',
      details: [
        {
          path: 'configuration.authorization_params',
          message: '"configuration.authorization_params" has more than 64 fields',
        },
      ],
    });
    await h.broker.close();
  });

  it('refuses a list of more than 32 scopes as invalid_scope before reading its entries', async () => {
    const h = new Harness(memoryStorage());
    const reply = await h.call('POST', '/api/admin/tokens', {
      body: { name: 'n', scopes: Array(250_000).fill(1) },
    });
    expect(reply.status).toBe(400);
    expect(reply.body).toEqual({
      error: 'invalid_scope',
      error_description: '"scopes" has more than 32 entries; at most 32 are allowed',
      details: [
        { path: 'scopes', message: '"scopes" has more than 32 entries; at most 32 are allowed' },
      ],
    });
    await h.broker.close();
  });

  it('shows the first 19 issues and counts the rest', async () => {
    const h = new Harness(memoryStorage());
    const reply = await h.call('POST', '/api/admin/tokens', {
      body: { name: 'n', scopes: Array(30).fill(7) },
    });
    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('invalid_request');
    expect(reply.body.details).toEqual([
      ...Array.from({ length: 19 }, (_, i) => ({
        path: `scopes.${i}`,
        message: 'Invalid input: expected string, received number',
      })),
      { path: '', message: 'and 11 more issues' },
    ]);
    await h.broker.close();
  });

  it('cuts a message that quotes the caller’s text (unknown field names) at 300 characters', async () => {
    const h = new Harness(memoryStorage());
    const fields = Object.fromEntries(
      Array.from({ length: 40 }, (_, i) => [`field${i}_with_a_long_name`, 0]),
    );
    const reply = await h.call('POST', '/api/admin/tokens', {
      body: { name: 'n', scopes: ['a'], ...fields },
    });
    expect(reply.status).toBe(400);
    expect(reply.body.details).toHaveLength(1);
    const [detail] = reply.body.details;
    expect(detail.message).toHaveLength(300);
    expect(
      detail.message.startsWith(
        'Unrecognized keys: "field0_with_a_long_name", "field1_with_a_long_name"',
      ),
    ).toBe(true);
    expect(detail.message.endsWith('…')).toBe(true);
    expect(reply.body.error_description).toBe(detail.message);
    await h.broker.close();
  });
});
