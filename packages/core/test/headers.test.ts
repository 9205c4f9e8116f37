import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { withHeaders } from '../src/platform/headers.js';

describe('withHeaders', () => {
  it('copies the base, then the extra entries; a name in both keeps its place and takes the new value', () => {
    const base = { 'content-type': 'application/json', 'cache-control': 'no-store' };
    const copy = withHeaders(base, { 'x-request-id': 'r1', 'cache-control': 'private' });
    expect(Object.entries(copy)).toEqual([
      ['content-type', 'application/json'],
      ['cache-control', 'private'],
      ['x-request-id', 'r1'],
    ]);
    expect(base).toEqual({ 'content-type': 'application/json', 'cache-control': 'no-store' });
    expect(copy).not.toBe(base);
  });

  it('copies own entries only, never inherited ones', () => {
    const inherited = Object.create({ 'x-inherited': 'yes' }) as Record<string, string>;
    inherited.accept = 'text/plain';
    expect(withHeaders(inherited, {})).toEqual({ accept: 'text/plain' });
    expect(Object.keys(withHeaders({}, inherited))).toEqual(['accept']);
  });

  it('gives copies of the same names one hidden class, at a call site that has seen many shapes', () => {
    // In a child Node with V8's natives syntax: the call site is fed records of several
    // shapes, spread copies among them, as a handler's replies are; then two copies of the same
    // names must share their map. An object spread fails this on Node 20 (each copy had a
    // map of its own: docs/benchmarks.md, #51).
    const script = `
      const withHeaders = ${withHeaders.toString()};
      const base = { 'content-type': 'application/json', 'cache-control': 'no-store' };
      for (let i = 0; i < 8; i++) {
        const other = { ...base };
        other['x-shape-' + i] = 'v';
        withHeaders(other, { authorization: 'Bearer t' });
      }
      const first = withHeaders(base, { 'x-request-id': 'a' });
      const second = withHeaders(base, { 'x-request-id': 'b' });
      console.log(JSON.stringify({ same: %HaveSameMap(first, second), fast: %HasFastProperties(first) }));
    `;
    const out = execFileSync(process.execPath, ['--allow-natives-syntax', '-e', script], {
      encoding: 'utf8',
    });
    expect(JSON.parse(out)).toEqual({ same: true, fast: true });
  });
});
