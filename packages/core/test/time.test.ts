import { describe, expect, it } from 'vitest';
import { isoTime, isoTimeOrNull } from '../src/contract/time.js';

describe('isoTime', () => {
  it('writes each instant as its own, whatever was written before it', () => {
    // Instants written are remembered (a token's expiry is written on every hand-out): a
    // repeat answers the same text, and another instant never answers a remembered one.
    const instants = [0, 1_795_586_769_123, 0, 0, 1, 1_795_586_769_123, -1];
    expect(instants.map(isoTime)).toEqual([
      '1970-01-01T00:00:00.000Z',
      '2026-11-25T06:06:09.123Z',
      '1970-01-01T00:00:00.000Z',
      '1970-01-01T00:00:00.000Z',
      '1970-01-01T00:00:00.001Z',
      '2026-11-25T06:06:09.123Z',
      '1969-12-31T23:59:59.999Z',
    ]);
    expect(isoTimeOrNull(null)).toBeNull();
  });

  it('writes every instant right past the number it remembers', () => {
    // More instants than are kept, twice over, each checked against Date's own writing.
    const start = 1_795_586_769_123;
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 5000; i += 1) {
        const ms = start + i * 86_399_999;
        expect(isoTime(ms)).toBe(new Date(ms).toISOString());
      }
    }
    expect(isoTime(-62_198_755_200_000)).toBe('-000001-01-01T00:00:00.000Z');
    expect(isoTime(-0)).toBe('1970-01-01T00:00:00.000Z');
  });

  it('refuses an instant that is not one, each time', () => {
    expect(() => isoTime(Number.NaN)).toThrow(RangeError);
    expect(() => isoTime(Number.NaN)).toThrow(RangeError);
    expect(() => isoTime(8.64e15 + 1)).toThrow(RangeError);
  });
});
