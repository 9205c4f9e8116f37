import { memoryStorage } from '@keyway/store-memory';
import { createTestWorld, type TestWorld } from '@keyway/testing';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  type Broker,
  connectionFetch,
  createBroker,
  deriveVaultKey,
  InsufficientScopeError,
  type KeywayEvent,
  OutboundError,
  rootPrincipal,
} from '../src/index.js';

const ROOT_KEY = 'core-services-root-key-0123456789-abcdefgh';
const VAULT_KEY = 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8';
const START = Date.UTC(2026, 10, 22, 8, 0, 0);
const root = rootPrincipal();

/**
 * Core's services through the broker API, in memory: what the HTTP suite proves over the
 * wire, proved here without it.
 */
describe('the broker in process', () => {
  let now: number;
  let world: TestWorld;
  let events: KeywayEvent[];
  let broker: Broker;

  beforeEach(() => {
    now = START;
    events = [];
    world = createTestWorld({ now: () => now, accessTokenLifetime: 3600 });
    broker = createBroker({
      rootKey: ROOT_KEY,
      storage: memoryStorage(),
      now: () => now,
      vaultKeys: [VAULT_KEY],
      fetch: world.fetch,
      baseUrl: 'https://keyway.example.test',
      providerManagement: true,
      purgeIntervalMs: false,
      refreshMarginMs: 120_000,
      onEvent: (event) => {
        events.push(event);
      },
    });
  });

  async function connect(connectionId: string, decision: 'approve' | 'deny' = 'approve') {
    const started = await broker.connections.authorize(root, 'linear', {
      connection_id: connectionId,
    });
    const back = new URL(world.consent(started.authorization_url, decision));
    return broker.connections.callback(back);
  }

  describe('tokens', () => {
    it('mints, authenticates, delegates, narrows with its tree and deletes', async () => {
      const issued = await broker.tokens.mint(root, { name: 'ci', scopes: ['acme'] });
      expect(issued).toMatchObject({ name: 'ci', token_type: 'Bearer', scopes: ['acme/**'] });
      const ci = await broker.authenticate(issued.access_token);
      expect(ci).toMatchObject({ kind: 'token', name: 'ci', scopes: ['acme/**'] });
      const child = await broker.tokens.mint(ci, { name: 'ci.job', scopes: ['acme/repo'] });
      await expect(
        broker.tokens.mint(ci, { name: 'other', scopes: ['acme'] }),
      ).rejects.toMatchObject({ code: 'delegation_denied' });
      const narrowed = await broker.tokens.narrow(root, 'ci', { scopes: ['acme/web'] });
      expect(narrowed.scopes).toEqual(['acme/web/**']);
      // The child held only acme/repo: nothing of it is left under acme/web, so it is gone.
      await expect(broker.authenticate(child.access_token)).rejects.toMatchObject({
        code: 'invalid_token',
      });
      expect((await broker.tokens.list(root, { limit: 10 })).items.map((t) => t.name)).toEqual([
        'ci',
      ]);
      await broker.tokens.delete(root, 'ci');
      await expect(broker.tokens.get(root, 'ci')).rejects.toMatchObject({ code: 'not_found' });
      expect(events.map((e) => e.type)).toEqual([
        'token.created',
        'token.created',
        'token.narrowed',
        'token.deleted',
      ]);
    });

    it('takes typed input only: a query string is the HTTP layer’s to convert', async () => {
      // @ts-expect-error: what a JavaScript caller may pass
      await expect(broker.tokens.list(root, { limit: '10' })).rejects.toMatchObject({
        code: 'invalid_request',
        message: '"limit" must be an integer from 1 to 500',
      });
      // @ts-expect-error: what a JavaScript caller may pass
      await expect(broker.tokens.mint(root, 'ci')).rejects.toMatchObject({
        code: 'invalid_request',
        message: 'the body must be a JSON object',
      });
      // @ts-expect-error: what a JavaScript caller may pass
      await expect(broker.tokens.list(root, { limit: 1, extra: true })).rejects.toMatchObject({
        code: 'invalid_request',
      });
    });
  });

  describe('secrets', () => {
    it('writes, reads, lists within scope and deletes', async () => {
      const alice = await broker.authenticate(
        (await broker.tokens.mint(root, { name: 'alice', scopes: ['acme/users/alice'] }))
          .access_token,
      );
      const written = await broker.secrets.put(alice, 'acme/users/alice/api-key', { value: 's3' });
      expect(written).toMatchObject({ created: true, secret: { version: 1 } });
      expect(await broker.secrets.get(alice, 'acme/users/alice/api-key')).toMatchObject({
        value: 's3',
      });
      await expect(
        broker.secrets.put(alice, 'acme/users/bob/api-key', { value: 'x' }),
      ).rejects.toMatchObject({ code: 'insufficient_scope' });
      await broker.secrets.put(root, 'acme/users/bob/api-key', { value: 'b' });
      expect((await broker.secrets.list(alice)).items.map((s) => s.path)).toEqual([
        'acme/users/alice/api-key',
      ]);
      await broker.secrets.delete(alice, 'acme/users/alice/api-key');
      await expect(broker.secrets.get(alice, 'acme/users/alice/api-key')).rejects.toMatchObject({
        code: 'not_found',
      });
    });
  });

  describe('providers', () => {
    it('creates from discovery, reads, lists, refuses to delete in use, then deletes', async () => {
      const { provider, created } = await broker.providers.put(root, 'linear', {
        template: 'mcp',
        configuration: { resource_url: world.resourceUrl },
      });
      expect(created).toBe(true);
      expect(provider.authorization_server.issuer).toBe(world.issuer);
      expect(provider.credentials).toMatchObject({ mode: 'register', registration: 'dynamic' });
      expect((await broker.providers.list(root, { prefix: 'linear' })).items).toHaveLength(1);
      await connect('acme/alice/linear');
      await expect(broker.providers.delete(root, 'linear')).rejects.toMatchObject({
        code: 'conflict',
      });
      await broker.connections.delete(root, 'acme/alice/linear');
      await broker.providers.delete(root, 'linear');
      await expect(broker.providers.get(root, 'linear')).rejects.toMatchObject({
        code: 'not_found',
      });
      const types = events.map((e) => e.type);
      expect(types.at(-1)).toBe('provider.deleted');
      expect(events.at(-1)).toMatchObject({ actor: 'root', resource: 'linear' });
    });
  });

  describe('connections', () => {
    beforeEach(async () => {
      await broker.providers.put(root, 'linear', {
        template: 'mcp',
        configuration: { resource_url: world.resourceUrl },
      });
    });

    it('authorizes, hands out credentials, refreshes within the configured margin', async () => {
      expect(await connect('acme/alice/linear')).toMatchObject({
        connection_id: 'acme/alice/linear',
        status: 'active',
        error: null,
      });
      const first = await broker.connections.credentials(root, 'acme/alice/linear');
      expect(world.isValidAccessToken(first.access_token)).toBe(true);
      expect(world.stats.refreshes).toBe(0);
      // Two minutes before expiry: inside the 120 s margin configured above.
      now = START + 3600_000 - 119_000;
      const second = await broker.connections.credentials(root, 'acme/alice/linear');
      expect(world.stats.refreshes).toBe(1);
      expect(second.access_token).not.toBe(first.access_token);
      const forced = await broker.connections.credentials(root, 'acme/alice/linear', {
        force_refresh: true,
      });
      expect(world.stats.refreshes).toBe(2);
      expect(forced.access_token).not.toBe(second.access_token);
      await expect(
        // @ts-expect-error: what a JavaScript caller may pass
        broker.connections.credentials(root, 'acme/alice/linear', { force_refresh: 'true' }),
      ).rejects.toMatchObject({
        code: 'invalid_request',
        message: '"force_refresh" must be true or false',
      });
    });

    it('lists by status and reads a connection with a typed error code', async () => {
      await connect('acme/alice/linear');
      const denied = await connect('acme/bob/linear', 'deny');
      expect(denied.status).toBe('error');
      expect(denied.error?.code).toBe('access_denied');
      const active = await broker.connections.list(root, { status: 'active' });
      expect(active.items.map((c) => c.connection_id)).toEqual(['acme/alice/linear']);
      // @ts-expect-error: what a JavaScript caller may pass
      await expect(broker.connections.list(root, { status: 'done' })).rejects.toMatchObject({
        code: 'invalid_request',
        message: '"status" must be pending, active or error',
      });
      expect(await broker.connections.get(root, 'acme/bob/linear')).toMatchObject({
        status: 'error',
        error: { code: 'access_denied' },
      });
    });

    it('needs a principal that covers the connection and the provider', async () => {
      const bob = await broker.authenticate(
        (await broker.tokens.mint(root, { name: 'bob', scopes: ['acme/bob'] })).access_token,
      );
      await expect(
        broker.connections.authorize(bob, 'linear', { connection_id: 'acme/bob/linear' }),
      ).rejects.toMatchObject({ code: 'insufficient_scope' });
      await connect('acme/alice/linear');
      await expect(broker.connections.get(bob, 'acme/alice/linear')).rejects.toMatchObject({
        code: 'insufficient_scope',
      });
    });
  });
});

describe('a broker made of a root key and a storage', () => {
  it('keeps secrets under a vault key derived from the root key', async () => {
    const storage = memoryStorage();
    const broker = createBroker({ rootKey: ROOT_KEY, storage, purgeIntervalMs: false });
    await broker.secrets.put(root, 'acme/api-key', { value: 's3cr3t' });
    expect(await broker.secrets.get(root, 'acme/api-key')).toMatchObject({ value: 's3cr3t' });
    const entry = await storage.getVaultEntry('secret', 'acme/api-key');
    expect(entry?.ciphertext).not.toContain('s3cr3t');
    // The same key, written down: the way to explicit keys before the root key rotates.
    const explicit = createBroker({
      rootKey: ROOT_KEY,
      storage,
      vaultKeys: [deriveVaultKey(ROOT_KEY)],
      purgeIntervalMs: false,
    });
    expect(await explicit.secrets.get(root, 'acme/api-key')).toMatchObject({ value: 's3cr3t' });
    expect(deriveVaultKey(ROOT_KEY)).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(deriveVaultKey(`${ROOT_KEY}x`)).not.toBe(deriveVaultKey(ROOT_KEY));
  });

  it('refuses provider features without a base URL when it is made, not at the first request', () => {
    const base = { rootKey: ROOT_KEY, storage: memoryStorage(), purgeIntervalMs: false as const };
    const message =
      'invalid broker configuration: "baseUrl" is required with providerManagement or providers: the OAuth callback is {baseUrl}/api/oauth/callback';
    expect(() => createBroker({ ...base, providerManagement: true })).toThrow(
      new TypeError(message),
    );
    expect(() =>
      createBroker({
        ...base,
        providers: {
          linear: { template: 'mcp', configuration: { resource_url: 'https://x.test' } },
        },
      }),
    ).toThrow(new TypeError(message));
  });
});

describe('refresh timing options', () => {
  it('refuses a refresh margin or lease out of range, naming the option', () => {
    const base = { rootKey: ROOT_KEY, storage: memoryStorage(), purgeIntervalMs: false as const };
    expect(() => createBroker({ ...base, refreshMarginMs: -1 })).toThrow(
      new TypeError(
        'invalid broker configuration: "refreshMarginMs" must be an integer from 0 to 3600000',
      ),
    );
    expect(() => createBroker({ ...base, refreshLeaseMs: 10 })).toThrow(
      new TypeError(
        'invalid broker configuration: "refreshLeaseMs" must be an integer from 300 to 600000',
      ),
    );
  });
});

describe('errors a caller can catch share one shape', () => {
  it('OutboundError is an upstream_error whose failure says why, with the API body shape', () => {
    const error = new OutboundError('blocked_address', 'https://10.0.0.1 is a private address');
    expect(error.failure).toBe('blocked_address');
    expect(error.code).toBe('upstream_error');
    expect(error.toJSON()).toEqual({
      error: 'upstream_error',
      error_description: 'https://10.0.0.1 is a private address',
    });
  });

  it('InsufficientScopeError carries its code and the challenged scopes', () => {
    const error = new InsufficientScopeError(
      ['read', 'write'],
      new Response(null, { status: 403 }),
    );
    expect(error.code).toBe('insufficient_scope');
    expect(error.toJSON()).toEqual({
      error: 'insufficient_scope',
      error_description: 'the MCP server needs more scope: read write',
      details: [{ path: 'scope', scopes: ['read', 'write'] }],
    });
  });
});

describe('connectionFetch() over Keyway’s HTTP API', () => {
  const answering = (status: number, body: unknown) =>
    connectionFetch({
      source: {
        keywayUrl: 'https://keyway.example.test',
        token: 'kw1_token',
        connectionId: 'acme/alice/linear',
        keywayFetch: async () => Response.json(body, { status }),
      },
      fetch: async () => new Response('unreachable', { status: 500 }),
    });

  it('keeps a documented error code of the remote broker', async () => {
    const fetchMcp = answering(409, {
      error: 'connection_not_active',
      error_description: 'connection "acme/alice/linear" is pending: authorize it first',
    });
    await expect(fetchMcp('https://mcp.example.test/mcp')).rejects.toMatchObject({
      code: 'connection_not_active',
      status: 409,
      message: 'connection "acme/alice/linear" is pending: authorize it first',
    });
  });

  it('reads an unknown code or a malformed answer as upstream_error', async () => {
    await expect(
      answering(418, { error: 'teapot', error_description: 'short and stout' })(
        'https://mcp.example.test/mcp',
      ),
    ).rejects.toMatchObject({ code: 'upstream_error', status: 502, message: 'short and stout' });
    await expect(
      answering(200, { access_token: 42 })('https://mcp.example.test/mcp'),
    ).rejects.toMatchObject({ code: 'upstream_error', message: 'Keyway answered HTTP 200' });
  });
});
