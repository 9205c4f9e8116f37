import { memoryStorage } from '@keyway/store-memory';
import { describe, expect, it, vi } from 'vitest';
import { rootPrincipal } from '../src/auth/principal.js';
import { createBroker } from '../src/broker/broker.js';
import { KeywayError } from '../src/contract/errors.js';
import { rootKeyWeakness } from '../src/tokens/root-key.js';

const ROOT_KEY = 'core-test-root-key-0123456789abcdefghij';

describe('createBroker()', () => {
  it('refuses a pattern among allowedHosts: "*" would allow nothing', () => {
    expect(() =>
      createBroker({ rootKey: ROOT_KEY, storage: memoryStorage(), allowedHosts: ['*'] }),
    ).toThrow(
      new TypeError(
        'invalid broker configuration: "allowedHosts" takes host names, not patterns: "*" would allow nothing',
      ),
    );
  });

  it('refuses a root key under 32 characters with a TypeError that does not echo it', () => {
    const short = 'x'.repeat(31);
    expect(() => createBroker({ rootKey: short, storage: memoryStorage() })).toThrow(TypeError);
    try {
      createBroker({ rootKey: short, storage: memoryStorage() });
    } catch (err) {
      expect((err as Error).message).toContain('"rootKey" must be at least 32 characters');
      expect((err as Error).message).not.toContain(short);
    }
  });

  it('refuses a root key with the token prefix, spaces or non-ASCII', () => {
    for (const rootKey of [`kw1_${'a'.repeat(40)}`, `${'a'.repeat(32)} b`, `${'a'.repeat(32)}é`]) {
      expect(() => createBroker({ rootKey, storage: memoryStorage() })).toThrow(TypeError);
    }
  });

  it('refuses a storage that lacks the interface', () => {
    expect(() => createBroker({ rootKey: ROOT_KEY, storage: {} as never })).toThrow(
      /"storage" must implement the Storage interface/,
    );
  });
});

describe('root keys of low entropy are refused', () => {
  it.each([
    ['a'.repeat(32), 'it repeats a shorter part of itself'],
    ['abcd'.repeat(8), 'it repeats a shorter part of itself'],
    ['0123456789abcdef0123456789abcdef', 'it repeats a shorter part of itself'],
    [
      'aaaaaaaaaaaaaaaabbbbbbbbbbbbbbbb',
      'its characters carry about 32 bits, at least 72 are needed',
    ],
    [
      'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaab1',
      'its characters carry about 12 bits, at least 72 are needed',
    ],
  ])('refuses %s', (rootKey, weakness) => {
    expect(rootKeyWeakness(rootKey)).toBe(weakness);
    expect(() => createBroker({ rootKey, storage: memoryStorage() })).toThrow(
      `invalid broker configuration: "rootKey" is too easy to guess (${weakness}): generate one with \`openssl rand -base64 32\`, or start \`keyway serve\` without KEYWAY_ROOT_KEY to have one printed`,
    );
  });

  it('accepts random keys: 1000 hex keys of 128 bits and 1000 base64url keys of 256 bits', () => {
    for (let i = 0; i < 1000; i++) {
      const bytes = crypto.getRandomValues(new Uint8Array(32));
      const hex = Array.from(bytes.subarray(0, 16), (b) => b.toString(16).padStart(2, '0')).join(
        '',
      );
      const base64 = btoa(String.fromCharCode(...bytes)).replace(/[+/=]/g, (c) =>
        c === '+' ? '-' : c === '/' ? '_' : '',
      );
      expect(rootKeyWeakness(hex), hex).toBeNull();
      expect(rootKeyWeakness(base64), base64).toBeNull();
    }
    expect(() => createBroker({ rootKey: ROOT_KEY, storage: memoryStorage() })).not.toThrow();
  });
});

describe('the broker embedded without HTTP', () => {
  it('mints, authenticates, authorizes and deletes with the same rules as the API', async () => {
    let now = Date.UTC(2026, 0, 1);
    const broker = createBroker({ rootKey: ROOT_KEY, storage: memoryStorage(), now: () => now });
    const root = rootPrincipal();
    expect(await broker.authenticate(ROOT_KEY)).toBe(root);

    const issued = await broker.tokens.mint(root, {
      name: 'app',
      scopes: ['acme/a'],
      expires_in: 60,
    });
    const app = await broker.authenticate(issued.access_token);
    expect(app).toEqual({
      kind: 'token',
      name: 'app',
      scopes: ['acme/a/**'],
      expiresAt: now + 60_000,
      idHash: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    expect(broker.authorize(app, 'acme/a/x')).toBe('acme/a/x');
    expect(() => broker.authorize(app, 'acme/b')).toThrow(
      expect.objectContaining({ code: 'insufficient_scope' }),
    );

    await expect(
      broker.tokens.mint(app, { name: 'other', scopes: ['acme/a'] }),
    ).rejects.toMatchObject({
      code: 'delegation_denied',
      status: 403,
    });

    now += 60_000;
    await expect(broker.authenticate(issued.access_token)).rejects.toMatchObject({
      code: 'invalid_token',
      message: 'the token has expired',
    });
    await expect(broker.tokens.delete(root, 'app')).rejects.toMatchObject({ code: 'not_found' });
  });

  it('refuses missing and non-token credentials with invalid_token', async () => {
    const broker = createBroker({ rootKey: ROOT_KEY, storage: memoryStorage() });
    for (const credential of [undefined, null, '', 'nope', `${ROOT_KEY} `]) {
      const error = await broker.authenticate(credential).catch((err: unknown) => err);
      expect(error).toBeInstanceOf(KeywayError);
      expect((error as KeywayError).code).toBe('invalid_token');
      expect((error as KeywayError).status).toBe(401);
    }
  });

  it('validates input passed by JavaScript callers exactly like JSON bodies', async () => {
    const broker = createBroker({ rootKey: ROOT_KEY, storage: memoryStorage() });
    await expect(
      broker.tokens.mint(rootPrincipal(), { name: 'a', scopes: 'acme' } as never),
    ).rejects.toMatchObject({ code: 'invalid_request', details: [{ path: 'scopes' }] });
    await expect(
      broker.tokens.mint(rootPrincipal(), { name: 'a', scopes: ['a'], expires_in: '60' } as never),
    ).rejects.toMatchObject({ code: 'invalid_lifetime' });
  });

  it('uses the injected random source for token identifiers', async () => {
    const broker = createBroker({
      rootKey: ROOT_KEY,
      storage: memoryStorage(),
      randomBytes: (length) => new Uint8Array(length).fill(1),
    });
    const one = await broker.tokens.mint(rootPrincipal(), { name: 'one', scopes: ['a'] });
    const again = createBroker({
      rootKey: ROOT_KEY,
      storage: memoryStorage(),
      randomBytes: (length) => new Uint8Array(length).fill(1),
    });
    const two = await again.tokens.mint(rootPrincipal(), { name: 'two', scopes: ['a'] });
    expect(one.access_token).toBe(two.access_token);
  });
});

describe('KeywayError', () => {
  it('carries its status and serializes to the body of docs/api.md §1.2 without the cause', () => {
    const error = new KeywayError('conflict', 'taken', { cause: new Error('secret internals') });
    expect(error.status).toBe(409);
    expect(JSON.stringify(error)).toBe('{"error":"conflict","error_description":"taken"}');
  });
});

describe('purging expired records', () => {
  it('purges expired tokens in the background and stops on close()', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    let now = Date.UTC(2026, 0, 1);
    const storage = memoryStorage();
    const broker = createBroker({
      rootKey: ROOT_KEY,
      storage,
      now: () => now,
      purgeIntervalMs: 1000,
    });
    const issued = await broker.tokens.mint(rootPrincipal(), {
      name: 'brief',
      scopes: ['a'],
      expires_in: 60,
    });
    const principal = await broker.authenticate(issued.access_token);
    expect(principal.kind).toBe('token');
    now += 60_000;
    const before = await storage.listLiveTokens({ limit: 10, now: now - 1 });
    expect(before.map((t) => t.name)).toEqual(['brief']);
    await vi.advanceTimersByTimeAsync(999);
    expect(await storage.listLiveTokens({ limit: 10, now: now - 1 })).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(await storage.listLiveTokens({ limit: 10, now: now - 1 })).toEqual([]);
    await broker.close();
    expect(vi.getTimerCount()).toBe(0);
    vi.useRealTimers();
  });

  it('purges on demand in batches until nothing expired is left', async () => {
    let now = Date.UTC(2026, 0, 1);
    const broker = createBroker({
      rootKey: ROOT_KEY,
      storage: memoryStorage(),
      now: () => now,
      purgeIntervalMs: false,
    });
    for (let i = 0; i < 1203; i++) {
      await broker.tokens.mint(rootPrincipal(), { name: `t${i}`, scopes: ['a'], expires_in: 60 });
    }
    await broker.tokens.mint(rootPrincipal(), { name: 'keeper', scopes: ['a'], expires_in: 120 });
    now += 60_000;
    expect(await broker.purgeExpired()).toBe(1203);
    expect(await broker.purgeExpired()).toBe(0);
    expect((await broker.tokens.list(rootPrincipal())).items.map((t) => t.name)).toEqual([
      'keeper',
    ]);
    await broker.close();
  });

  it('refuses an interval under a second', () => {
    expect(() =>
      createBroker({ rootKey: ROOT_KEY, storage: memoryStorage(), purgeIntervalMs: 10 }),
    ).toThrow(/"purgeIntervalMs" must be false or an integer/);
  });
});

describe('broker.outbound', () => {
  it('sends through the configured transport, under the SSRF policy and allowed hosts', async () => {
    const sent: string[] = [];
    const broker = createBroker({
      rootKey: ROOT_KEY,
      storage: memoryStorage(),
      purgeIntervalMs: false,
      allowedHosts: ['localhost'],
      fetch: async (url) => {
        sent.push(url);
        return new Response('ok');
      },
    });
    expect(await (await broker.outbound('http://localhost:9999/x')).text()).toBe('ok');
    await expect(broker.outbound('https://10.0.0.1/')).rejects.toMatchObject({
      failure: 'blocked_address',
    });
    await expect(broker.outbound('http://mcp.example.com/')).rejects.toMatchObject({
      failure: 'insecure_scheme',
    });
    expect(sent).toEqual(['http://localhost:9999/x']);
  });
});

describe('onEvent', () => {
  it('receives events without secrets, and a throwing or rejecting hook never breaks the request', async () => {
    const events: unknown[] = [];
    const background: unknown[] = [];
    let mode: 'record' | 'throw' | 'reject' = 'record';
    const broker = createBroker({
      rootKey: ROOT_KEY,
      storage: memoryStorage(),
      purgeIntervalMs: false,
      now: () => Date.UTC(2026, 10, 21),
      onBackgroundError: (error) => background.push(error),
      onEvent: (event) => {
        if (mode === 'throw') throw new Error('hook exploded');
        if (mode === 'reject') return Promise.reject(new Error('hook rejected'));
        events.push(event);
        return undefined;
      },
    });
    const issued = await broker.tokens.mint(rootPrincipal(), { name: 'a', scopes: ['x'] });
    expect(events).toEqual([
      {
        id: expect.stringMatching(/^evt_01a1fb671800[0-9a-f]{16}$/),
        type: 'token.created',
        time: '2026-11-21T00:00:00.000Z',
        actor: 'root',
        resource: 'a',
        data: { scopes: ['x/**'], expires_at: '2026-11-21T01:00:00.000Z' },
      },
    ]);
    // The hook gets what the audit log holds.
    expect((await broker.events.list(rootPrincipal())).items).toEqual(events);
    expect(JSON.stringify(events)).not.toContain(issued.access_token);
    mode = 'throw';
    await expect(
      broker.tokens.mint(rootPrincipal(), { name: 'b', scopes: ['x'] }),
    ).resolves.toMatchObject({ name: 'b' });
    mode = 'reject';
    await expect(broker.tokens.delete(rootPrincipal(), 'b')).resolves.toBeUndefined();
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(background.map((error) => (error as Error).message)).toEqual([
      'hook exploded',
      'hook rejected',
    ]);
    await broker.close();
  });
});
