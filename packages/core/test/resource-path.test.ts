import { describe, expect, it } from 'vitest';
import {
  checkedResourcePath,
  compareCodePoints,
  parseResourcePath,
  resourcePathFromUrl,
} from '../src/auth/resource-path.js';
import { KeywayError } from '../src/contract/errors.js';

function caught(fn: () => unknown): KeywayError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(KeywayError);
    return err as KeywayError;
  }
  throw new Error('expected a KeywayError');
}

function ruleOf(fn: () => unknown): unknown {
  const err = caught(fn);
  expect(err.code).toBe('invalid_path');
  return err.details?.[0]?.rule;
}

describe('parseResourcePath()', () => {
  it('accepts a plain slash-delimited path unchanged', () => {
    expect(parseResourcePath('acme/users/alice/linear')).toBe('acme/users/alice/linear');
    expect(parseResourcePath('a')).toBe('a');
  });

  it('normalizes to NFC, so decomposed and composed spellings are one resource', () => {
    const decomposed = 'acme/cafe\u0301';
    const composed = 'acme/caf\u00e9';
    expect(parseResourcePath(decomposed)).toBe(composed);
    expect(parseResourcePath(composed)).toBe(composed);
  });

  it('counts the length in code points after NFC: 512 pass, 513 fail', () => {
    expect(parseResourcePath('a'.repeat(512))).toHaveLength(512);
    expect(ruleOf(() => parseResourcePath('a'.repeat(513)))).toBe('length');
    // 512 astral characters are 1024 UTF-16 units but 512 code points.
    expect(parseResourcePath('😀'.repeat(512))).toHaveLength(1024);
    expect(ruleOf(() => parseResourcePath('😀'.repeat(513)))).toBe('length');
    // 600 decomposed é compose to 600 code points: too long; 512 of them fit.
    expect(parseResourcePath('e\u0301'.repeat(512))).toBe('\u00e9'.repeat(512));
    expect(ruleOf(() => parseResourcePath('e\u0301'.repeat(513)))).toBe('length');
    expect(ruleOf(() => parseResourcePath('a'.repeat(100_000)))).toBe('length');
  });

  it('refuses the empty path and every empty segment', () => {
    expect(ruleOf(() => parseResourcePath(''))).toBe('length');
    expect(ruleOf(() => parseResourcePath('/a'))).toBe('empty_segment');
    expect(ruleOf(() => parseResourcePath('a/'))).toBe('empty_segment');
    expect(ruleOf(() => parseResourcePath('a//b'))).toBe('empty_segment');
  });

  it('names the broken rule and the segment in the message', () => {
    expect(() => parseResourcePath('a//b')).toThrow('segment 2 of "a//b" is empty');
  });

  it('refuses dot segments but not dots inside a segment', () => {
    expect(ruleOf(() => parseResourcePath('a/./b'))).toBe('dot_segment');
    expect(ruleOf(() => parseResourcePath('a/..'))).toBe('dot_segment');
    expect(ruleOf(() => parseResourcePath('..'))).toBe('dot_segment');
    expect(parseResourcePath('a/.b/c..d/...')).toBe('a/.b/c..d/...');
  });

  it('refuses backslashes, control characters and lone surrogates', () => {
    expect(ruleOf(() => parseResourcePath('a\\b'))).toBe('backslash');
    for (const c of ['\u0000', '\u001f', '\n', '\u007f', '\u0085', '\u009f']) {
      expect(ruleOf(() => parseResourcePath(`a${c}b`))).toBe('control_character');
    }
    expect(parseResourcePath('a\u00a0b')).toBe('a\u00a0b');
    expect(ruleOf(() => parseResourcePath('a\ud800b'))).toBe('lone_surrogate');
    expect(ruleOf(() => parseResourcePath('a\udc00'))).toBe('lone_surrogate');
  });

  it('refuses encoded path structure however many times encoded, in any case', () => {
    for (const bad of ['a%2Fb', 'a%2fb', 'a%5Cb', 'a%5cb', 'a%2Eb', '%2e', 'a%252Fb', 'a%25252e']) {
      expect(ruleOf(() => parseResourcePath(bad))).toBe('encoded_structure');
    }
    expect(parseResourcePath('100%/a%20b/%41')).toBe('100%/a%20b/%41');
  });

  it('refuses segments made only of stars, which are reserved for scopes', () => {
    expect(ruleOf(() => parseResourcePath('a/**'))).toBe('reserved_segment');
    expect(ruleOf(() => parseResourcePath('*'))).toBe('reserved_segment');
    expect(parseResourcePath('a/*b/b*')).toBe('a/*b/b*');
  });

  it('refuses a value that is not a string', () => {
    expect(ruleOf(() => parseResourcePath(42))).toBe('type');
    expect(ruleOf(() => parseResourcePath(null))).toBe('type');
  });

  it('names the field in details when given one', () => {
    expect(caught(() => parseResourcePath('a//b', 'connection_id')).details).toEqual([
      { path: 'connection_id', rule: 'empty_segment', message: 'segment 2 of "a//b" is empty' },
    ]);
  });
});

describe('resourcePathFromUrl()', () => {
  it('decodes each segment exactly once', () => {
    expect(resourcePathFromUrl('acme/users/alice')).toBe('acme/users/alice');
    expect(resourcePathFromUrl('acme/caf%C3%A9')).toBe('acme/café');
    expect(resourcePathFromUrl('a%20b/%25')).toBe('a b/%');
  });

  it('never reads %2F as a separator, nor %252F once decoded', () => {
    expect(ruleOf(() => resourcePathFromUrl('a%2Fb'))).toBe('encoded_structure');
    expect(ruleOf(() => resourcePathFromUrl('a%252Fb'))).toBe('encoded_structure');
    expect(ruleOf(() => resourcePathFromUrl('a%2e%2e'))).toBe('encoded_structure');
  });

  it('refuses malformed percent-encoding and dot segments', () => {
    expect(ruleOf(() => resourcePathFromUrl('a%E0%A4'))).toBe('percent_encoding');
    expect(ruleOf(() => resourcePathFromUrl('a%zz'))).toBe('percent_encoding');
    expect(ruleOf(() => resourcePathFromUrl('a/../b'))).toBe('dot_segment');
    expect(ruleOf(() => resourcePathFromUrl('a/%00'))).toBe('control_character');
  });

  it('normalizes decoded text to NFC', () => {
    expect(resourcePathFromUrl('cafe%CC%81')).toBe('café');
  });
});

describe('compareCodePoints()', () => {
  it('orders by code point, putting astral characters after U+FFFF', () => {
    const values = ['\u{1F600}', '\uFF5E', 'b', 'a', 'ab', ''];
    expect([...values].sort(compareCodePoints)).toEqual([
      '',
      'a',
      'ab',
      'b',
      '\uFF5E',
      '\u{1F600}',
    ]);
    // The default sort puts the emoji (surrogates 0xD83D…) before U+FF5E.
    expect([...values].sort()[4]).toBe('\u{1F600}');
  });
});

describe('the shortcut for plain paths', () => {
  /** The answer, or the rule of the refusal. */
  const outcome = (parse: () => string) => {
    try {
      return `ok ${parse()}`;
    } catch (error) {
      return `refused ${JSON.stringify((error as KeywayError).details)}`;
    }
  };

  it('answers exactly as the rule-by-rule check, for 20,000 paths made of the tricky parts', () => {
    const parts = [
      'a',
      'Z',
      '9',
      '-',
      '.',
      '..',
      '/',
      '//',
      '%',
      '%2e',
      '%2F',
      '*',
      '\\',
      ' ',
      '~',
      'é',
      'e\u0301',
      '\u0001',
      '@',
      ':',
    ];
    // A fixed linear congruential sequence: the same 20,000 paths on every run.
    let seed = 27;
    const next = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    let plain = 0;
    for (let i = 0; i < 20_000; i++) {
      let path = '';
      const length = 1 + next(8);
      for (let j = 0; j < length; j++) path += parts[next(parts.length)];
      if (i % 1000 === 0) path = 'a/'.repeat(300).slice(0, 513 - (i % 3));
      const fast = outcome(() => parseResourcePath(path));
      expect(fast, path).toBe(outcome(() => checkedResourcePath(path)));
      if (/^[\x21-\x7e]+$/.test(path) && fast.startsWith('ok')) plain++;
    }
    // The shortcut was taken often enough to mean something.
    expect(plain).toBeGreaterThan(2_000);
  });

  it('leaves to the full check what it cannot vouch for', () => {
    expect(parseResourcePath('acme/users/alice')).toBe('acme/users/alice');
    expect(parseResourcePath('cafe\u0301/x')).toBe('café/x');
    expect(outcome(() => parseResourcePath('a/./b'))).toContain('dot_segment');
    expect(outcome(() => parseResourcePath('a/..'))).toContain('dot_segment');
    expect(outcome(() => parseResourcePath('../a'))).toContain('dot_segment');
    expect(outcome(() => parseResourcePath('a/.../b'))).toBe('ok a/.../b');
    expect(outcome(() => parseResourcePath('a/**'))).toContain('reserved_segment');
    expect(outcome(() => parseResourcePath(`${'a'.repeat(512)}`))).toBe(`ok ${'a'.repeat(512)}`);
    expect(outcome(() => parseResourcePath(`${'a'.repeat(513)}`))).toContain('"rule":"length"');
  });
});
