import { describe, expect, it } from 'vitest';
import { isDescendantName, parseLifetime, parseTokenName } from '../src/auth/delegation.js';

const invalidName = expect.objectContaining({ code: 'invalid_name' });
const invalidLifetime = expect.objectContaining({ code: 'invalid_lifetime' });

describe('parseTokenName()', () => {
  it('accepts dotted labels of A-Z a-z 0-9 _ -', () => {
    for (const name of ['alice', 'alice.bot', 'A-b_9.x.y', 'a'.repeat(64), '_', '-']) {
      expect(parseTokenName(name)).toBe(name);
    }
  });

  it('accepts 255 characters and refuses 256', () => {
    const label = 'a'.repeat(63);
    const name255 = [label, label, label, label].join('.'); // 4*63 + 3 = 255
    expect(parseTokenName(name255)).toBe(name255);
    expect(() => parseTokenName(`${name255}a`)).toThrow(invalidName);
  });

  it('refuses empty labels, long labels and other characters', () => {
    for (const bad of [
      '',
      '.',
      'a.',
      '.a',
      'a..b',
      'a'.repeat(65),
      'a b',
      'a/b',
      'é',
      'a*',
      'a:b',
    ]) {
      expect(() => parseTokenName(bad)).toThrow(invalidName);
    }
    expect(() => parseTokenName(7)).toThrow(invalidName);
    expect(() => parseTokenName('alice..bot')).toThrow('label 2 of "alice..bot" is empty');
  });
});

describe('isDescendantName()', () => {
  it('is true only for dotted descendants', () => {
    expect(isDescendantName('alice', 'alice.bot')).toBe(true);
    expect(isDescendantName('alice', 'alice.bot.x')).toBe(true);
    expect(isDescendantName('alice.bot', 'alice.bot.x')).toBe(true);
    expect(isDescendantName('alice', 'alice')).toBe(false);
    expect(isDescendantName('alice', 'alice2')).toBe(false);
    expect(isDescendantName('alice', 'alice-bot')).toBe(false);
    expect(isDescendantName('alice', 'bob')).toBe(false);
    expect(isDescendantName('alice', 'alice.')).toBe(false);
    expect(isDescendantName('alice.bot', 'alice')).toBe(false);
  });
});

describe('parseLifetime()', () => {
  it('defaults to 3600 and accepts the bounds 60 and 2592000', () => {
    expect(parseLifetime(undefined)).toBe(3600);
    expect(parseLifetime(60)).toBe(60);
    expect(parseLifetime(2_592_000)).toBe(2_592_000);
  });

  it('refuses 59, 2592001, 1.5, "60", null, NaN and Infinity', () => {
    for (const bad of [
      59,
      2_592_001,
      1.5,
      60.5,
      '60',
      null,
      Number.NaN,
      Number.POSITIVE_INFINITY,
      -60,
    ]) {
      expect(() => parseLifetime(bad)).toThrow(invalidLifetime);
    }
  });
});
