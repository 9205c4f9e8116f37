import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningServer, serve } from '../src/index.js';
import { Browser, callApi, close, listen, oidcProvider } from './peers.js';

/*
 * A classic OAuth 2 flow end to end: `keyway serve` on SQLite, an `oauth2` provider
 * with its endpoints named, against oidc-provider over loopback — consent in its dev pages,
 * the code exchanged with PKCE, `iss` checked, a refresh, a revocation on delete.
 */

const ROOT_KEY = 'oauth2-root-key-0123456789abcdefghijklmnop';
const VAULT_KEY = 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8';
const CLIENT = { id: 'classic-app', secret: 'classic-app-secret-0123456789' };

describe('the oauth2 template against oidc-provider, through keyway serve', () => {
  let asServer: Server;
  let issuer: string;
  let directory: string;
  let broker: RunningServer;
  const grants = { refreshes: 0, revocations: 0, resources: [] as (string | undefined)[] };

  beforeAll(async () => {
    directory = mkdtempSync(join(tmpdir(), 'keyway-oauth2-'));
    asServer = createServer();
    issuer = await listen(asServer);
    broker = await serve({
      port: 0,
      rootKey: ROOT_KEY,
      database: join(directory, 'keyway.sqlite'),
      vaultKeys: [VAULT_KEY],
      allowedHosts: ['127.0.0.1'],
      log: () => {},
      logLevel: 'silent',
    });
    const callback = `http://localhost:${new URL(broker.url).port}/api/oauth/callback`;
    const provider = oidcProvider(issuer, () => 'http://127.0.0.1:1/unused', {
      clients: [
        {
          client_id: CLIENT.id,
          client_secret: CLIENT.secret,
          redirect_uris: [callback],
          token_endpoint_auth_method: 'client_secret_post',
          grant_types: ['authorization_code', 'refresh_token'],
          application_type: 'native',
        },
      ],
      accessTokenTTL: 60,
    });
    provider.on(
      'grant.success',
      (ctx: { oidc: { params?: { grant_type?: string; resource?: string } } }) => {
        grants.resources.push(ctx.oidc.params?.resource);
        if (ctx.oidc.params?.grant_type === 'refresh_token') grants.refreshes++;
      },
    );
    // RFC 7009 revocation: oidc-provider destroys the token presented (and revokes its grant).
    const revoked = () => {
      grants.revocations++;
    };
    provider.on('access_token.destroyed', revoked);
    provider.on('refresh_token.destroyed', revoked);
    provider.on('grant.revoked', revoked);
    asServer.on('request', provider.callback());
  });

  afterAll(async () => {
    await broker?.close();
    if (asServer) await close(asServer);
    rmSync(directory, { recursive: true, force: true });
  });

  const api = (method: string, path: string, body?: unknown) =>
    callApi(broker.url, ROOT_KEY, method, path, body);

  it('connects, refreshes and revokes a classic API connection', async () => {
    const created = await api('PUT', '/api/admin/providers/classic', {
      template: 'oauth2',
      label: 'A classic API',
      configuration: {
        scopes: ['openid', 'offline_access'],
        // An OpenID provider issues a refresh token for offline_access only after consent.
        authorization_params: { prompt: 'consent' },
        authorization_endpoint: `${issuer}/auth`,
        token_endpoint: `${issuer}/token`,
        revocation_endpoint: `${issuer}/token/revocation`,
        issuer,
        token_endpoint_auth_method: 'client_secret_post',
      },
      credentials: { client_id: CLIENT.id, client_secret: CLIENT.secret },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body).toMatchObject({ template: 'oauth2', profile: null, resource: null });

    const started = await api('POST', '/api/oauth/authorize/classic', {
      connection_id: 'acme/alice/classic',
    });
    expect(started.status, JSON.stringify(started.body)).toBe(201);
    const consentUrl = new URL(started.body.authorization_url);
    expect(consentUrl.searchParams.get('code_challenge_method')).toBe('S256');
    expect(consentUrl.searchParams.has('resource')).toBe(false);
    const back = await new Browser().consent(
      started.body.authorization_url,
      `http://localhost:${new URL(broker.url).port}/api/oauth/callback`,
    );
    // oidc-provider sends `iss` (RFC 9207): it is the issuer Keyway was given.
    expect(new URL(back).searchParams.get('iss')).toBe(issuer);
    expect(await (await fetch(back)).text()).toContain('Connected');

    const view = await api('GET', '/api/oauth/connections/acme/alice/classic');
    expect(view.body).toMatchObject({
      status: 'active',
      refreshable: true,
      scopes: ['openid', 'offline_access'],
      metadata: {},
    });
    const refreshed = await api(
      'GET',
      '/api/oauth/credentials/acme/alice/classic?force_refresh=true',
    );
    expect(refreshed.status, JSON.stringify(refreshed.body)).toBe(200);
    expect(grants.refreshes).toBe(1);
    // No RFC 8707 resource to a classic API, on the code exchange nor on the refresh.
    expect(grants.resources).toEqual([undefined, undefined]);

    const before = grants.revocations;
    const deleted = await api('DELETE', '/api/oauth/connections/acme/alice/classic');
    expect(deleted.status).toBe(204);
    expect(grants.revocations).toBeGreaterThan(before);
  });
});
