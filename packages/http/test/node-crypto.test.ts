import { createHash, createHmac } from 'node:crypto';
import { createBroker, rootPrincipal } from '@keyway/core';
import { memoryStorage } from '@keyway/store-memory';
import { describe, expect, it } from 'vitest';
import { nodeCrypto } from '../src/index.js';

const ROOT_KEY = 'node-crypto-test-root-key-0123456789-abc';

describe('nodeCrypto', () => {
  it('computes SHA-256 and HMAC-SHA-256 as node:crypto does, with the key taken once', () => {
    const key = new Uint8Array(32).fill(7);
    const tag = nodeCrypto.hmacSha256(key);
    key.fill(0); // the caller's array may change afterwards
    const data = new TextEncoder().encode('an identifier');
    expect(Buffer.from(tag(data)).toString('hex')).toBe(
      createHmac('sha256', new Uint8Array(32).fill(7)).update(data).digest('hex'),
    );
    const hex = createHash('sha256').update(data).digest('hex');
    expect(Buffer.from(nodeCrypto.sha256(data)).toString('hex')).toBe(hex);
    expect(nodeCrypto.sha256Hex?.(data)).toBe(hex);
  });

  it('verifies the tokens of a broker on the default crypto, and the other way round', async () => {
    // Instances of one deployment may differ (one on Node, one on an edge runtime): a token
    // minted by either must work on both.
    const storage = memoryStorage();
    const plain = createBroker({ rootKey: ROOT_KEY, storage, purgeIntervalMs: false });
    const native = createBroker({
      rootKey: ROOT_KEY,
      storage,
      purgeIntervalMs: false,
      crypto: nodeCrypto,
    });
    const fromPlain = await plain.tokens.mint(rootPrincipal(), { name: 'a', scopes: ['x'] });
    const fromNative = await native.tokens.mint(rootPrincipal(), { name: 'b', scopes: ['y'] });
    expect(await native.authenticate(fromPlain.access_token)).toMatchObject({ name: 'a' });
    expect(await plain.authenticate(fromNative.access_token)).toMatchObject({ name: 'b' });
    expect(await native.authenticate(ROOT_KEY)).toEqual({ kind: 'root' });
    // A forged tag is refused by both.
    const forged = `${fromNative.access_token.slice(0, -2)}AA`;
    await expect(native.authenticate(forged)).rejects.toMatchObject({ code: 'invalid_token' });
    await expect(plain.authenticate(forged)).rejects.toMatchObject({ code: 'invalid_token' });
  });

  it('is refused at construction when it lacks a function', () => {
    expect(() =>
      createBroker({
        rootKey: ROOT_KEY,
        storage: memoryStorage(),
        crypto: { sha256: nodeCrypto.sha256 } as never,
      }),
    ).toThrow(
      new TypeError(
        'invalid broker configuration: "crypto" must have the functions sha256 and hmacSha256',
      ),
    );
  });
});
