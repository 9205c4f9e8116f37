import { describe, expect, it } from 'vitest';
import { setBounded } from '../src/platform/bounded.js';

describe('setBounded', () => {
  it('keeps at most the limit, dropping the entry set first', () => {
    const map = new Map<string, number>();
    for (const [key, value] of [
      ['a', 1],
      ['b', 2],
      ['c', 3],
      ['d', 4],
    ] as const) {
      setBounded(map, key, value, 3);
    }
    expect([...map]).toEqual([
      ['b', 2],
      ['c', 3],
      ['d', 4],
    ]);
  });

  it('counts a key set again as new, and never drops an entry to replace one kept', () => {
    const map = new Map([
      ['a', 1],
      ['b', 2],
      ['c', 3],
    ]);
    setBounded(map, 'a', 10, 3);
    expect([...map]).toEqual([
      ['b', 2],
      ['c', 3],
      ['a', 10],
    ]);
    setBounded(map, 'd', 4, 3);
    expect([...map]).toEqual([
      ['c', 3],
      ['a', 10],
      ['d', 4],
    ]);
  });

  it('brings a map over its limit back to it', () => {
    const map = new Map([
      ['a', 1],
      ['b', 2],
      ['c', 3],
      ['d', 4],
    ]);
    setBounded(map, 'e', 5, 2);
    expect([...map]).toEqual([
      ['d', 4],
      ['e', 5],
    ]);
  });
});
