import { describe, expect, it } from 'vitest';
import { isoTime, isoTimeOrNull } from '../src/contract/time.js';

describe('isoTime', () => {
  it('writes each instant as its own, whatever was written before it', () => {
    // The last instant is remembered (a token's expiry is written on every hand-out): a
    // repeat answers the same text, and another instant never answers the remembered one.
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

  it('refuses an instant that is not one, each time', () => {
    expect(() => isoTime(Number.NaN)).toThrow(RangeError);
    expect(() => isoTime(Number.NaN)).toThrow(RangeError);
    expect(() => isoTime(8.64e15 + 1)).toThrow(RangeError);
  });
});
