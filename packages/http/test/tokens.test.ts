import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Harness, ROOT_KEY, START, storageFactories } from './harness.js';

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const iso = (ms: number) => new Date(ms).toISOString();

describe.each(storageFactories)('token endpoints ($name storage)', (factory) => {
  let h: Harness;

  beforeEach(async () => {
    h = new Harness(await factory.create());
  });

  afterEach(async () => {
    expect(h.errors).toEqual([]);
    await h.broker.close();
  });

  describe('POST /api/admin/tokens', () => {
    it('mints with the root key: 201, kw1_ token, Bearer, canonical scopes, expiry in ms', async () => {
      const reply = await h.call('POST', '/api/admin/tokens', {
        body: { name: 'ci', scopes: ['acme/b', 'acme/a', 'acme/a/x'], expires_in: 7200 },
      });
      expect(reply.status).toBe(201);
      expect(reply.headers.get('cache-control')).toBe('no-store');
      expect(reply.body).toEqual({
        name: 'ci',
        access_token: expect.stringMatching(/^kw1_[A-Za-z0-9_-]{64}$/),
        token_type: 'Bearer',
        scopes: ['acme/a/**', 'acme/b/**'],
        expires_at: iso(START + 7_200_000),
      });
      expect(reply.body.expires_at).toMatch(ISO_MS);
    });

    it('canonicalizes a/b to a/b/** and keeps ** as root access', async () => {
      const a = await h.call('POST', '/api/admin/tokens', { body: { name: 'a', scopes: ['a/b'] } });
      expect(a.body.scopes).toEqual(['a/b/**']);
      const all = await h.call('POST', '/api/admin/tokens', {
        body: { name: 'all', scopes: ['x', '**'] },
      });
      expect(all.body.scopes).toEqual(['**']);
    });

    it('keeps the portal tool globs a token is minted with, each once, and shows them where it is read', async () => {
      const reply = await h.call('POST', '/api/admin/tokens', {
        body: {
          name: 'agent',
          scopes: ['acme'],
          tools: ['linear__*', 'sentry__get_*', 'linear__*'],
        },
      });
      expect(reply.status).toBe(201);
      expect(reply.body.tools).toEqual(['linear__*', 'sentry__get_*']);
      const read = await h.call('GET', '/api/admin/tokens/agent');
      expect(read.body.tools).toEqual(['linear__*', 'sentry__get_*']);
      const plain = await h.call('POST', '/api/admin/tokens', {
        body: { name: 'plain', scopes: ['acme'] },
      });
      expect(plain.body).not.toHaveProperty('tools');
      expect((await h.call('GET', '/api/admin/tokens/plain')).body).not.toHaveProperty('tools');
      // Narrowing the scopes keeps the globs.
      await h.call('PATCH', '/api/admin/tokens/agent', { body: { scopes: ['acme/users'] } });
      expect((await h.call('GET', '/api/admin/tokens/agent')).body.tools).toEqual([
        'linear__*',
        'sentry__get_*',
      ]);
    });

    it('refuses a tool glob outside its alphabet, and more than 50, naming "tools"', async () => {
      const bad = await h.call('POST', '/api/admin/tokens', {
        body: { name: 'agent', scopes: ['acme'], tools: ['linear__get issues'] },
      });
      expect(bad.status).toBe(400);
      expect(bad.body).toEqual({
        error: 'invalid_request',
        error_description:
          '"tools.0": a glob of 1 to 128 characters of A-Z, a-z, 0-9, "_", "-" and "*"',
        details: [
          {
            path: 'tools.0',
            message: 'a glob of 1 to 128 characters of A-Z, a-z, 0-9, "_", "-" and "*"',
          },
        ],
      });
      const many = await h.call('POST', '/api/admin/tokens', {
        body: {
          name: 'agent',
          scopes: ['acme'],
          tools: Array.from({ length: 51 }, (_, i) => `t${i}`),
        },
      });
      expect(many.status).toBe(400);
      expect(many.body.error).toBe('invalid_request');
      expect(many.body.error_description).toBe('"tools": at most 50 globs');
    });

    it('defaults expires_in to 3600 seconds', async () => {
      const reply = await h.call('POST', '/api/admin/tokens', {
        body: { name: 'd', scopes: ['a'] },
      });
      expect(reply.body.expires_at).toBe(iso(START + 3_600_000));
    });

    it('accepts expires_in 60 and 2592000', async () => {
      for (const [name, seconds] of [
        ['short', 60],
        ['long', 2_592_000],
      ] as const) {
        const reply = await h.call('POST', '/api/admin/tokens', {
          body: { name, scopes: ['a'], expires_in: seconds },
        });
        expect(reply.status).toBe(201);
        expect(reply.body.expires_at).toBe(iso(START + seconds * 1000));
      }
    });

    it.each([59, 2_592_001, 1.5, '60', null, -1, 0])(
      'refuses expires_in %j with 400 invalid_lifetime',
      async (value) => {
        const reply = await h.call('POST', '/api/admin/tokens', {
          body: { name: 'x', scopes: ['a'], expires_in: value },
        });
        expect(reply.status).toBe(400);
        expect(reply.body.error).toBe('invalid_lifetime');
      },
    );

    it('accepts 32 scopes and refuses 33 with 400 invalid_scope', async () => {
      const scopes = Array.from({ length: 33 }, (_, i) => `s/${i}`);
      const ok = await h.call('POST', '/api/admin/tokens', {
        body: { name: 'ok', scopes: scopes.slice(0, 32) },
      });
      expect(ok.status).toBe(201);
      expect(ok.body.scopes).toHaveLength(32);
      const tooMany = await h.call('POST', '/api/admin/tokens', { body: { name: 'no', scopes } });
      expect(tooMany.status).toBe(400);
      expect(tooMany.body.error).toBe('invalid_scope');
    });

    it('refuses an empty or malformed scope list with invalid_scope, naming the entry', async () => {
      const empty = await h.call('POST', '/api/admin/tokens', { body: { name: 'x', scopes: [] } });
      expect(empty.body.error).toBe('invalid_scope');
      const bad = await h.call('POST', '/api/admin/tokens', {
        body: { name: 'x', scopes: ['ok', 'a//b'] },
      });
      expect(bad.status).toBe(400);
      expect(bad.body).toEqual({
        error: 'invalid_scope',
        error_description: 'scope "a//b": segment 2 of "a//b" is empty',
        details: [{ path: 'scopes.1', message: 'scope "a//b": segment 2 of "a//b" is empty' }],
      });
    });

    it('refuses a malformed name with 400 invalid_name', async () => {
      for (const name of ['', 'a..b', 'a/b', 'é', 'x'.repeat(65)]) {
        const reply = await h.call('POST', '/api/admin/tokens', { body: { name, scopes: ['a'] } });
        expect(reply.status).toBe(400);
        expect(reply.body.error).toBe('invalid_name');
      }
    });

    it('answers 409 conflict when a live token has the name, and frees it on expiry', async () => {
      await h.mint('dup', ['a'], { expires_in: 60 });
      const taken = await h.call('POST', '/api/admin/tokens', {
        body: { name: 'dup', scopes: ['b'] },
      });
      expect(taken.status).toBe(409);
      expect(taken.body.error).toBe('conflict');
      h.now += 60_000;
      const again = await h.call('POST', '/api/admin/tokens', {
        body: { name: 'dup', scopes: ['b'] },
      });
      expect(again.status).toBe(201);
    });

    it('checks types before the specific codes', async () => {
      const reply = await h.call('POST', '/api/admin/tokens', {
        body: { name: 5, scopes: ['a//b'], expires_in: 'soon' },
      });
      expect(reply.status).toBe(400);
      expect(reply.body.error).toBe('invalid_request');
      expect(reply.body.details).toEqual([{ path: 'name', message: expect.any(String) }]);
    });

    it('records who minted a token', async () => {
      const alice = await h.mint('alice', ['acme']);
      await h.mint('alice.bot', ['acme/x'], { by: alice, expires_in: 60 });
      const list = await h.call('GET', '/api/admin/tokens');
      expect(list.body.items.map((t: any) => [t.name, t.created_by, t.created_at])).toEqual([
        ['alice', 'root', iso(START)],
        ['alice.bot', 'token:alice', iso(START)],
      ]);
    });
  });

  describe('delegation (SEED.md Rule 4, docs/api.md §3.2)', () => {
    let alice: string;

    beforeEach(async () => {
      alice = await h.mint('alice', ['acme/users/alice', 'shared/docs'], { expires_in: 7200 });
    });

    it('lets alice mint alice.bot with narrower scopes (201)', async () => {
      const reply = await h.call('POST', '/api/admin/tokens', {
        token: alice,
        body: { name: 'alice.bot', scopes: ['acme/users/alice/linear'], expires_in: 3600 },
      });
      expect(reply.status).toBe(201);
      expect(reply.body.scopes).toEqual(['acme/users/alice/linear/**']);
    });

    it('lets alice mint equal scopes and an equal expiry', async () => {
      const reply = await h.call('POST', '/api/admin/tokens', {
        token: alice,
        body: {
          name: 'alice.same',
          scopes: ['shared/docs/**', 'acme/users/alice'],
          expires_in: 7200,
        },
      });
      expect(reply.status).toBe(201);
      expect(reply.body.expires_at).toBe(iso(START + 7_200_000));
    });

    it('refuses wider scopes with 403 insufficient_scope', async () => {
      for (const scopes of [['acme/users'], ['**'], ['acme/users/alice', 'other']]) {
        const reply = await h.call('POST', '/api/admin/tokens', {
          token: alice,
          body: { name: 'alice.bot', scopes },
        });
        expect(reply.status).toBe(403);
        expect(reply.body.error).toBe('insufficient_scope');
        expect(reply.headers.get('www-authenticate')).toBe(
          'Bearer realm="keyway", error="insufficient_scope"',
        );
      }
    });

    it('refuses a sibling that only shares a string prefix (a/b does not cover a/b-x)', async () => {
      const ab = await h.mint('ab', ['a/b']);
      const reply = await h.call('POST', '/api/admin/tokens', {
        token: ab,
        body: { name: 'ab.x', scopes: ['a/b-x'] },
      });
      expect(reply.status).toBe(403);
      expect(reply.body.error).toBe('insufficient_scope');
    });

    it('refuses a later expiry with 403 delegation_denied', async () => {
      const reply = await h.call('POST', '/api/admin/tokens', {
        token: alice,
        body: { name: 'alice.bot', scopes: ['acme/users/alice'], expires_in: 7201 },
      });
      expect(reply.status).toBe(403);
      expect(reply.body.error).toBe('delegation_denied');
    });

    it('refuses an omitted expires_in that would outlive the caller, never shortening it', async () => {
      const short = await h.mint('short', ['a'], { expires_in: 600 });
      const reply = await h.call('POST', '/api/admin/tokens', {
        token: short,
        body: { name: 'short.child', scopes: ['a'] },
      });
      expect(reply.status).toBe(403);
      expect(reply.body.error).toBe('delegation_denied');
    });

    it.each(['alice2', 'bob', 'alice', 'alicex.bot', 'bob.alice'])(
      'refuses the name %s with 403 delegation_denied',
      async (name) => {
        const reply = await h.call('POST', '/api/admin/tokens', {
          token: alice,
          body: { name, scopes: ['acme/users/alice'] },
        });
        expect(reply.status).toBe(403);
        expect(reply.body.error).toBe('delegation_denied');
      },
    );

    it('lets alice.bot mint alice.bot.x', async () => {
      const bot = await h.mint('alice.bot', ['acme/users/alice'], { by: alice });
      const reply = await h.call('POST', '/api/admin/tokens', {
        token: bot,
        body: { name: 'alice.bot.x', scopes: ['acme/users/alice/x'], expires_in: 60 },
      });
      expect(reply.status).toBe(201);
    });

    it('refuses a mint by a token whose name is taken only after the delegation checks', async () => {
      await h.mint('alice.bot', ['acme/users/alice'], { by: alice });
      const taken = await h.call('POST', '/api/admin/tokens', {
        token: alice,
        body: { name: 'alice.bot', scopes: ['acme/users/alice'] },
      });
      expect(taken.status).toBe(409);
      const outside = await h.call('POST', '/api/admin/tokens', {
        token: alice,
        body: { name: 'alice', scopes: ['acme/users/alice'] },
      });
      expect(outside.status).toBe(403);
    });

    it('lets a ** token reach every scope', async () => {
      const all = await h.mint('all', ['**']);
      const reply = await h.call('POST', '/api/admin/tokens', {
        token: all,
        body: { name: 'all.child', scopes: ['anything/at/all', 'other'] },
      });
      expect(reply.status).toBe(201);
      const principal = await h.broker.authenticate(all);
      expect(h.broker.authorize(principal, 'deep/down/below')).toBe('deep/down/below');
    });
  });

  describe('authorization in core (until resource endpoints exist)', () => {
    it('refuses a/b-x to a token on a/b with insufficient_scope, and allows a/b and a/b/c', async () => {
      const token = await h.mint('ab', ['a/b']);
      const principal = await h.broker.authenticate(token);
      expect(h.broker.authorize(principal, 'a/b')).toBe('a/b');
      expect(h.broker.authorize(principal, 'a/b/c')).toBe('a/b/c');
      expect(() => h.broker.authorize(principal, 'a/b-x')).toThrow(
        expect.objectContaining({ code: 'insufficient_scope', status: 403 }),
      );
      expect(() => h.broker.authorize(principal, 'a')).toThrow(
        expect.objectContaining({ code: 'insufficient_scope' }),
      );
      expect(() => h.broker.authorize(principal, 'a/b/../c')).toThrow(
        expect.objectContaining({ code: 'invalid_path' }),
      );
    });
  });

  describe('authentication (SEED.md Authentication, docs/api.md §1.1)', () => {
    it('answers 401 without a credential, with a bare challenge', async () => {
      const reply = await h.call('GET', '/api/admin/tokens', { token: null });
      expect(reply.status).toBe(401);
      expect(reply.body.error).toBe('invalid_token');
      expect(reply.headers.get('www-authenticate')).toBe('Bearer realm="keyway"');
    });

    it('accepts the bearer scheme in any case', async () => {
      const reply = await h.call('GET', '/api/admin/tokens', {
        token: null,
        headers: { authorization: `bEaReR ${ROOT_KEY}` },
      });
      expect(reply.status).toBe(200);
    });

    it('refuses other schemes and malformed headers with 401 invalid_token', async () => {
      for (const authorization of [
        `Basic ${ROOT_KEY}`,
        'Bearer',
        `Bearer ${ROOT_KEY} extra`,
        ROOT_KEY,
      ]) {
        const reply = await h.call('GET', '/api/admin/tokens', {
          token: null,
          headers: { authorization },
        });
        expect(reply.status).toBe(401);
        expect(reply.headers.get('www-authenticate')).toBe(
          'Bearer realm="keyway", error="invalid_token"',
        );
      }
    });

    it('refuses forged, tampered, truncated and wrong-prefix tokens', async () => {
      const token = await h.mint('alice', ['a']);
      const body = token.slice(4);
      const flip = (s: string, i: number) =>
        s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);
      const forgeries = [
        `kw1_${'A'.repeat(64)}`,
        flip(token, 10),
        flip(token, token.length - 1),
        token.slice(0, -1),
        token.slice(0, 40),
        `kw2_${body}`,
        `KW1_${body}`,
        `${token}=`,
        `${token}A`,
        body,
        `${ROOT_KEY}x`,
      ];
      for (const forged of forgeries) {
        const reply = await h.call('GET', '/api/admin/tokens', { token: forged });
        expect(reply.status).toBe(401);
        expect(reply.body.error).toBe('invalid_token');
        expect(reply.text).not.toContain(forged);
      }
      expect((await h.call('GET', '/api/admin/tokens', { token })).status).toBe(200);
    });

    it('refuses a token on the very next request after it is deleted', async () => {
      const token = await h.mint('gone', ['a']);
      expect((await h.call('GET', '/api/admin/tokens/gone', { token })).status).toBe(200);
      expect((await h.call('DELETE', '/api/admin/tokens/gone')).status).toBe(204);
      const reply = await h.call('GET', '/api/admin/tokens/gone', { token });
      expect(reply.status).toBe(401);
      expect(reply.body.error).toBe('invalid_token');
    });

    it('refuses a token once it has expired, at the expiry instant', async () => {
      const token = await h.mint('brief', ['a'], { expires_in: 60 });
      h.now = START + 59_999;
      expect((await h.call('GET', '/api/admin/tokens', { token })).status).toBe(200);
      h.now = START + 60_000;
      const reply = await h.call('GET', '/api/admin/tokens', { token });
      expect(reply.status).toBe(401);
      expect(reply.body.error_description).toBe('the token has expired');
    });

    it('refuses every old token once the root key changes', async () => {
      const tokens = [await h.mint('one', ['a']), await h.mint('two', ['**'])];
      h.rebuild('a-completely-different-root-key-0123456789');
      for (const token of tokens) {
        expect((await h.call('GET', '/api/admin/tokens', { token })).status).toBe(401);
      }
      expect((await h.call('GET', '/api/admin/tokens', { token: ROOT_KEY })).status).toBe(401);
    });

    it('comes before routing: an unknown route without a credential is 401', async () => {
      expect((await h.call('GET', '/nope', { token: null })).status).toBe(401);
      const known = await h.call('GET', '/nope');
      expect(known.status).toBe(404);
      expect(known.body.error).toBe('not_found');
    });
  });

  describe('GET /api/admin/tokens and /api/admin/tokens/<name>', () => {
    it('never shows an access_token', async () => {
      const alice = await h.mint('alice', ['acme']);
      await h.mint('alice.bot', ['acme'], { by: alice });
      const list = await h.call('GET', '/api/admin/tokens');
      const one = await h.call('GET', '/api/admin/tokens/alice');
      for (const reply of [list, one]) {
        expect(reply.status).toBe(200);
        expect(reply.text).not.toContain('access_token');
        expect(reply.text).not.toContain(alice);
        expect(reply.text).not.toContain('kw1_');
      }
      expect(one.body).toEqual({
        name: 'alice',
        scopes: ['acme/**'],
        expires_at: iso(START + 3_600_000),
        created_at: iso(START),
        created_by: 'root',
      });
    });

    it('shows the root key every token and a token itself and its descendants', async () => {
      const alice = await h.mint('alice', ['a']);
      await h.mint('alice.bot', ['a'], { by: alice });
      await h.mint('alice2', ['a']);
      await h.mint('bob', ['a']);
      const all = await h.call('GET', '/api/admin/tokens');
      expect(all.body.items.map((t: any) => t.name)).toEqual([
        'alice',
        'alice.bot',
        'alice2',
        'bob',
      ]);
      expect(all.body.next_cursor).toBeNull();
      const own = await h.call('GET', '/api/admin/tokens', { token: alice });
      expect(own.body.items.map((t: any) => t.name)).toEqual(['alice', 'alice.bot']);
    });

    it('refuses a token reading a token outside its tree with 403, before existence', async () => {
      const alice = await h.mint('alice', ['a']);
      await h.mint('bob', ['a']);
      for (const name of ['bob', 'nobody', 'alice2']) {
        const reply = await h.call('GET', `/api/admin/tokens/${name}`, { token: alice });
        expect(reply.status).toBe(403);
        expect(reply.body.error).toBe('delegation_denied');
      }
      const missing = await h.call('GET', '/api/admin/tokens/alice.nobody', { token: alice });
      expect(missing.status).toBe(404);
      expect(missing.body.error).toBe('not_found');
    });

    it('pages with limit and cursor', async () => {
      for (const name of ['e', 'd', 'c', 'b', 'a']) await h.mint(name, ['x']);
      const first = await h.call('GET', '/api/admin/tokens?limit=2');
      expect(first.body.items.map((t: any) => t.name)).toEqual(['a', 'b']);
      expect(first.body.next_cursor).toEqual(expect.any(String));
      const second = await h.call(
        'GET',
        `/api/admin/tokens?limit=2&cursor=${encodeURIComponent(first.body.next_cursor)}`,
      );
      expect(second.body.items.map((t: any) => t.name)).toEqual(['c', 'd']);
      const third = await h.call(
        'GET',
        `/api/admin/tokens?limit=2&cursor=${encodeURIComponent(second.body.next_cursor)}`,
      );
      expect(third.body.items.map((t: any) => t.name)).toEqual(['e']);
      expect(third.body.next_cursor).toBeNull();
    });

    it('refuses bad query parameters with 400 invalid_request', async () => {
      for (const query of [
        'limit=0',
        'limit=501',
        'limit=1.5',
        'limit=x',
        'cursor=%%%',
        'foo=1',
        'limit=1&limit=2',
        'cursor=',
      ]) {
        const reply = await h.call('GET', `/api/admin/tokens?${query}`);
        expect(reply.status, query).toBe(400);
        expect(reply.body.error).toBe('invalid_request');
      }
      expect((await h.call('GET', '/api/admin/tokens?limit=500')).status).toBe(200);
    });

    it('does not list expired tokens', async () => {
      await h.mint('brief', ['a'], { expires_in: 60 });
      await h.mint('long', ['a'], { expires_in: 120 });
      h.now = START + 60_000;
      const reply = await h.call('GET', '/api/admin/tokens');
      expect(reply.body.items.map((t: any) => t.name)).toEqual(['long']);
    });
  });

  describe('PATCH /api/admin/tokens/<name>', () => {
    let alice: string;
    let bot: string;

    beforeEach(async () => {
      alice = await h.mint('alice', ['acme', 'shared'], { expires_in: 7200 });
      bot = await h.mint('alice.bot', ['acme/x', 'shared'], { by: alice, expires_in: 7200 });
    });

    it('narrows alice and, on the next request, alice.bot with it', async () => {
      const reply = await h.call('PATCH', '/api/admin/tokens/alice', {
        body: { scopes: ['acme'], expires_in: 600 },
      });
      expect(reply.status).toBe(200);
      expect(reply.body).toEqual({
        name: 'alice',
        scopes: ['acme/**'],
        expires_at: iso(START + 600_000),
        created_at: iso(START),
        created_by: 'root',
      });
      const seen = await h.call('GET', '/api/admin/tokens/alice.bot', { token: bot });
      expect(seen.body.scopes).toEqual(['acme/x/**']);
      expect(seen.body.expires_at).toBe(iso(START + 600_000));
      const child = await h.call('POST', '/api/admin/tokens', {
        token: bot,
        body: { name: 'alice.bot.y', scopes: ['shared'], expires_in: 60 },
      });
      expect(child.status).toBe(403);
      expect(child.body.error).toBe('insufficient_scope');
    });

    it('deletes a descendant left with no scope', async () => {
      await h.mint('alice.docs', ['shared/docs'], { by: alice });
      await h.call('PATCH', '/api/admin/tokens/alice', { body: { scopes: ['acme'] } });
      expect((await h.call('GET', '/api/admin/tokens/alice.docs')).status).toBe(404);
      expect((await h.call('GET', '/api/admin/tokens/alice.bot')).status).toBe(200);
    });

    it('refuses widening with 400 invalid_request and changes nothing', async () => {
      const wider = await h.call('PATCH', '/api/admin/tokens/alice', { body: { scopes: ['**'] } });
      expect(wider.status).toBe(400);
      expect(wider.body.error).toBe('invalid_request');
      const later = await h.call('PATCH', '/api/admin/tokens/alice', {
        body: { expires_in: 7201 },
      });
      expect(later.status).toBe(400);
      expect(later.body.error).toBe('invalid_request');
      const both = await h.call('PATCH', '/api/admin/tokens/alice', {
        body: { scopes: ['acme'], expires_in: 9000 },
      });
      expect(both.status).toBe(400);
      const now = await h.call('GET', '/api/admin/tokens/alice');
      expect(now.body.scopes).toEqual(['acme/**', 'shared/**']);
      expect(now.body.expires_at).toBe(iso(START + 7_200_000));
    });

    it('lets a token narrow itself and its descendants, not its ancestors or strangers', async () => {
      expect(
        (
          await h.call('PATCH', '/api/admin/tokens/alice.bot', {
            token: bot,
            body: { scopes: ['acme/x'] },
          })
        ).status,
      ).toBe(200);
      expect(
        (
          await h.call('PATCH', '/api/admin/tokens/alice.bot', {
            token: alice,
            body: { expires_in: 60 },
          })
        ).status,
      ).toBe(200);
      const up = await h.call('PATCH', '/api/admin/tokens/alice', {
        token: bot,
        body: { expires_in: 60 },
      });
      expect(up.status).toBe(403);
      expect(up.body.error).toBe('delegation_denied');
    });

    it('validates the body: types, unknown fields, lifetimes, scopes', async () => {
      const cases: [unknown, string][] = [
        [{ scopes: 'acme' }, 'invalid_request'],
        [{ name: 'x' }, 'invalid_request'],
        [{ expires_in: 30 }, 'invalid_lifetime'],
        [{ scopes: [] }, 'invalid_scope'],
        [[], 'invalid_request'],
      ];
      for (const [body, code] of cases) {
        const reply = await h.call('PATCH', '/api/admin/tokens/alice', { body });
        expect(reply.status).toBe(400);
        expect(reply.body.error).toBe(code);
      }
    });

    it('answers 404 for a token that does not exist', async () => {
      const reply = await h.call('PATCH', '/api/admin/tokens/nobody', { body: { expires_in: 60 } });
      expect(reply.status).toBe(404);
    });
  });

  describe('DELETE /api/admin/tokens/<name>', () => {
    it('deletes alice and every descendant in one step: alice.bot is refused next', async () => {
      const alice = await h.mint('alice', ['a']);
      const bot = await h.mint('alice.bot', ['a'], { by: alice });
      const botX = await h.mint('alice.bot.x', ['a'], { by: bot, expires_in: 60 });
      const alice2 = await h.mint('alice2', ['a']);
      const reply = await h.call('DELETE', '/api/admin/tokens/alice');
      expect(reply.status).toBe(204);
      expect(reply.text).toBe('');
      for (const token of [alice, bot, botX]) {
        expect((await h.call('GET', '/api/admin/tokens', { token })).status).toBe(401);
      }
      expect((await h.call('GET', '/api/admin/tokens', { token: alice2 })).status).toBe(200);
    });

    it('lets a token delete itself and its descendants, never an ancestor or a stranger', async () => {
      const alice = await h.mint('alice', ['a']);
      const bot = await h.mint('alice.bot', ['a'], { by: alice });
      await h.mint('bob', ['a']);
      expect((await h.call('DELETE', '/api/admin/tokens/alice', { token: bot })).status).toBe(403);
      expect((await h.call('DELETE', '/api/admin/tokens/bob', { token: alice })).status).toBe(403);
      expect((await h.call('DELETE', '/api/admin/tokens/alice.bot', { token: alice })).status).toBe(
        204,
      );
      expect((await h.call('DELETE', '/api/admin/tokens/alice', { token: alice })).status).toBe(
        204,
      );
      expect((await h.call('GET', '/api/admin/tokens', { token: alice })).status).toBe(401);
    });

    it('answers 404 for a missing token and 400 for a malformed name', async () => {
      expect((await h.call('DELETE', '/api/admin/tokens/nobody')).status).toBe(404);
      const bad = await h.call('DELETE', '/api/admin/tokens/a..b');
      expect(bad.status).toBe(400);
      expect(bad.body.error).toBe('invalid_name');
    });
  });
});
