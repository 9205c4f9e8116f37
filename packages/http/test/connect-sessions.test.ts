import { createHandler } from '@keyway/http';
import { createTestWorld, type TestWorld } from '@keyway/testing';
import { describe, expect, it } from 'vitest';
import { storageFactories } from './harness.js';
import { APP, BASE, probePerTest } from './probe-support.js';

/*
 * Connect sessions over HTTP (docs/api.md §19): the app's routes, the hosted page and its
 * assets, and the page's three calls authenticated by the session secret — which opens
 * nothing else. Each attack is a test.
 */

const NAMESPACE = 'tenants/bob';

describe.each(storageFactories)('connect sessions over HTTP ($name storage)', (factory) => {
  const suite = probePerTest(factory, {
    allowedRedirects: [APP],
    rateLimits: { auth: { limit: 5, windowSeconds: 60 } },
  });

  async function setUp(session: Record<string, unknown> = {}) {
    const world = createTestWorld({ now: () => suite.h.now });
    await suite.harness(world.fetch);
    for (const id of ['linear', 'notion']) {
      const created = await suite.h.call('PUT', `/api/admin/providers/${id}`, {
        body: { template: 'mcp', configuration: { resource_url: world.resourceUrl } },
      });
      expect(created.status).toBe(201);
    }
    const app = await suite.h.mint('app', ['tenants', 'linear', 'notion']);
    const created = await suite.h.call('POST', '/api/admin/connect-sessions', {
      token: app,
      body: {
        namespace: NAMESPACE,
        providers: ['linear'],
        end_user: { id: 'bob-1', name: 'Bob' },
        branding: { name: 'Acme', accent: '#0a7cff' },
        ...session,
      },
    });
    expect(created.status).toBe(201);
    const secret = new URL(created.body.url).hash.slice(1);
    return { world, app, created: created.body, secret };
  }

  /** A consent of the page's started authorization, and the browser's return. */
  async function consent(world: TestWorld, authorizationUrl: string) {
    const back = new URL(world.consent(authorizationUrl));
    return suite.h.call('GET', `${back.pathname}${back.search}`, { token: null });
  }

  it('creates a session whose URL holds the secret in its fragment only, lists and ends it', async () => {
    const { app, created, secret } = await setUp();
    expect(Object.keys(created).sort()).toEqual(['expires_at', 'id', 'url']);
    expect(created.url).toBe(`${BASE}/connect#${secret}`);
    expect(secret).toMatch(/^kcs_[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]{43}$/);
    expect(created.expires_at).toBe(new Date(suite.h.now + 1_800_000).toISOString());

    const listed = await suite.h.call('GET', `/api/admin/connect-sessions?namespace=${NAMESPACE}`, {
      token: app,
    });
    expect(listed.status).toBe(200);
    expect(listed.body.items.map((item: { id: string }) => item.id)).toEqual([created.id]);
    expect(listed.body.items[0].status).toBe('active');
    expect(listed.text).not.toContain(secret.slice(4));
    const elsewhere = await suite.h.call(
      'GET',
      '/api/admin/connect-sessions?namespace=tenants/alice',
      {
        token: app,
      },
    );
    expect(elsewhere.body.items).toEqual([]);

    // A token of another tenant sees and ends nothing of it.
    const other = await suite.h.mint('other', ['tenants/alice', 'linear']);
    const foreign = await suite.h.call('DELETE', `/api/admin/connect-sessions/${created.id}`, {
      token: other,
    });
    expect([foreign.status, foreign.body.error]).toEqual([404, 'not_found']);
    const ended = await suite.h.call('DELETE', `/api/admin/connect-sessions/${created.id}`, {
      token: app,
    });
    expect([ended.status, ended.body.status]).toEqual([200, 'revoked']);
    const after = await suite.h.call('GET', '/connect/api/session', { token: secret });
    expect([after.status, after.body.error, after.body.error_description]).toEqual([
      401,
      'invalid_token',
      'the connect session is unknown, has expired, or was ended',
    ]);
    const events = suite.events.filter((event) => event.type.startsWith('connect_session.'));
    expect(events.map((event) => [event.type, event.actor, event.resource])).toEqual([
      ['connect_session.created', 'token:app', NAMESPACE],
    ]);
  });

  it('refuses a body with the field it names', async () => {
    const { app } = await setUp();
    const cases: [Record<string, unknown>, number, string, string][] = [
      [{ namespace: NAMESPACE, expires_in: 30 }, 400, 'invalid_request', 'expires_in'],
      [
        { namespace: NAMESPACE, redirect_uri: 'https://evil.example/x' },
        400,
        'invalid_redirect',
        'redirect_uri',
      ],
      [
        { namespace: NAMESPACE, branding: { accent: 'red;}' } },
        400,
        'invalid_request',
        'branding.accent',
      ],
      [{ namespace: NAMESPACE, providers: ['linear/none'] }, 404, 'not_found', 'providers.0'],
      [{ namespace: 'tenants/../x' }, 400, 'invalid_path', 'namespace'],
    ];
    for (const [body, status, code, path] of cases) {
      const refused = await suite.h.call('POST', '/api/admin/connect-sessions', {
        token: app,
        body,
      });
      expect([refused.status, refused.body.error, refused.body.details?.[0]?.path]).toEqual([
        status,
        code,
        path,
      ]);
    }
    const outside = await suite.h.call('POST', '/api/admin/connect-sessions', {
      token: app,
      body: { namespace: 'elsewhere/bob' },
    });
    expect([outside.status, outside.body.error]).toEqual([403, 'insufficient_scope']);
  });

  it('lets the page read, start and complete its connection; the callback page reports to it', async () => {
    const { world, secret, created } = await setUp();
    const view = await suite.h.call('GET', '/connect/api/session', { token: secret });
    expect(view.status).toBe(200);
    expect(view.headers.get('cache-control')).toBe('no-store');
    expect(view.body).toEqual({
      branding: { name: 'Acme', accent: '#0a7cff' },
      end_user: { name: 'Bob' },
      expires_at: created.expires_at,
      allow_disconnect: false,
      redirect_uri: null,
      opener_origins: [APP],
      providers: [
        {
          provider_id: 'linear',
          label: 'linear',
          connection_id: `${NAMESPACE}/linear`,
          status: null,
          account: null,
          signs_in_at: new URL(world.issuer).host,
          error: null,
        },
      ],
    });
    const started = await suite.h.call('POST', '/connect/api/authorize', {
      token: secret,
      body: { provider_id: 'linear' },
    });
    expect(started.status).toBe(200);
    expect(started.body.connection_id).toBe(`${NAMESPACE}/linear`);
    const back = await consent(world, started.body.authorization_url);
    expect(back.status).toBe(200);
    // The inspector is off here; the page the connect page started still loads the script
    // that tells it how the consent ended.
    expect(back.text).toMatch(
      /data-connection="tenants\/bob\/linear" data-status="active"><\/div><script type="module" src="(\.\.\/)+connect\/assets\/connect-callback\.[0-9a-f]{12}\.js">/,
    );
    const script = /src="(?:\.\.\/)+(connect\/assets\/connect-callback\.[0-9a-f]{12}\.js)"/.exec(
      back.text,
    );
    const asset = await suite.h.call('GET', `/${script?.[1]}`, { token: null });
    expect([asset.status, asset.headers.get('content-type')]).toEqual([
      200,
      'text/javascript; charset=utf-8',
    ]);
    const after = await suite.h.call('GET', '/connect/api/session', { token: secret });
    expect(after.body.providers[0].status).toBe('active');
    const completed = suite.events.filter((event) => event.type === 'connect_session.completed');
    expect(completed.map((event) => [event.resource, event.data])).toEqual([
      [
        `${NAMESPACE}/linear`,
        { session_id: created.id, provider_id: 'linear', end_user_id: 'bob-1' },
      ],
    ]);
    // An authorization started elsewhere loads no script: the inspector is off.
    const direct = await suite.h.call('POST', '/api/oauth/authorize/notion', {
      body: { connection_id: 'tenants/carol/notion' },
    });
    const plain = await consent(world, direct.body.authorization_url);
    expect(plain.text).not.toContain('<script');
  });

  it('disconnects only when the session allows it', async () => {
    const { world, secret } = await setUp();
    const started = await suite.h.call('POST', '/connect/api/authorize', {
      token: secret,
      body: { provider_id: 'linear' },
    });
    await consent(world, started.body.authorization_url);
    const refused = await suite.h.call('DELETE', '/connect/api/providers/linear', {
      token: secret,
    });
    expect([refused.status, refused.body.error]).toEqual([403, 'insufficient_scope']);
    const allowing = await suite.h.call('POST', '/api/admin/connect-sessions', {
      body: { namespace: NAMESPACE, providers: ['linear'], allow_disconnect: true },
    });
    const other = new URL(allowing.body.url).hash.slice(1);
    // No route of the page names a namespace: a connection of another one is out of reach.
    const foreign = await suite.h.call('DELETE', '/connect/api/providers/tenants/alice/linear', {
      token: other,
    });
    expect([foreign.status, foreign.body.error_description]).toEqual([
      404,
      'provider "tenants/alice/linear" is not offered here',
    ]);
    const deleted = await suite.h.call('DELETE', '/connect/api/providers/linear', { token: other });
    expect(deleted.status).toBe(204);
    const gone = await suite.h.call('GET', `/api/oauth/connections/${NAMESPACE}/linear`);
    expect(gone.status).toBe(404);
  });

  it('refuses the secret for every other route, provider and namespace', async () => {
    const { secret } = await setUp();
    const elsewhere: [string, string, unknown?][] = [
      ['GET', '/api/admin/tokens'],
      ['POST', '/api/admin/tokens', { name: 'x', scopes: ['tenants'] }],
      ['GET', '/api/admin/connect-sessions'],
      ['GET', `/api/oauth/connections/${NAMESPACE}/linear`],
      ['GET', `/api/oauth/credentials/${NAMESPACE}/linear`],
      ['POST', '/api/oauth/authorize/linear', { connection_id: `${NAMESPACE}/linear` }],
      ['GET', '/api/vault/secrets'],
      ['GET', '/api/admin/providers'],
      ['POST', `/mcp/${NAMESPACE}/linear`, { jsonrpc: '2.0', id: 1, method: 'ping' }],
    ];
    for (const [method, path, body] of elsewhere) {
      const refused = await suite.h.call(method, path, { token: secret, body });
      expect([method, path, refused.status, refused.body?.error]).toEqual([
        method,
        path,
        401,
        'invalid_token',
      ]);
    }
    const notOffered = await suite.h.call('POST', '/connect/api/authorize', {
      token: secret,
      body: { provider_id: 'notion' },
    });
    expect([notOffered.status, notOffered.body.error_description]).toEqual([
      404,
      'provider "notion" is not offered here',
    ]);
    const noProvider = await suite.h.call('POST', '/connect/api/authorize', {
      token: secret,
      body: { connection_id: 'tenants/alice/linear' },
    });
    expect([noProvider.status, noProvider.body.error]).toEqual([400, 'invalid_request']);
    const none = await suite.h.call('GET', '/connect/api/session', { token: null });
    expect([none.status, none.body.error]).toEqual([401, 'invalid_token']);
    // The secret never reaches a request log.
    expect(suite.h.requestLog.join('\n')).not.toContain(secret.slice(4));
  });

  it('refuses the secret once the session expired', async () => {
    const { secret } = await setUp({ expires_in: 60 });
    expect((await suite.h.call('GET', '/connect/api/session', { token: secret })).status).toBe(200);
    suite.h.now += 60_000;
    const expired = await suite.h.call('POST', '/connect/api/authorize', {
      token: secret,
      body: { provider_id: 'linear' },
    });
    expect([expired.status, expired.body.error]).toEqual([401, 'invalid_token']);
    const listed = await suite.h.call('GET', '/api/admin/connect-sessions');
    expect(listed.body.items.map((item: { status: string }) => item.status)).toEqual(['expired']);
  });

  it('limits wrong secrets per address', async () => {
    const { secret } = await setUp();
    const wrong = `${secret.slice(0, -1)}${secret.endsWith('A') ? 'B' : 'A'}`;
    for (let i = 0; i < 5; i++) {
      const refused = await suite.h.call('GET', '/connect/api/session', {
        token: wrong,
        clientAddress: '203.0.113.5',
      });
      expect(refused.status).toBe(401);
    }
    const limited = await suite.h.call('GET', '/connect/api/session', {
      token: secret,
      clientAddress: '203.0.113.5',
    });
    expect([limited.status, limited.body.error]).toEqual([429, 'rate_limited']);
    const elsewhere = await suite.h.call('GET', '/connect/api/session', {
      token: secret,
      clientAddress: '203.0.113.6',
    });
    expect(elsewhere.status).toBe(200);
  });

  it('serves the page unframeable, or framed only by the origins the operator lists', async () => {
    await setUp();
    const page = await suite.h.call('GET', '/connect', { token: null });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(page.headers.get('x-frame-options')).toBe('DENY');
    // No opener policy: the app's window that opened the page hears how it went.
    expect(page.headers.get('cross-origin-opener-policy')).toBeNull();
    const styles = /href="connect\/assets\/(connect\.[0-9a-f]{12}\.css)"/.exec(page.text);
    const style = await suite.h.call('GET', `/connect/assets/${styles?.[1]}`, { token: null });
    expect([style.status, style.headers.get('content-type')]).toEqual([
      200,
      'text/css; charset=utf-8',
    ]);
    const missing = await suite.h.call('GET', '/connect/assets/app.js', { token: null });
    expect(missing.status).toBe(404);

    const framed = createHandler(suite.h.broker, {
      connectFrameAncestors: ['https://app.example.test', 'http://localhost:3000'],
    });
    const answer = await framed(new Request('http://keyway.test/connect'));
    expect(answer.headers.get('content-security-policy')).toContain(
      'frame-ancestors https://app.example.test http://localhost:3000',
    );
    expect(answer.headers.get('x-frame-options')).toBeNull();
    for (const bad of ['https://app.example.test/path', 'http://app.example.test', '*']) {
      expect(() => createHandler(suite.h.broker, { connectFrameAncestors: [bad] })).toThrow(
        `connectFrameAncestors: ${JSON.stringify(bad)} is not an origin like https://app.example.com (no path; http only on a loopback host)`,
      );
    }
  });
});
