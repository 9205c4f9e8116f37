import { afterEach, describe, expect, it, vi } from 'vitest';
import { POOL_BYTES, pooledRandomBytes } from '../src/platform/random.js';

afterEach(() => {
  vi.restoreAllMocks();
});

/** Counts the calls into the runtime's CSPRNG and keeps what each returned. */
function watchRuntime() {
  const original = crypto.getRandomValues.bind(crypto);
  const filled: Uint8Array[] = [];
  const spy = vi.spyOn(crypto, 'getRandomValues').mockImplementation(((array: Uint8Array) => {
    const result = original(array);
    filled.push(Uint8Array.from(result));
    return result;
  }) as typeof crypto.getRandomValues);
  return { calls: () => spy.mock.calls.length, filled };
}

describe('the default random source', () => {
  it('calls the runtime once per pool, not once per draw', () => {
    const runtime = watchRuntime();
    const random = pooledRandomBytes();
    for (let i = 0; i < 1000; i++) expect(random(6)).toHaveLength(6);
    // 6,000 bytes: the first pool and one more (a draw never straddles two pools).
    expect(runtime.calls()).toBe(2);
    expect(runtime.filled.map((pool) => pool.length)).toEqual([POOL_BYTES, POOL_BYTES]);
  });

  it('hands out each byte of the runtime once, in order, and draws a new pool when one is short', () => {
    const runtime = watchRuntime();
    const random = pooledRandomBytes();
    const first = random(POOL_BYTES - 4);
    const second = random(10);
    const third = random(4);
    const [pool1, pool2] = runtime.filled as [Uint8Array, Uint8Array];
    expect(runtime.filled).toHaveLength(2);
    expect(first).toEqual(pool1.subarray(0, POOL_BYTES - 4));
    // The 4 bytes left in the first pool are dropped, never handed out.
    expect(second).toEqual(pool2.subarray(0, 10));
    expect(third).toEqual(pool2.subarray(10, 14));
  });

  it('gives the caller its own bytes and keeps none of them in the pool', () => {
    const random = pooledRandomBytes();
    const a = random(32);
    const copy = Uint8Array.from(a);
    a.fill(0xff);
    const b = random(32);
    expect(b).not.toEqual(a);
    expect(random(32)).not.toEqual(copy);
    // A draw is a copy, not a view of the pool the next draws come from.
    expect(a.buffer.byteLength).toBe(32);
  });

  it('draws a request larger than the pool directly, at its size', () => {
    const runtime = watchRuntime();
    const random = pooledRandomBytes();
    expect(random(POOL_BYTES + 1)).toHaveLength(POOL_BYTES + 1);
    expect(runtime.filled.map((pool) => pool.length)).toEqual([POOL_BYTES + 1]);
  });

  it('never repeats a value across pools', () => {
    const random = pooledRandomBytes();
    const seen = new Set<string>();
    // 3,000 draws of 6 bytes span five pools; 48 random bits collide with odds near 1e-8.
    for (let i = 0; i < 3000; i++) seen.add(random(6).join(','));
    expect(seen.size).toBe(3000);
  });
});
