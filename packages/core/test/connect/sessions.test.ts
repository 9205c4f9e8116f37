import { storageFactories } from '@keyway/test-storages';
import { createTestWorld } from '@keyway/testing';
import { describe, expect, it } from 'vitest';
import type { KeywayEvent } from '../../src/events/log.js';
import { BASE, brokerPerTest, ROOT, refusal } from '../support/spec.js';

/*
 * Connect sessions (docs/api.md §19): an application's backend creates one for an end user;
 * its secret, in the page URL's fragment, lets the hosted page list the offered providers,
 * start their connections under one namespace, read their status and (when allowed)
 * disconnect them — and nothing else. The attacks are written as tests here.
 */

const NAMESPACE = 'acme/users/alice';

describe.each(storageFactories)('connect sessions ($name storage)', (factory) => {
  const spec = brokerPerTest();

  async function setUp() {
    const events: KeywayEvent[] = [];
    const linear = createTestWorld({ now: () => spec.now, tokenResponse: { idToken: true } });
    const notion = createTestWorld({
      now: () => spec.now,
      issuer: 'https://auth.notion.example.test',
      resourceUrl: 'https://mcp.notion.example.test/mcp',
    });
    const storage = await factory.create();
    const broker = spec.open(storage, {
      allowedRedirects: ['https://app.example.com'],
      rateLimits: { auth: { limit: 10, windowSeconds: 60 } },
      fetch: (input, init) =>
        new Request(input, init).url.includes('notion.example.test')
          ? notion.fetch(input, init)
          : linear.fetch(input, init),
      onEvent: (event) => {
        events.push(event);
      },
    });
    for (const [id, world] of [
      ['acme/linear', linear],
      ['acme/notion', notion],
    ] as const) {
      await broker.providers.put(ROOT, id, {
        template: 'mcp',
        configuration: { resource_url: world.resourceUrl },
      });
    }
    const app = await broker.tokens.mint(ROOT, {
      name: 'app',
      scopes: ['acme/users', 'acme/linear', 'acme/notion'],
      expires_in: 86_400,
    });
    const appPrincipal = await broker.authenticate(app.access_token);
    return { broker, storage, events, linear, notion, app: appPrincipal };
  }

  const secretOf = (url: string) => new URL(url).hash.slice(1);

  it('creates a session whose page URL holds its secret in the fragment, once, and records it', async () => {
    const { broker, events, app } = await setUp();
    const created = await broker.connectSessions.create(app, {
      namespace: NAMESPACE,
      providers: ['acme/linear'],
      end_user: { id: 'u-42', name: 'Alice' },
      redirect_uri: 'https://app.example.com/settings',
      branding: { name: 'Acme', accent: '#0a7cff' },
    });
    const url = new URL(created.url);
    expect(`${url.origin}${url.pathname}`).toBe(`${BASE}/connect`);
    expect(url.search).toBe('');
    expect(secretOf(created.url)).toMatch(/^kcs_[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]{43}$/);
    expect(created.expires_at).toBe(new Date(spec.now + 1_800_000).toISOString());
    const [listed] = await broker.connectSessions.list(app);
    expect(listed).toEqual({
      id: created.id,
      namespace: NAMESPACE,
      providers: ['acme/linear'],
      end_user: { id: 'u-42', name: 'Alice' },
      redirect_uri: 'https://app.example.com/settings',
      verify: false,
      allow_disconnect: false,
      branding: { name: 'Acme', accent: '#0a7cff' },
      created_by: 'token:app',
      created_at: new Date(spec.now).toISOString(),
      expires_at: created.expires_at,
      status: 'active',
      completed: [],
    });
    // Neither the view nor the event holds the secret.
    const secret = secretOf(created.url);
    expect(JSON.stringify(listed)).not.toContain(secret.split('.')[1]);
    const recorded = events.filter((event) => event.type === 'connect_session.created');
    expect(recorded.map((event) => [event.actor, event.resource, event.data])).toEqual([
      [
        'token:app',
        NAMESPACE,
        {
          session_id: created.id,
          providers: ['acme/linear'],
          end_user_id: 'u-42',
          expires_at: created.expires_at,
        },
      ],
    ]);
    expect(JSON.stringify(events)).not.toContain(secret.split('.')[1]);
  });

  it('refuses what the creator does not cover, an unknown provider, and a foreign redirect', async () => {
    const { broker, app } = await setUp();
    const outside = await refusal(
      broker.connectSessions.create(app, { namespace: 'other/users/bob' }),
    );
    expect(outside.code).toBe('insufficient_scope');
    const missing = await refusal(
      broker.connectSessions.create(app, { namespace: NAMESPACE, providers: ['acme/linear/x'] }),
    );
    expect([missing.code, missing.details]).toEqual([
      'not_found',
      [{ path: 'providers.0', message: 'no such provider' }],
    ]);
    const redirect = await refusal(
      broker.connectSessions.create(app, {
        namespace: NAMESPACE,
        redirect_uri: 'https://evil.example.com/steal',
      }),
    );
    expect([redirect.code, redirect.details]).toEqual([
      'invalid_redirect',
      [{ path: 'redirect_uri', message: 'not an allowed origin' }],
    ]);
    const long = await refusal(
      broker.connectSessions.create(app, { namespace: NAMESPACE, expires_in: 86_401 }),
    );
    expect([long.code, long.message]).toEqual([
      'invalid_request',
      '"expires_in" must be at most 86400 seconds',
    ]);
  });

  it('lets the page list, start and read the offered connections, and tells their completion once', async () => {
    const { broker, storage, events, app, linear } = await setUp();
    const created = await broker.connectSessions.create(app, {
      namespace: NAMESPACE,
      providers: ['acme/linear', 'acme/notion'],
    });
    const page = await broker.connectSessions.open(secretOf(created.url), '198.51.100.7');
    expect((await page.view()).providers).toEqual([
      {
        provider_id: 'acme/linear',
        label: 'acme/linear',
        connection_id: `${NAMESPACE}/linear`,
        status: null,
        account: null,
        signs_in_at: new URL(linear.issuer).host,
        error: null,
      },
      {
        provider_id: 'acme/notion',
        label: 'acme/notion',
        connection_id: `${NAMESPACE}/notion`,
        status: null,
        account: null,
        signs_in_at: 'auth.notion.example.test',
        error: null,
      },
    ]);
    const started = await page.start({ provider_id: 'acme/linear' });
    expect(started.connection_id).toBe(`${NAMESPACE}/linear`);
    expect(new URL(started.authorization_url).origin).toBe(new URL(linear.issuer).origin);
    const back = new URL(linear.consent(started.authorization_url));
    const outcome = await broker.connections.callback(back);
    expect(outcome.status).toBe('active');
    spec.now += 1000;
    const view = await page.view();
    expect(view.providers.map((provider) => provider.status)).toEqual(['active', null]);
    // The account the server's ID token named, as a label.
    expect(view.providers.map((provider) => provider.account)).toEqual([
      'alice@example.test',
      null,
    ]);
    expect((await broker.connections.get(ROOT, `${NAMESPACE}/linear`)).account).toBe(
      'alice@example.test',
    );
    // A refresh whose answer names the account again keeps it as the connection's label,
    // never among the tokens the vault holds.
    await broker.connections.credentials(ROOT, `${NAMESPACE}/linear`, { force_refresh: true });
    expect((await broker.connections.get(ROOT, `${NAMESPACE}/linear`)).account).toBe(
      'alice@example.test',
    );
    const sealed = await storage.getVaultEntry('connection_tokens', `${NAMESPACE}/linear`);
    if (sealed === null) throw new Error('the connection holds no tokens');
    const kept = JSON.parse(await broker.vault.open(sealed));
    expect([kept.access_token === undefined, 'account' in kept]).toEqual([false, false]);
    await page.view();
    const completed = events.filter((event) => event.type === 'connect_session.completed');
    expect(completed.map((event) => [event.actor, event.resource, event.data])).toEqual([
      [
        `connect_session:${created.id}`,
        `${NAMESPACE}/linear`,
        { session_id: created.id, provider_id: 'acme/linear', end_user_id: null },
      ],
    ]);
    expect((await broker.connectSessions.list(app))[0]?.completed).toEqual([`${NAMESPACE}/linear`]);
  });

  it('refuses a provider not offered, a disconnect not allowed, and any other path', async () => {
    const { broker, app } = await setUp();
    const created = await broker.connectSessions.create(app, {
      namespace: NAMESPACE,
      providers: ['acme/linear'],
    });
    const page = await broker.connectSessions.open(secretOf(created.url));
    const notOffered = await refusal(page.start({ provider_id: 'acme/notion' }));
    expect([notOffered.code, notOffered.message]).toEqual([
      'not_found',
      'provider "acme/notion" is not offered here',
    ]);
    const disconnect = await refusal(page.disconnect('acme/linear'));
    expect(disconnect.code).toBe('insufficient_scope');
    // The page's principal covers the namespace and the offered providers only.
    expect(page.principal).toEqual({
      kind: 'token',
      name: `connect-session.${created.id}`,
      scopes: ['acme/linear/**', `${NAMESPACE}/**`],
      expiresAt: spec.now + 1_800_000,
      // Its authorizations live as long as the creator's token.
      idHash: app.kind === 'token' ? app.idHash : 'root',
    });
    // The secret is no broker token.
    const asToken = await refusal(broker.authenticate(secretOf(created.url)));
    expect(asToken.code).toBe('invalid_token');
  });

  it('refuses a wrong, tampered, expired, revoked or orphaned secret, and counts the wrong ones per address', async () => {
    const { broker, app } = await setUp();
    const created = await broker.connectSessions.create(app, {
      namespace: NAMESPACE,
      expires_in: 600,
    });
    const secret = secretOf(created.url);
    const [id, random] = secret.slice(4).split('.') as [string, string];
    const tampered = `kcs_${id}.${random.slice(0, -1)}${random.endsWith('A') ? 'B' : 'A'}`;
    for (const wrong of [tampered, 'kcs_nope', `${secret}x`, '']) {
      const refused = await refusal(broker.connectSessions.open(wrong));
      expect([refused.code, refused.message]).toEqual([
        'invalid_token',
        'the connect session is unknown, has expired, or was ended',
      ]);
    }
    // Ten failures from one address (the limit of failed authentications here): then 429.
    for (let i = 0; i < 10; i++) {
      await refusal(broker.connectSessions.open(tampered, '203.0.113.9'));
    }
    const limited = await refusal(broker.connectSessions.open(secret, '203.0.113.9'));
    expect(limited.code).toBe('rate_limited');
    expect((await broker.connectSessions.open(secret, '203.0.113.10')).id).toBe(id);

    spec.now += 600_000;
    expect((await refusal(broker.connectSessions.open(secret))).code).toBe('invalid_token');

    const second = await broker.connectSessions.create(app, { namespace: NAMESPACE });
    expect((await broker.connectSessions.revoke(app, second.id)).status).toBe('revoked');
    expect((await refusal(broker.connectSessions.open(secretOf(second.url)))).code).toBe(
      'invalid_token',
    );

    // The creator's token deleted: its sessions end with it.
    const third = await broker.connectSessions.create(app, { namespace: NAMESPACE });
    expect((await broker.connectSessions.open(secretOf(third.url))).id).toBe(third.id);
    await broker.tokens.delete(ROOT, 'app');
    expect((await refusal(broker.connectSessions.open(secretOf(third.url)))).code).toBe(
      'invalid_token',
    );
    // Another token given the same name since does not bring them back.
    await broker.tokens.mint(ROOT, { name: 'app', scopes: ['acme'], expires_in: 86_400 });
    expect((await refusal(broker.connectSessions.open(secretOf(third.url)))).code).toBe(
      'invalid_token',
    );
  });

  it('ends a consent in progress with its creator token, and sends a verified one back to the app', async () => {
    const { broker, app, linear } = await setUp();
    const verifying = await refusal(
      broker.connectSessions.create(app, { namespace: NAMESPACE, verify: true }),
    );
    expect([verifying.code, verifying.details]).toEqual([
      'invalid_request',
      [
        {
          path: 'redirect_uri',
          message: '"verify" needs a "redirect_uri": the app confirms each connection there',
        },
      ],
    ]);
    const created = await broker.connectSessions.create(app, {
      namespace: NAMESPACE,
      providers: ['acme/linear'],
      verify: true,
      redirect_uri: 'https://app.example.com/connected',
    });
    const page = await broker.connectSessions.open(secretOf(created.url));
    const started = await page.start({ provider_id: 'acme/linear' });
    const back = await broker.connections.callback(
      new URL(linear.consent(started.authorization_url)),
    );
    expect([back.status, back.redirect_to, back.page, typeof back.flow_id]).toEqual([
      'verification_required',
      'https://app.example.com/connected',
      'connect',
      'string',
    ]);
    // The app confirms its user; the connection is then active.
    await broker.connections.verify(app, { flow_id: back.flow_id ?? '' });
    expect((await page.view()).providers[0]?.status).toBe('active');

    // A consent started by the page, then the app's token deleted: the consent completes nothing.
    const other = await page.start({ provider_id: 'acme/linear' });
    await broker.tokens.delete(ROOT, 'app');
    const late = await broker.connections.callback(
      new URL(linear.consent(other.authorization_url)),
    );
    expect([late.status, late.error?.code]).toEqual(['active', 'invalid_request']);
  });
});
