import { describe, expect, it } from 'vitest';
import { observedOutbound } from '../src/outbound/observed.js';
import type { PipedAnswer, PipedInit } from '../src/outbound/piped.js';
import type { StreamingFetch } from '../src/outbound/stream.js';
import type { Observation } from '../src/telemetry/observation.js';

/** A streaming fetch whose piped requests answer 200 at once, each URL it was given kept. */
function recording() {
  const given: (string | URL)[] = [];
  const fetch = (async () => new Response(null)) as unknown as StreamingFetch;
  fetch.piped = async (input: string | URL, _init: PipedInit): Promise<PipedAnswer> => {
    given.push(input);
    return { status: 200, headers: {}, body: null };
  };
  const seen: Observation[] = [];
  const observed = observedOutbound(fetch, new Set(['127.0.0.1']), (o) => seen.push(o));
  const piped = observed.piped as NonNullable<StreamingFetch['piped']>;
  return { given, seen, piped };
}

const INIT: PipedInit = { method: 'POST', headers: {}, body: null };

describe('observedOutbound: the piped requests’ URLs', () => {
  it('parses an endpoint given as text once, and sends each call to it', async () => {
    const { given, seen, piped } = recording();
    await piped('http://127.0.0.1:8080/mcp?x=1', INIT);
    await piped('http://127.0.0.1:8080/mcp?x=1', INIT);
    await piped('https://mcp.example.com/mcp', INIT);
    const [first, second, third] = given as [URL, URL, URL];
    expect(first).toBeInstanceOf(URL);
    expect(first.href).toBe('http://127.0.0.1:8080/mcp?x=1');
    expect(second).toBe(first);
    expect(third.href).toBe('https://mcp.example.com/mcp');
    expect(seen).toEqual([
      { kind: 'outbound', hostClass: 'allowed', outcome: '2xx' },
      { kind: 'outbound', hostClass: 'allowed', outcome: '2xx' },
      { kind: 'outbound', hostClass: 'public', outcome: '2xx' },
    ]);
  });

  it('copies a URL the caller gives, every time', async () => {
    const { given, piped } = recording();
    const url = new URL('http://127.0.0.1:8080/mcp');
    await piped(url, INIT);
    await piped(url, INIT);
    const [first, second] = given as [URL, URL];
    expect(first).not.toBe(url);
    expect(second).not.toBe(first);
    expect(second.href).toBe(url.href);
  });

  it('hands text that is no URL on as it came, for the guarded fetch to refuse', async () => {
    const { given, seen, piped } = recording();
    await piped('not a url', INIT);
    await piped('not a url', INIT);
    expect(given).toEqual(['not a url', 'not a url']);
    expect(seen.map((o) => (o.kind === 'outbound' ? o.hostClass : o.kind))).toEqual([
      'public',
      'public',
    ]);
  });

  it('keeps the 1,024 endpoints parsed last, dropping the one parsed first', async () => {
    const { given, piped } = recording();
    for (let i = 0; i < 1024; i++) await piped(`http://127.0.0.1/${i}`, INIT);
    await piped('http://127.0.0.1/0', INIT);
    expect(given[1024]).toBe(given[0]);
    // The 1,025th endpoint finds the cache full: the first one parsed is dropped, no other.
    await piped('http://127.0.0.1/1024', INIT);
    await piped('http://127.0.0.1/2', INIT);
    expect(given[1026]).toBe(given[2]);
    await piped('http://127.0.0.1/0', INIT);
    expect(given[1027]).not.toBe(given[0]);
    expect((given[1027] as URL).href).toBe('http://127.0.0.1/0');
    await piped('http://127.0.0.1/0', INIT);
    expect(given[1028]).toBe(given[1027]);
  });
});
