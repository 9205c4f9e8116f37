import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fromBase64Url, toBase64Url } from '../src/platform/bytes.js';

/** The platform's `atob`/`btoa`, made strict: the canonical spelling only. */
function reference(text: string): Uint8Array | null {
  if (!/^[A-Za-z0-9_-]*$/.test(text) || text.length % 4 === 1) return null;
  const binary = atob(text.replace(/-/g, '+').replace(/_/g, '/'));
  const bytes = Uint8Array.from(binary, (char) => char.charCodeAt(0));
  const again = btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  return again === text ? bytes : null;
}

const base64urlChars = fc.constantFrom(
  ...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_+/=. é'.split(''),
);

describe('base64url', () => {
  it('decodes what it encodes, for every length', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 70 }), (bytes) => {
        expect(fromBase64Url(toBase64Url(bytes))).toEqual(bytes);
      }),
      { numRuns: 2000 },
    );
  });

  it('accepts exactly the canonical spellings, as a strict reference decoder does', () => {
    fc.assert(
      fc.property(fc.string({ unit: base64urlChars, maxLength: 12 }), (text) => {
        expect(fromBase64Url(text)).toEqual(reference(text));
      }),
      { numRuns: 5000 },
    );
  });

  it('refuses padding, other alphabets, a lone last character and non-zero trailing bits', () => {
    expect(fromBase64Url('AA')).toEqual(new Uint8Array([0]));
    expect(fromBase64Url('AB')).toBeNull(); // trailing bits set: a second spelling of [0]
    expect(fromBase64Url('AAE')).toEqual(new Uint8Array([0, 1]));
    expect(fromBase64Url('AAF')).toBeNull();
    expect(fromBase64Url('AAA=')).toBeNull();
    expect(fromBase64Url('A')).toBeNull();
    expect(fromBase64Url('+/8')).toBeNull();
    expect(fromBase64Url('-_8')).toEqual(new Uint8Array([0xfb, 0xff]));
    expect(fromBase64Url('QUJD\u00e9')).toBeNull();
    expect(fromBase64Url('')).toEqual(new Uint8Array(0));
  });

  it('decodes from an offset, leaving the prefix out', () => {
    expect(fromBase64Url('kw1_QUJD', 4)).toEqual(new TextEncoder().encode('ABC'));
    expect(fromBase64Url('kw1_QUJD', 3)).toBeNull();
  });
});
