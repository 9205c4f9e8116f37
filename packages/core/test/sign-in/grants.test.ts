import { createHash } from 'node:crypto';
import { storageFactories } from '@keyway/test-storages';
import { describe, expect, it } from 'vitest';
import type { Broker } from '../../src/broker/broker.js';
import type { KeywayEvent } from '../../src/events/log.js';
import type { SignInAnswer } from '../../src/sign-in/pages.js';
import { OAuthError } from '../../src/sign-in/token-requests.js';
import { BASE, brokerPerTest, ROOT, refusal } from '../support/spec.js';

/*
 * Keyway as the authorization server of its MCP endpoints (docs/api.md §17), through
 * `broker.signIn`: a registered client, a user who pastes a broker token, consent, a code
 * bound to its client, redirect URI, PKCE challenge and resource, access tokens that are
 * broker tokens bound to one endpoint, refresh tokens that rotate, and grants that never
 * outlive the token they were delegated from. The attacks are written as tests here.
 */

const ENDPOINT = 'mcp/acme/users/alice/linear';
const RESOURCE = `${BASE}/${ENDPOINT}`;
const REDIRECT = 'http://127.0.0.1/callback';
const VERIFIER = 'a-verifier-of-forty-three-characters-or-more-0123';
const CHALLENGE = createHash('sha256').update(VERIFIER).digest('base64url');

/** The redirect of a step: its URL, or a failure naming what came instead. */
function locationOf(answer: SignInAnswer): URL {
  if (answer.step.kind !== 'redirect')
    throw new Error(`expected a redirect, got ${answer.step.kind}`);
  return new URL(answer.step.location);
}

describe.each(storageFactories)('sign-in grants ($name storage)', (factory) => {
  const spec = brokerPerTest();

  async function setUp() {
    const events: KeywayEvent[] = [];
    const broker = spec.open(await factory.create(), {
      signIn: { methods: ['token'] },
      onEvent: (event) => {
        events.push(event);
      },
    });
    const client = await broker.signIn.register(
      { redirect_uris: [REDIRECT], client_name: 'Desk Assistant' },
      '203.0.113.7',
    );
    const alice = await broker.tokens.mint(ROOT, {
      name: 'alice',
      scopes: ['acme/users/alice'],
      expires_in: 86_400,
    });
    return { broker, events, clientId: client.client_id as string, alice: alice.access_token };
  }

  /** The authorization request of a client, as its query. */
  const request = (clientId: string, extra: Record<string, string> = {}) =>
    new URLSearchParams({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: 'http://127.0.0.1:49152/callback',
      state: 'client-state-1',
      code_challenge: CHALLENGE,
      code_challenge_method: 'S256',
      resource: RESOURCE,
      ...extra,
    });

  /** Signs in with `token` and approves: the code's redirect. */
  async function approve(broker: Broker, clientId: string, token: string): Promise<URL> {
    const first = await broker.signIn.authorize(request(clientId), null);
    expect(first.step.kind).toBe('sign_in');
    const binding = first.binding;
    if (first.step.kind !== 'sign_in' || binding === null) throw new Error('no sign-in page');
    const consent = await broker.signIn.signInWithToken(first.step.request, token, binding, null);
    if (consent.step.kind !== 'consent')
      throw new Error(`expected consent, got ${consent.step.kind}`);
    return locationOf(await broker.signIn.decide(consent.step.request, 'approve', binding));
  }

  /** Redeems a code as the client does. */
  const redeem = (
    broker: Broker,
    clientId: string,
    code: string,
    extra: Record<string, string> = {},
  ) =>
    broker.signIn.token(
      new URLSearchParams({
        grant_type: 'authorization_code',
        code,
        redirect_uri: 'http://127.0.0.1:49152/callback',
        client_id: clientId,
        code_verifier: VERIFIER,
        ...extra,
      }),
    );

  /** The OAuth error a token request ends with. */
  async function oauthRefusal(work: Promise<unknown>): Promise<OAuthError> {
    const error = await work.then(
      () => null,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(OAuthError);
    return error as OAuthError;
  }

  it('runs the whole flow: sign in, consent, code, an access token for this endpoint only', async () => {
    const { broker, events, clientId, alice } = await setUp();
    const first = await broker.signIn.authorize(request(clientId), null);
    expect(first.step).toMatchObject({
      kind: 'sign_in',
      client: {
        client_id: clientId,
        name: 'Desk Assistant',
        verified_host: null,
        returns_to: '127.0.0.1:49152',
      },
      endpoint: ENDPOINT,
      methods: ['token'],
      problem: null,
    });
    expect(first.binding).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const location = await approve(broker, clientId, alice);
    expect(location.origin + location.pathname).toBe('http://127.0.0.1:49152/callback');
    expect(location.searchParams.get('state')).toBe('client-state-1');
    expect(location.searchParams.get('iss')).toBe(BASE);
    const code = location.searchParams.get('code') ?? '';
    expect(code).toMatch(/^[A-Za-z0-9_-]{43}$/);

    const tokens = await redeem(broker, clientId, code);
    expect(tokens).toMatchObject({ token_type: 'Bearer', expires_in: 3600 });
    expect(tokens.access_token).toMatch(/^kw1_/);
    expect(tokens.refresh_token).toMatch(/^kwr_/);
    const principal = await broker.authenticate(tokens.access_token, { audience: ENDPOINT });
    expect(principal).toMatchObject({
      kind: 'token',
      scopes: ['acme/users/alice/linear/**'],
      audience: ENDPOINT,
    });
    expect(principal.kind === 'token' && principal.name.startsWith('alice.signin-')).toBe(true);
    // Anywhere else, the API included, it is no credential at all.
    for (const audience of [undefined, 'mcp/acme/users/alice/other', 'mcp/acme/users/alice']) {
      const refused = await refusal(
        broker.authenticate(tokens.access_token, audience === undefined ? {} : { audience }),
      );
      expect(refused.code, audience).toBe('invalid_token');
      expect(refused.message).toBe('the token is for another resource');
    }
    // One event for the grant; none for its tokens.
    expect(events.map((event) => event.type)).toEqual(['token.created', 'grant.created']);
    const grants = await broker.signIn.grants(ROOT);
    expect(grants.items).toHaveLength(1);
    expect(grants.items[0]).toMatchObject({
      client_id: clientId,
      client_name: 'Desk Assistant',
      verified_host: null,
      endpoint: ENDPOINT,
      user: 'alice',
    });
    expect(JSON.stringify(grants)).not.toContain(tokens.refresh_token);
  });

  it('rotates the refresh token, and a rotated one presented again revokes the grant', async () => {
    const { broker, events, clientId, alice } = await setUp();
    const code = (await approve(broker, clientId, alice)).searchParams.get('code') ?? '';
    const first = await redeem(broker, clientId, code);
    const refresh = (token: string, client = clientId) =>
      broker.signIn.token(
        new URLSearchParams({
          grant_type: 'refresh_token',
          refresh_token: token,
          client_id: client,
        }),
      );
    const second = await refresh(first.refresh_token);
    expect(second.refresh_token).not.toBe(first.refresh_token);
    expect(second.access_token).not.toBe(first.access_token);
    expect((await broker.authenticate(second.access_token, { audience: ENDPOINT })).kind).toBe(
      'token',
    );
    // The first refresh token, presented again: the whole grant goes.
    const replayed = await oauthRefusal(refresh(first.refresh_token));
    expect(replayed.toJSON()).toEqual({
      error: 'invalid_grant',
      error_description: 'the refresh token was already used: the grant is revoked',
    });
    for (const token of [first.access_token, second.access_token]) {
      expect((await refusal(broker.authenticate(token, { audience: ENDPOINT }))).message).toBe(
        'the token is unknown or has been revoked',
      );
    }
    expect((await oauthRefusal(refresh(second.refresh_token))).code).toBe('invalid_grant');
    expect((await broker.signIn.grants(ROOT)).items).toEqual([]);
    expect(events.at(-1)).toMatchObject({
      type: 'grant.revoked',
      resource: ENDPOINT,
      data: { client_id: clientId, reason: 'refresh_token_replayed' },
    });
  });

  it('redeems a code once: a second redemption revokes what the first issued', async () => {
    const { broker, clientId, alice } = await setUp();
    const code = (await approve(broker, clientId, alice)).searchParams.get('code') ?? '';
    const tokens = await redeem(broker, clientId, code);
    const again = await oauthRefusal(redeem(broker, clientId, code));
    expect(again.toJSON()).toEqual({
      error: 'invalid_grant',
      error_description: 'the code was already used: what it issued is revoked',
    });
    expect(
      (await refusal(broker.authenticate(tokens.access_token, { audience: ENDPOINT }))).code,
    ).toBe('invalid_token');
  });

  it('binds the code to its client, redirect URI, PKCE challenge and resource', async () => {
    const { broker, clientId, alice } = await setUp();
    const other = await broker.signIn.register({ redirect_uris: [REDIRECT] }, null);
    const cases: [Record<string, string>, string, string | null][] = [
      [
        { client_id: other.client_id as string },
        'invalid_grant',
        'the code was issued to another client',
      ],
      [
        { redirect_uri: 'http://127.0.0.1:1/callback' },
        'invalid_grant',
        'redirect_uri is not the one of the authorization request',
      ],
      [
        { code_verifier: `${VERIFIER}x` },
        'invalid_grant',
        'code_verifier does not answer the code challenge',
      ],
      [
        { code_verifier: CHALLENGE },
        'invalid_grant',
        'code_verifier does not answer the code challenge',
      ],
      [
        { resource: `${BASE}/mcp/acme/users/alice/other` },
        'invalid_target',
        'resource is not the one the code was issued for',
      ],
    ];
    for (const [extra, error, description] of cases) {
      const code = (await approve(broker, clientId, alice)).searchParams.get('code') ?? '';
      const refused = await oauthRefusal(redeem(broker, clientId, code, extra));
      expect(refused.toJSON(), JSON.stringify(extra)).toEqual({
        error,
        error_description: description,
      });
      // The code is spent all the same.
      expect((await oauthRefusal(redeem(broker, clientId, code))).code).toBe('invalid_grant');
    }
    expect((await broker.signIn.grants(ROOT)).items).toEqual([]);
  });

  it('never lets a grant outlive the token it was delegated from: deleted, narrowed away, expired', async () => {
    const { broker, clientId, alice } = await setUp();
    const tokens = await redeem(
      broker,
      clientId,
      (await approve(broker, clientId, alice)).searchParams.get('code') ?? '',
    );
    // Narrowed away from the endpoint: the grant's tokens go with the scopes they lost.
    await broker.tokens.narrow(ROOT, 'alice', { scopes: ['acme/users/alice/other'] });
    expect(
      (await refusal(broker.authenticate(tokens.access_token, { audience: ENDPOINT }))).message,
    ).toBe('the token is unknown or has been revoked');
    const refresh = () =>
      broker.signIn.token(
        new URLSearchParams({
          grant_type: 'refresh_token',
          refresh_token: tokens.refresh_token,
          client_id: clientId,
        }),
      );
    expect((await oauthRefusal(refresh())).description).toBe(
      'the grant has been revoked, narrowed away or has expired',
    );
    // Deleted: everything under it goes on the next request.
    const bob = await broker.tokens.mint(ROOT, { name: 'bob', scopes: ['acme/users/alice'] });
    const again = await redeem(
      broker,
      clientId,
      (await approve(broker, clientId, bob.access_token)).searchParams.get('code') ?? '',
    );
    await broker.tokens.delete(ROOT, 'bob');
    expect(
      (await refusal(broker.authenticate(again.access_token, { audience: ENDPOINT }))).code,
    ).toBe('invalid_token');
    // Expired: the grant ends with the token, whatever the grant lifetime.
    const short = await broker.tokens.mint(ROOT, {
      name: 'carol',
      scopes: ['acme/users/alice'],
      expires_in: 600,
    });
    const shortLived = await redeem(
      broker,
      clientId,
      (await approve(broker, clientId, short.access_token)).searchParams.get('code') ?? '',
    );
    expect(shortLived.expires_in).toBe(600);
    spec.now += 601_000;
    expect(
      (await refusal(broker.authenticate(shortLived.access_token, { audience: ENDPOINT }))).message,
    ).toBe('the token has expired');
  });

  it('refuses a token that does not cover the endpoint, and the root key, on the sign-in page', async () => {
    const { broker, clientId } = await setUp();
    const elsewhere = await broker.tokens.mint(ROOT, { name: 'dave', scopes: ['acme/users/dave'] });
    const first = await broker.signIn.authorize(request(clientId), null);
    if (first.step.kind !== 'sign_in' || first.binding === null) throw new Error('no page');
    const wrong = await broker.signIn.signInWithToken(
      first.step.request,
      elsewhere.access_token,
      first.binding,
      null,
    );
    expect(wrong.step).toMatchObject({
      kind: 'sign_in',
      problem: 'That token does not cover acme/users/alice/linear.',
    });
    if (wrong.step.kind !== 'sign_in') throw new Error('no page');
    const root = await broker.signIn.signInWithToken(
      wrong.step.request,
      'core-spec-root-key-0123456789-abcdefghijklm',
      first.binding,
      null,
    );
    expect(root.step).toMatchObject({
      kind: 'sign_in',
      problem: 'Paste a broker token, not the root key: the grant is delegated from it.',
    });
    if (root.step.kind !== 'sign_in') throw new Error('no page');
    const nonsense = await broker.signIn.signInWithToken(
      root.step.request,
      'kw1_nonsense',
      first.binding,
      null,
    );
    expect(nonsense.step).toMatchObject({
      kind: 'sign_in',
      problem: 'That token is not valid: it may have expired or been deleted.',
    });
  });

  it('takes a form only once, and only from the browser that opened the page', async () => {
    const { broker, clientId, alice } = await setUp();
    const first = await broker.signIn.authorize(request(clientId), null);
    if (first.step.kind !== 'sign_in' || first.binding === null) throw new Error('no page');
    // Another site's form, posted without this browser's cookie: nothing, and the request ends.
    const foreign = await broker.signIn.signInWithToken(first.step.request, alice, null, null);
    expect(foreign.step).toMatchObject({ kind: 'error', title: 'Start again' });
    const after = await broker.signIn.signInWithToken(
      first.step.request,
      alice,
      first.binding,
      null,
    );
    expect(after.step.kind).toBe('error');
    // A consent form posted twice: the second does nothing.
    const again = await broker.signIn.authorize(request(clientId), first.binding);
    expect(again.binding).toBeNull();
    if (again.step.kind !== 'sign_in') throw new Error('no page');
    const consent = await broker.signIn.signInWithToken(
      again.step.request,
      alice,
      first.binding,
      null,
    );
    if (consent.step.kind !== 'consent') throw new Error('no consent');
    expect(consent.step).toMatchObject({
      user: 'alice',
      endpoint: ENDPOINT,
      lifetimes: { access: 3600, grant: 2_592_000 },
    });
    const approved = await broker.signIn.decide(consent.step.request, 'approve', first.binding);
    expect(approved.step.kind).toBe('redirect');
    const twice = await broker.signIn.decide(consent.step.request, 'approve', first.binding);
    expect(twice.step).toMatchObject({ kind: 'error', title: 'Start again' });
  });

  it('answers a page for a client or redirect URI it cannot trust, and redirects every later error with state and iss', async () => {
    const { broker, clientId } = await setUp();
    const unknown = await broker.signIn.authorize(request('kwc-nobody'), null);
    expect(unknown.step).toMatchObject({ kind: 'error', title: 'This client cannot sign in' });
    const foreign = await broker.signIn.authorize(
      request(clientId, { redirect_uri: 'https://evil.example/callback' }),
      null,
    );
    expect(foreign.step).toMatchObject({
      kind: 'error',
      title: 'The redirect URI is not the client’s',
    });
    const cases: [Record<string, string>, string, string][] = [
      [
        { code_challenge_method: 'plain' },
        'invalid_request',
        'code_challenge_method must be S256 (plain is refused)',
      ],
      [
        { response_type: 'token' },
        'unsupported_response_type',
        'Keyway issues codes only: response_type=code',
      ],
      [
        { resource: 'https://elsewhere.example/mcp/x' },
        'invalid_target',
        'resource is not one of this Keyway’s MCP endpoints',
      ],
      [
        { resource: `${BASE}/mcp/acme/users/alice/linear?x=1` },
        'invalid_target',
        'resource is not one of this Keyway’s MCP endpoints',
      ],
      [{ code_challenge: 'short' }, 'invalid_request', 'code_challenge is not a base64url SHA-256'],
    ];
    for (const [extra, error, description] of cases) {
      const location = locationOf(await broker.signIn.authorize(request(clientId, extra), null));
      expect(Object.fromEntries(location.searchParams), JSON.stringify(extra)).toEqual({
        error,
        error_description: description,
        state: 'client-state-1',
        iss: BASE,
      });
    }
    const withoutPkce = request(clientId);
    withoutPkce.delete('code_challenge');
    expect(
      locationOf(await broker.signIn.authorize(withoutPkce, null)).searchParams.get(
        'error_description',
      ),
    ).toBe('PKCE is required: send code_challenge with S256');
    const twice = request(clientId);
    twice.append('resource', `${BASE}/mcp/acme/users/alice/other`);
    expect(
      locationOf(await broker.signIn.authorize(twice, null)).searchParams.get('error_description'),
    ).toBe('"resource" is given twice');
  });

  it('registers public clients only, with redirect URIs it can trust', async () => {
    const { broker } = await setUp();
    const cases: [unknown, string, string][] = [
      [
        { redirect_uris: ['javascript:alert(1)'] },
        'invalid_redirect_uri',
        '"redirect_uris" redirect_uris[0] must not use the javascript: scheme',
      ],
      [
        { redirect_uris: ['https://app.example/cb#x'] },
        'invalid_redirect_uri',
        '"redirect_uris" redirect_uris[0] must not have a fragment',
      ],
      [
        { redirect_uris: [] },
        'invalid_redirect_uri',
        '"redirect_uris" redirect_uris must be a non-empty list of URIs',
      ],
      [
        { redirect_uris: [REDIRECT], token_endpoint_auth_method: 'client_secret_basic' },
        'invalid_client_metadata',
        '"token_endpoint_auth_method" Keyway registers public clients only: "none", not "client_secret_basic"',
      ],
      [
        { redirect_uris: [REDIRECT], grant_types: ['client_credentials'] },
        'invalid_client_metadata',
        '"grant_types" takes "authorization_code" and "refresh_token" only',
      ],
    ];
    for (const [body, error, description] of cases) {
      const refused = await oauthRefusal(broker.signIn.register(body, null));
      expect(refused.toJSON(), JSON.stringify(body)).toEqual({
        error,
        error_description: description,
      });
    }
    const client = await broker.signIn.register(
      { redirect_uris: ['com.example.desk:/callback'], client_name: 'Desk\u202e evil' },
      null,
    );
    expect(client).toMatchObject({
      client_name: 'Desk evil',
      redirect_uris: ['com.example.desk:/callback'],
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    });
    expect(client).not.toHaveProperty('client_secret');
  });
});
