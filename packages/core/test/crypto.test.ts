import { memoryStorage } from '@keyway/store-memory';
import { afterEach, describe, expect, it } from 'vitest';
import { rootPrincipal } from '../src/auth/principal.js';
import { createBroker } from '../src/broker/broker.js';
import { resolveBrokerConfig } from '../src/broker/config.js';
import { builtinCrypto, defaultCrypto, nobleCrypto } from '../src/platform/crypto.js';

const ROOT_KEY = 'crypto-test-root-key-0123456789-abcdefg';
const encode = (text: string) => new TextEncoder().encode(text);
const hexOf = (bytes: Uint8Array) =>
  Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('');
/** FIPS 180-2's first SHA-256 example. */
const data = encode('abc');
const hex = 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad';
/** RFC 4231 §4.3 (test case 2), HMAC-SHA-256. */
const TAG = {
  key: 'Jefe',
  data: 'what do ya want for nothing?',
  hex: '5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843',
};
/** node:crypto answers with Buffers, @noble/hashes with plain Uint8Arrays. */
const isBuffer = (bytes: Uint8Array) => bytes.constructor.name === 'Buffer';
/** The runtime's `process`, as core reaches it. */
const { process: runtime } = globalThis as { process?: { getBuiltinModule?: unknown } };
if (runtime === undefined) throw new Error('these tests run on Node');

/** builtinCrypto() on a node:crypto without the one-shot `hash` (Node before 20.12). */
function withoutOneShotHash() {
  const original = runtime?.getBuiltinModule as (id: string) => unknown;
  (runtime as { getBuiltinModule: unknown }).getBuiltinModule = (id: string) =>
    id === 'node:crypto' ? { ...(original(id) as object), hash: undefined } : original(id);
  try {
    return builtinCrypto();
  } finally {
    (runtime as { getBuiltinModule: unknown }).getBuiltinModule = original;
  }
}

describe.each([
  ['builtinCrypto() (node:crypto)', () => builtinCrypto(), hex],
  ['builtinCrypto() without crypto.hash (Node before 20.12)', withoutOneShotHash, hex],
  ['nobleCrypto', () => nobleCrypto, undefined],
])('%s', (_, make, sha256Hex) => {
  it('computes the standard vectors of SHA-256 and HMAC-SHA-256, with the key taken once', () => {
    const crypto = make();
    if (crypto === null) throw new Error('no node:crypto on Node');
    const key = encode(TAG.key);
    const tag = crypto.hmacSha256(key);
    key.fill(0); // the caller's array may change afterwards
    expect(hexOf(tag(encode(TAG.data)))).toBe(TAG.hex);
    expect(hexOf(tag(encode(TAG.data)))).toBe(TAG.hex);
    expect(hexOf(crypto.sha256(data))).toBe(hex);
    expect(crypto.sha256Hex?.(data)).toBe(sha256Hex);
  });

  it('returns a fresh array each time (a caller may keep or change it)', () => {
    const crypto = make();
    if (crypto === null) throw new Error('no node:crypto on Node');
    const first = crypto.sha256(data);
    first.fill(0);
    expect(hexOf(crypto.sha256(data))).toBe(hex);
  });
});

describe('the default crypto', () => {
  const original = runtime.getBuiltinModule;
  afterEach(() => {
    runtime.getBuiltinModule = original;
  });

  it('is node:crypto on Node, with no option (a Buffer is what node:crypto returns)', () => {
    expect(isBuffer(defaultCrypto().sha256(data))).toBe(true);
    const { crypto } = resolveBrokerConfig({ rootKey: ROOT_KEY, storage: memoryStorage() });
    expect(isBuffer(crypto.sha256(data))).toBe(true);
    expect(hexOf(crypto.sha256(data))).toBe(hex);
  });

  it('is @noble/hashes on a runtime without process.getBuiltinModule', () => {
    runtime.getBuiltinModule = undefined; // a runtime without it (a Worker, a browser)
    expect(builtinCrypto()).toBeNull();
    expect(defaultCrypto()).toBe(nobleCrypto);
    expect(isBuffer(defaultCrypto().sha256(data))).toBe(false);
  });

  it('verifies the tokens of a broker on @noble/hashes, and the other way round', async () => {
    // Instances of one deployment may differ (one on Node, one on an edge runtime): a token
    // minted by either must work on both.
    const storage = memoryStorage();
    const plain = createBroker({
      rootKey: ROOT_KEY,
      storage,
      purgeIntervalMs: false,
      crypto: nobleCrypto,
    });
    const native = createBroker({ rootKey: ROOT_KEY, storage, purgeIntervalMs: false });
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

  it('is refused at construction when a given one lacks a function', () => {
    expect(() =>
      createBroker({
        rootKey: ROOT_KEY,
        storage: memoryStorage(),
        crypto: { sha256: nobleCrypto.sha256 } as never,
      }),
    ).toThrow(
      new TypeError(
        'invalid broker configuration: "crypto" must have the functions sha256 and hmacSha256',
      ),
    );
  });
});
