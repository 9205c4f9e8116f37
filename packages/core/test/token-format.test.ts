import { describe, expect, it } from 'vitest';
import {
  createRootKeyCheck,
  createTokenCodec,
  hashTokenId,
  TOKEN_PREFIX,
} from '../src/tokens/format.js';

const ROOT_KEY = 'root-key-for-tests-0123456789abcdef';
const id = (fill: number) => new Uint8Array(16).fill(fill);

describe('createTokenCodec()', () => {
  const codec = createTokenCodec(ROOT_KEY);

  it('issues kw1_ + 64 base64url characters and opens them to the id hash', () => {
    const { token, idHash } = codec.issue(id(7));
    expect(token).toMatch(/^kw1_[A-Za-z0-9_-]{64}$/);
    expect(idHash).toBe(hashTokenId(id(7)));
    expect(idHash).toMatch(/^[0-9a-f]{64}$/);
    expect(codec.open(token)).toBe(idHash);
  });

  it('is deterministic for one key and differs between keys', () => {
    expect(codec.issue(id(1)).token).toBe(createTokenCodec(ROOT_KEY).issue(id(1)).token);
    const other = createTokenCodec(`${ROOT_KEY}x`);
    const { token } = codec.issue(id(1));
    expect(other.issue(id(1)).token).not.toBe(token);
    expect(other.open(token)).toBeNull();
  });

  it('refuses a flipped character anywhere in the body', () => {
    const { token } = codec.issue(id(9));
    for (let i = TOKEN_PREFIX.length; i < token.length; i++) {
      const c = token[i] === 'A' ? 'B' : 'A';
      expect(codec.open(token.slice(0, i) + c + token.slice(i + 1))).toBeNull();
    }
  });

  it('refuses truncated, extended, re-spelled and wrong-prefix tokens', () => {
    const { token } = codec.issue(id(3));
    const body = token.slice(TOKEN_PREFIX.length);
    const standardBase64 = body.replace(/-/g, '+').replace(/_/g, '/');
    for (const bad of [
      token.slice(0, -1),
      `${token}A`,
      `${token}=`,
      `${token}==`,
      `KW1_${body}`,
      `kw2_${body}`,
      `kw1-${body}`,
      body,
      ` ${token}`,
      `${token} `,
      `kw1_${body.slice(0, 32)}\n${body.slice(32)}`,
    ]) {
      expect(codec.open(bad)).toBeNull();
    }
    // A body with a '-' or '_' re-spelled in the standard alphabet is refused.
    if (standardBase64 !== body) expect(codec.open(`kw1_${standardBase64}`)).toBeNull();
  });

  it('refuses a token whose tag belongs to another id', () => {
    const a = codec.issue(id(1)).token.slice(TOKEN_PREFIX.length);
    const b = codec.issue(id(2)).token.slice(TOKEN_PREFIX.length);
    // id of a, tag of b: 16 bytes of id are the first 21⅓ characters; swap whole 3-byte groups.
    expect(codec.open(`kw1_${a.slice(0, 20)}${b.slice(20)}`)).toBeNull();
  });
});

describe('createRootKeyCheck()', () => {
  it('accepts exactly the root key', () => {
    const isRoot = createRootKeyCheck(ROOT_KEY);
    expect(isRoot(ROOT_KEY)).toBe(true);
    expect(isRoot(`${ROOT_KEY} `)).toBe(false);
    expect(isRoot(ROOT_KEY.slice(0, -1))).toBe(false);
    expect(isRoot(ROOT_KEY.toUpperCase())).toBe(false);
    expect(isRoot('')).toBe(false);
  });
});
