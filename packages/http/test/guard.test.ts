import { createBroker, rootPrincipal } from '@keyway/core';
import { memoryStorage } from '@keyway/store-memory';
import { describe, expect, it } from 'vitest';
import { guardErrorResponse, requireBrokerToken } from '../src/index.js';

const ROOT_KEY = 'guard-test-root-key-0123456789-abcdefghi';

describe('requireBrokerToken() for fetch-style routes', () => {
  const broker = createBroker({
    rootKey: ROOT_KEY,
    storage: memoryStorage(),
    purgeIntervalMs: false,
  });
  const guard = requireBrokerToken(broker, (request) =>
    decodeURIComponent(new URL(request.url).pathname.slice(1)),
  );
  const route = async (request: Request) => {
    try {
      const principal = await guard(request);
      return Response.json({ kind: principal.kind });
    } catch (error) {
      return guardErrorResponse(error, request);
    }
  };
  const get = (path: string, authorization?: string) =>
    route(
      new Request(`http://app.test/${path}`, {
        headers: authorization === undefined ? {} : { authorization },
      }),
    );

  it('answers with the principal of a covering token, and the API errors otherwise', async () => {
    const { access_token } = await broker.tokens.mint(rootPrincipal(), {
      name: 'alice',
      scopes: ['notes/alice'],
    });
    const own = await get('notes/alice/todo', `Bearer ${access_token}`);
    expect([own.status, await own.json()]).toEqual([200, { kind: 'token' }]);

    const other = await get('notes/bob/todo', `bearer ${access_token}`);
    expect(other.status).toBe(403);
    expect(other.headers.get('www-authenticate')).toBe(
      'Bearer realm="keyway", error="insufficient_scope"',
    );
    expect((await other.json()).error).toBe('insufficient_scope');

    const none = await get('notes/alice/todo');
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toBe('Bearer realm="keyway"');

    const malformed = await get('notes/alice/todo', 'Bearer two words');
    expect(malformed.status).toBe(401);
    expect(await malformed.json()).toEqual({
      error: 'invalid_token',
      error_description: 'the Authorization header is not "Bearer <token>"',
    });

    const badPath = await get('notes//alice', `Bearer ${access_token}`);
    expect(badPath.status).toBe(400);
    expect((await badPath.json()).error).toBe('invalid_path');
  });

  it('throws again what is not a refusal, so the app sees its own failures', () => {
    const failure = new Error('database down');
    expect(() => guardErrorResponse(failure)).toThrow(failure);
  });
});
