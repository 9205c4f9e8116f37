import type { KeywayErrorCode } from '@keyway/core';
import { contractSchema, queryParameters } from '@keyway/core/contract';
import { memoryStorage } from '@keyway/store-memory';
import { createTestWorld } from '@keyway/testing';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { OPERATIONS } from '../src/openapi.js';
import { captureConsole, Harness, ROOT_KEY, START } from './harness.js';

/*
 * Every endpoint, fuzzed from its request schemas: arbitrary and near-valid bodies, query
 * strings, URL paths (encodings, dot segments, Unicode forms, lengths around 512) and
 * headers (bearer spellings, content types, bodies over the limit). 1,000 cases per endpoint
 * here; `pnpm fuzz` runs 20,000 (KEYWAY_FUZZ_RUNS) and prints the seed (KEYWAY_FUZZ_SEED
 * replays a run).
 */

const RUNS = Number(process.env.KEYWAY_FUZZ_RUNS ?? 1000);
const SEED = Number(process.env.KEYWAY_FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
const BASE = 'https://keyway.example.test';
const HOOK = 'https://hooks.example.test/keyway';
const WEBHOOK_SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const SECRET_VALUE = 'fuzz-vault-value-7c1d-do-not-leak';

/** Codes any route may answer besides its own (routing, media type, size, credentials). */
const EVERY_ROUTE: KeywayErrorCode[] = [
  'invalid_request',
  'not_found',
  'method_not_allowed',
  'payload_too_large',
  'unsupported_media_type',
  'invalid_token',
  'rate_limited',
];
const ERROR_FIELDS = new Set(['error', 'error_description', 'details']);

// ─── generators ──────────────────────────────────────────────────────────────────────────

const long = (unit: string) => fc.integer({ min: 505, max: 520 }).map((n) => unit.repeat(n));
const segment = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom('acme', 'ci', 'linear', 'alice', 'key', 'ci.bot') },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      '.',
      '..',
      '%2e',
      '%2E%2e',
      '%2F',
      '%5C',
      '%00',
      '%',
      '%zz',
      '%C3%A9',
      'e\u0301',
      'é',
      '\u212B',
      '\u{1F600}',
      '\uFF0E\uFF0E',
      ' ',
      '%20',
      'a;b',
      'a?b',
      'a#b',
      '~',
      '**',
      '\\',
    ),
  },
  { weight: 3, arbitrary: fc.string({ unit: 'grapheme', maxLength: 12 }) },
  { weight: 1, arbitrary: fc.oneof(long('a'), long('é'), long('%41')) },
);
const pathValue = fc.array(segment, { minLength: 0, maxLength: 5 }).map((s) => s.join('/'));

const scalar = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.integer().map(String),
  fc.constantFrom('', 'true', 'false', '0', '-1', '501', '1.5', 'null', '%%%', 'a'.repeat(600)),
);

/** A query string: the route's own parameters with odd values, unknown ones, junk. */
function queryOf(keys: string[]) {
  const known =
    keys.length === 0
      ? fc.constant<[string, string][]>([])
      : fc.array(fc.tuple(fc.constantFrom(...keys), scalar), { maxLength: 4 });
  const unknown = fc.array(fc.tuple(fc.string({ maxLength: 8 }), scalar), { maxLength: 2 });
  return fc.oneof(
    {
      weight: 6,
      arbitrary: fc
        .tuple(known, unknown)
        .map(([a, b]) => new URLSearchParams([...a, ...b]).toString()),
    },
    { weight: 1, arbitrary: fc.constantFrom('%%%', '&&=&', 'limit=1&limit=2', '=x', 'a=%E0%A4%A') },
  );
}

const json = fc.jsonValue({ maxDepth: 3 });
const HUGE = JSON.stringify({ value: 'x'.repeat(1024 * 1024 + 10) });

/** A body: JSON from the schema's own fields with odd values, any JSON, junk, too large. */
function bodyOf(fields: string[]) {
  const nearValid = fc
    .array(fc.tuple(fc.constantFrom(...(fields.length > 0 ? fields : ['x'])), json), {
      maxLength: 5,
    })
    .map((entries) => JSON.stringify(Object.fromEntries(entries)));
  return fc.oneof(
    { weight: 5, arbitrary: nearValid },
    { weight: 3, arbitrary: json.map((value) => JSON.stringify(value)) },
    { weight: 2, arbitrary: fc.string({ maxLength: 40 }) },
    { weight: 1, arbitrary: fc.constantFrom('', '{', '{"a":1}{', '\u0000', HUGE, '[]', 'null') },
  );
}

/** A body as a stream of pieces of `size` bytes, as a chunked upload arrives. */
function inPieces(body: string, size: number): ReadableStream<Uint8Array> {
  const bytes = new TextEncoder().encode(body);
  let at = 0;
  return new ReadableStream({
    pull(controller) {
      if (at >= bytes.length) controller.close();
      else {
        controller.enqueue(bytes.slice(at, at + size * 1024));
        at += size * 1024;
      }
    },
  });
}

// ─── the fuzzed broker ───────────────────────────────────────────────────────────────────

describe('fuzzing every endpoint', () => {
  let h: Harness;
  const secrets: string[] = [ROOT_KEY, SECRET_VALUE, WEBHOOK_SECRET, WEBHOOK_SECRET.slice(6)];
  const events: string[] = [];
  const delivered: string[] = [];
  const logged: string[] = [];
  let brokerToken = '';
  /** Legitimate requests answered while the fuzzer ran (how long they took is `pnpm bench`'s). */
  let legitimate = 0;
  let world: ReturnType<typeof createTestWorld>;

  beforeAll(async () => {
    process.stdout.write(
      `fuzz: ${RUNS} cases per endpoint, seed ${SEED} (replay: KEYWAY_FUZZ_SEED=${SEED})\n`,
    );
    captureConsole(logged);
    world = createTestWorld({ now: () => h?.now ?? START });
    h = new Harness(memoryStorage(), {
      fetch: async (url, init) => {
        if (!url.startsWith(HOOK)) return world.fetch(url, init);
        delivered.push(`${JSON.stringify(init.headers)}\n${String(init.body)}`);
        return new Response(null, { status: 204 });
      },
      baseUrl: BASE,
      providerManagement: true,
      allowedRedirects: ['https://app.example.test'],
      webhooks: [{ url: HOOK, secret: WEBHOOK_SECRET }],
      webhookPollIntervalMs: false,
      onEvent: (event) => {
        events.push(JSON.stringify(event));
      },
    });
    // Something to find: a provider, an active connection, a secret, a broker token.
    await h.call('PUT', '/api/admin/providers/linear', {
      body: { template: 'mcp', configuration: { resource_url: world.resourceUrl } },
    });
    const started = await h.call('POST', '/api/oauth/authorize/linear', {
      body: { connection_id: 'acme/alice/linear' },
    });
    const back = new URL(world.consent(started.body.authorization_url));
    await h.call('GET', `${back.pathname}${back.search}`, { token: null });
    await h.call('PUT', '/api/vault/secrets/acme/key', { body: { value: SECRET_VALUE } });
    brokerToken = await h.mint('ci', ['acme'], { expires_in: 86_400 });
    secrets.push(brokerToken);
  });

  afterAll(async () => {
    vi.restoreAllMocks();
    await h.broker.events.deliverDue();
    // The request log (docs/api.md §16): a record per request, none holding a secret.
    expect(h.requestLog.length).toBeGreaterThan(OPERATIONS.length * RUNS);
    const texts = [...events, ...delivered, ...logged, ...h.requestLog];
    for (const text of texts)
      for (const secret of [...secrets, ...world.secrets()]) {
        expect(text).not.toContain(secret);
      }
    expect(h.errors).toEqual([]);
    expect(legitimate).toBe(Math.floor(RUNS / 50) * OPERATIONS.length);
    await h.broker.close();
    process.stdout.write(
      `fuzz: ${OPERATIONS.length} endpoints × ${RUNS} cases (seed ${SEED}): no 5xx, every error documented, no secret out; ` +
        `${legitimate} legitimate requests answered between them\n`,
    );
  });

  const credential = fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom('root', 'token') },
    {
      weight: 3,
      arbitrary: fc.constantFrom(
        `bearer ${ROOT_KEY}`,
        `BEARER ${ROOT_KEY}`,
        `Bearer  ${ROOT_KEY}`,
        `Bearer ${ROOT_KEY} `,
        `Bearer ${ROOT_KEY}x`,
        `Bearer ${ROOT_KEY.slice(0, -1)}`,
        'Bearer',
        'Bearer ',
        `Basic ${btoa(`root:${ROOT_KEY}`)}`,
        'Bearer kw1_',
        'Bearer kw1_AAAA.BBBB',
        `Bearer ${'k'.repeat(9000)}`,
      ),
    },
    { weight: 1, arbitrary: fc.string({ maxLength: 30 }).map((s) => `Bearer ${s}`) },
    { weight: 1, arbitrary: fc.constant(null) },
  );
  const contentType = fc.constantFrom(
    'application/json',
    'application/json; charset=utf-8',
    'APPLICATION/JSON',
    'application/json;charset=latin1',
    'text/plain',
    'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=x',
    null,
  );
  const otherMethod = fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD');

  for (const operation of OPERATIONS) {
    const queryKeys =
      operation.query === undefined ? [] : Object.keys(queryParameters(operation.query));
    const bodyFields =
      operation.body === undefined
        ? []
        : Object.keys((contractSchema(operation.body, 'input').properties ?? {}) as object);
    /**
     * The codes documented for what was sent: every operation of the method sent whose path
     * template matches the path sent (`GET /api/admin/providers/a/register` is a read of the
     * provider `a/register`).
     */
    const sentTo = (method: string, path: string) =>
      OPERATIONS.filter((other) => {
        if (other.method !== method.toUpperCase()) return false;
        const pattern = other.path
          .replace(/[.]/g, '\\.')
          .replace(/\{name\}/, '[^/]+')
          .replace(/\{[a-z_]+\}/, '.+');
        return other.path === operation.path || new RegExp(`^${pattern}$`).test(path);
      });
    const documentedFor = (method: string, path: string) =>
      new Set<string>([...sentTo(method, path).flatMap((other) => other.errors), ...EVERY_ROUTE]);

    it(`${operation.method.toUpperCase()} ${operation.path}: never a 5xx, every error documented, no secret out`, async () => {
      const request = fc.record({
        method: fc.oneof(
          { weight: 5, arbitrary: fc.constant(operation.method.toUpperCase()) },
          { weight: 1, arbitrary: otherMethod },
        ),
        param: pathValue,
        query: queryOf(queryKeys),
        body:
          operation.body === undefined ? fc.option(bodyOf([]), { freq: 4 }) : bodyOf(bodyFields),
        contentType,
        credential,
        /** Sent as a stream without a length (chunked, over HTTP/1.1), in pieces. */
        chunked: fc.option(fc.integer({ min: 1, max: 64 }), { freq: 3 }),
      });
      let cases = 0;
      await fc.assert(
        fc.asyncProperty(request, async (r) => {
          const path = operation.path.replace(/\{[a-z]+\}/, r.param);
          const url = `http://keyway.test${path}${r.query === '' ? '' : `?${r.query}`}`;
          const headers = new Headers();
          if (r.credential === 'root') headers.set('authorization', `Bearer ${ROOT_KEY}`);
          else if (r.credential === 'token') headers.set('authorization', `Bearer ${brokerToken}`);
          else if (r.credential !== null) headers.set('authorization', r.credential);
          if (r.contentType !== null) headers.set('content-type', r.contentType);
          const withBody = r.body !== null && r.method !== 'GET' && r.method !== 'HEAD';
          let built: Request;
          try {
            const body = withBody && r.body !== null ? r.body : undefined;
            built =
              body !== undefined && r.chunked !== null
                ? new Request(url, {
                    method: r.method,
                    headers,
                    body: inPieces(body, r.chunked),
                    duplex: 'half',
                  } as RequestInit)
                : new Request(url, { method: r.method, headers, body });
          } catch {
            return; // not a request any client can send
          }
          const response = await h.handler(built);
          const text = await response.text();
          expect(response.status, `${r.method} ${url} → ${text.slice(0, 200)}`).toBeLessThan(500);
          // The credentials route answers a token by design, the secret route its value: by
          // what was sent (another operation's path read with GET may be one of them).
          const answersSecrets =
            response.status === 200 &&
            sentTo(r.method, path).some(({ id }) => id === 'credentials' || id === 'getSecret');
          for (const secret of secrets) {
            if (answersSecrets) break;
            expect(text).not.toContain(secret);
            for (const [, value] of response.headers) expect(value).not.toContain(secret);
          }
          const portal = sentTo(r.method, path).some(({ path: p }) => p.startsWith('/portal/'));
          if (response.status >= 400 && response.headers.get('content-type')?.includes('json')) {
            const body = JSON.parse(text);
            if (portal && body.jsonrpc === '2.0') {
              // The portal's MCP server refusing a message (MCP's transport rules): a
              // JSON-RPC error, as the SDK's server writes it, never an API error body.
              expect(Object.keys(body).sort()).toEqual(['error', 'id', 'jsonrpc']);
              expect(typeof body.error.code).toBe('number');
              expect(typeof body.error.message).toBe('string');
            } else {
              expect(Object.keys(body).every((key) => ERROR_FIELDS.has(key))).toBe(true);
              expect(typeof body.error_description).toBe('string');
              expect(
                [...documentedFor(r.method, path)],
                `${r.method} ${url}: ${text.slice(0, 200)}`,
              ).toContain(body.error);
            }
          }
          if (++cases % 50 === 0) {
            const answer = await h.call('GET', '/api/admin/tokens?limit=1');
            expect(answer.status).toBe(200);
            legitimate += 1;
          }
        }),
        { numRuns: RUNS, seed: SEED },
      );
      expect(h.errors).toEqual([]);
    }, 600_000);
  }
});
