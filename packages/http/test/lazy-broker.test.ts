import { type Broker, createBroker } from '@keyway/core';
import { memoryStorage } from '@keyway/store-memory';
import { describe, expect, it } from 'vitest';
import { createHandler } from '../src/index.js';

const ROOT_KEY = 'lazy-broker-root-key-0123456789-abcdefgh';

const tokensRequest = () =>
  new Request('http://keyway.test/api/admin/tokens', {
    headers: { authorization: `Bearer ${ROOT_KEY}` },
  });

describe('createHandler() with a function that makes the broker', () => {
  it('makes it on the first request only, once for concurrent requests', async () => {
    let made = 0;
    const handler = createHandler(() => {
      made++;
      return createBroker({ rootKey: ROOT_KEY, storage: memoryStorage(), purgeIntervalMs: false });
    });
    expect(made).toBe(0);
    const answers = await Promise.all([handler(tokensRequest()), handler(tokensRequest())]);
    expect(answers.map((answer) => answer.status)).toEqual([200, 200]);
    expect(made).toBe(1);
    expect((await handler(tokensRequest())).status).toBe(200);
    expect(made).toBe(1);
  });

  it('answers 500 while the factory fails, reports it, and tries again on the next request', async () => {
    const errors: unknown[] = [];
    let calls = 0;
    const handler = createHandler(
      async (): Promise<Broker> => {
        calls++;
        if (calls === 1) throw new TypeError('invalid broker configuration: "rootKey" is missing');
        return createBroker({
          rootKey: ROOT_KEY,
          storage: memoryStorage(),
          purgeIntervalMs: false,
        });
      },
      { onInternalError: (error) => errors.push(error) },
    );
    const failed = await handler(tokensRequest());
    expect(failed.status).toBe(500);
    expect(await failed.json()).toEqual({
      error: 'internal_error',
      error_description: 'the server failed to handle the request',
    });
    expect(errors).toHaveLength(1);
    expect((errors[0] as Error).message).toBe('invalid broker configuration: "rootKey" is missing');
    expect((await handler(tokensRequest())).status).toBe(200);
    expect(calls).toBe(2);
  });
});
