import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { createBroker } from '@keyway/core';
import { createHandler } from '@keyway/http';
import { memoryStorage } from '@keyway/store-memory';
import { bundleCli, startBrokerProcess } from '@keyway/test-support/processes';
import { createTestWorld, type TestWorld } from '@keyway/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ADMIN_COMMANDS, type AdminIo, EXIT, runAdmin } from '../src/index.js';

const ROOT_KEY = 'admin-cli-root-key-0123456789-abcdefghij';
const URL_ = 'https://keyway.example.test';

describe('keyway admin commands, in process against a broker and the test world', () => {
  let world: TestWorld;
  let io: AdminIo & { lines: string[]; errors: string[] };
  let consent: (() => Promise<void>) | null;

  beforeEach(() => {
    world = createTestWorld();
    const broker = createBroker({
      rootKey: ROOT_KEY,
      storage: memoryStorage(),
      fetch: world.fetch,
      baseUrl: URL_,
      providerManagement: true,
      purgeIntervalMs: false,
    });
    const handler = createHandler(broker);
    consent = null;
    const lines: string[] = [];
    const errors: string[] = [];
    io = {
      env: { KEYWAY_URL: URL_, KEYWAY_TOKEN: ROOT_KEY, LINEAR_SECRET: 's3cr3t-value' },
      out: (text) => lines.push(...text.split('\n')),
      err: (text) => errors.push(text),
      fetch: async (input, init) => handler(new Request(input as string, init)),
      // The "user" gives consent while the command waits.
      sleep: async () => {
        await consent?.();
        consent = null;
      },
      tty: false,
      lines,
      errors,
    };
  });

  const run = (...argv: string[]) => runAdmin(argv, io);
  const last = () => io.lines.at(-1) as string;

  it('prints the status: version, readiness, storage, and exits 1 when not ready', async () => {
    const { version } = JSON.parse(
      readFileSync(new URL('../../http/package.json', import.meta.url), 'utf8'),
    ) as { version: string };
    expect(await run('status')).toBe(EXIT.ok);
    expect(io.lines).toEqual([`keyway ${version}: ready`, 'storage: memory']);
    expect(await run('status', '--json')).toBe(EXIT.ok);
    expect(JSON.parse(last())).toEqual({
      version,
      ready: true,
      storage: { engine: 'memory', schema_version: null, schema_expected: null },
      reason: null,
      credential: { name: null, scopes: ['**'], expires_at: null },
      provider_management: true,
      sign_in: false,
    });
    // A database left at an older schema (another instance rolled back, say).
    const storage = memoryStorage();
    const behind = new Proxy(storage, {
      get: (target, property) =>
        property === 'health'
          ? async () => ({ engine: 'sqlite', schema: { version: 2, expected: 3 } })
          : Reflect.get(target, property, target),
    });
    const handler = createHandler(
      createBroker({ rootKey: ROOT_KEY, storage: behind, purgeIntervalMs: false }),
    );
    io.fetch = async (input, init) => handler(new Request(input as string, init));
    io.lines.length = 0;
    expect(await run('status')).toBe(EXIT.refused);
    expect(io.lines).toEqual([
      `keyway ${version}: NOT READY`,
      'storage: sqlite, schema 2 (this version needs 3)',
      'reason: storage: schema version 2, this code needs 3',
    ]);
  });

  it('takes --expires-in as seconds or as a duration', async () => {
    expect(
      await run('token', 'create', 'a', '--scope', 'acme', '--expires-in', '1h', '--json'),
    ).toBe(EXIT.ok);
    expect(await run('token', 'get', 'a', '--json')).toBe(EXIT.ok);
    const hour = JSON.parse(last());
    expect(Date.parse(hour.expires_at) - Date.parse(hour.created_at)).toBe(3_600_000);
    expect(await run('token', 'create', 'b', '--scope', 'acme', '--expires-in', '120')).toBe(
      EXIT.ok,
    );
    expect(await run('token', 'narrow', 'a', '--expires-in', '30m', '--json')).toBe(EXIT.ok);
    const narrowed = JSON.parse(last());
    expect(Date.parse(narrowed.expires_at)).toBeLessThan(Date.parse(hour.expires_at));
    expect(await run('token', 'create', 'c', '--scope', 'acme', '--expires-in', 'soon')).toBe(
      EXIT.usage,
    );
    expect(io.errors.at(-1)?.split('\n')[0]).toBe(
      'keyway: --expires-in takes seconds or a duration like 30m, 1h or 7d, not "soon"',
    );
    expect(await run('token', 'create', 'c', '--scope', 'acme', '--expires-in', '1500ms')).toBe(
      EXIT.usage,
    );
    expect(io.errors.at(-1)?.split('\n')[0]).toBe(
      'keyway: --expires-in must be whole seconds, not 1500ms',
    );
  });

  it('creates, lists, reads, narrows and revokes tokens, in text and in JSON', async () => {
    expect(await run('token', 'create', 'ci', '--scope', 'acme', '--expires-in', '600')).toBe(
      EXIT.ok,
    );
    expect(io.lines[0]).toMatch(/^kw1_[\w-]+$/);
    expect(io.lines[1]).toMatch(/^\(name ci, scopes acme\/\*\*, expires \S+Z; shown once\)$/);
    expect(await run('token', 'list')).toBe(EXIT.ok);
    expect(io.lines.at(-2)).toMatch(/^NAME\s+SCOPES\s+EXPIRES_AT\s+CREATED_BY$/);
    expect(last()).toMatch(/^ci\s+acme\/\*\*\s+\S+Z\s+root$/);
    expect(await run('token', 'narrow', 'ci', '--scope', 'acme/web', '--json')).toBe(EXIT.ok);
    expect(JSON.parse(last())).toMatchObject({ name: 'ci', scopes: ['acme/web/**'] });
    expect(await run('token', 'get', 'ci', '--json')).toBe(EXIT.ok);
    expect(JSON.parse(last()).scopes).toEqual(['acme/web/**']);
    expect(await run('token', 'revoke', 'ci')).toBe(EXIT.ok);
    expect(last()).toBe('revoked ci and its descendants');
    expect(await run('token', 'get', 'ci')).toBe(EXIT.refused);
    expect(io.errors).toEqual(['keyway: not_found: no live token is named "ci"']);
  });

  it('doctor: what will work — registration tried and undone, else custom and its callback; exit 1 when nothing will', async () => {
    expect(await run('doctor', world.resourceUrl)).toBe(EXIT.ok);
    expect(io.lines).toEqual([
      `${world.resourceUrl}: use credentials.mode "register"`,
      `  Authorization server ${world.issuer}: PKCE S256 advertised.`,
      `  Keyway sends resource=${world.resourceUrl} exactly as the server publishes it.`,
      '  Scopes requested: (none).',
      expect.stringMatching(
        /^ {2}Register: dynamic registration works \(a test client, \S+, was registered with client_secret_basic; deleted again\)\.$/,
      ),
      '  Use credentials.mode "register".',
    ]);
    // The test client is gone again (RFC 7592), and nothing was stored.
    expect([world.stats.registrations, world.stats.unregistrations, world.clients.size]).toEqual([
      1, 1, 0,
    ]);
    expect(await run('provider', 'list', '--json')).toBe(EXIT.ok);
    expect(JSON.parse(last()).items).toEqual([]);

    io.lines.length = 0;
    world.set({
      registrationRefused: {
        status: 422,
        error: 'unprocessable_entity',
        description: 'Validation Failed',
      },
    });
    expect(await run('doctor', world.resourceUrl)).toBe(EXIT.ok);
    expect(io.lines.slice(4)).toEqual([
      '  Register: dynamic client registration failed: the server refused: unprocessable_entity (Validation ' +
        `Failed). Register an application with it (redirect URI ${URL_}/api/oauth/callback) and give its client ` +
        'id and secret (credentials.mode "custom").',
      `  Custom: register an application with the server at the redirect URI ${URL_}/api/oauth/callback and ` +
        'give its client id and secret (credentials.mode "custom"; it authenticates with client_secret_basic).',
      '  Use credentials.mode "custom".',
      `  Callback URL to register: ${URL_}/api/oauth/callback`,
    ]);
    expect(await run('doctor', world.resourceUrl, '--json')).toBe(EXIT.ok);
    const report = JSON.parse(last()).report;
    expect([report.ok, report.recommended, report.register.works, report.callback_url]).toEqual([
      true,
      'custom',
      false,
      `${URL_}/api/oauth/callback`,
    ]);

    io.lines.length = 0;
    world.set({ codeChallengeMethods: null });
    expect(await run('doctor', world.resourceUrl)).toBe(EXIT.refused);
    expect(io.lines[0]).toBe(`${world.resourceUrl}: nothing will work`);
    expect(io.lines[1]).toMatch(/^ {2}Discovery failed \(unsupported_authorization_server\) at /);
    expect(last()).toBe('  Nothing will work until discovery succeeds.');
  });

  it('puts providers with --client-name, --auth-method and an mcp --profile, each sent as the API takes it', async () => {
    expect(
      await run(
        'provider',
        'put',
        'named',
        '--resource-url',
        world.resourceUrl,
        '--client-name',
        'Acme Agents',
      ),
    ).toBe(EXIT.ok);
    expect(await run('provider', 'get', 'named', '--json')).toBe(EXIT.ok);
    const named = JSON.parse(last());
    expect(named.credentials.client_metadata).toEqual({ client_name: 'Acme Agents' });
    expect(world.clients.get(named.credentials.client_id)?.client_name).toBe('Acme Agents');
    expect(
      await run(
        'provider',
        'put',
        'posted',
        '--resource-url',
        world.resourceUrl,
        '--client-id',
        'app',
        '--client-secret-env',
        'LINEAR_SECRET',
        '--auth-method',
        'client_secret_post',
        '--json',
      ),
    ).toBe(EXIT.ok);
    expect(JSON.parse(last()).credentials.token_endpoint_auth_method).toBe('client_secret_post');
    expect(
      await run(
        'provider',
        'put',
        'x',
        '--resource-url',
        world.resourceUrl,
        '--client-id',
        'a',
        '--client-name',
        'n',
      ),
    ).toBe(EXIT.usage);
    expect(io.errors.at(-1)?.split('\n')[0]).toBe(
      'keyway: --client-name is what registration sends: leave out --client-id',
    );
    expect(
      await run(
        'provider',
        'put',
        'hubspot',
        '--profile',
        'hubspot-mcp',
        '--resource-url',
        world.resourceUrl,
      ),
    ).toBe(EXIT.usage);
    expect(io.errors.at(-1)?.split('\n')[0]).toBe(
      'keyway: --profile hubspot-mcp names its MCP server: leave out --resource-url and --param',
    );
    // Sent as an mcp provider of that profile: the API says what the profile needs.
    expect(await run('provider', 'put', 'hubspot', '--profile', 'hubspot-mcp')).toBe(EXIT.refused);
    expect(io.errors.at(-1)).toMatch(
      /^keyway: invalid_request: profile "hubspot-mcp": its server registers no clients itself; register an application/,
    );
  });

  it('puts a provider, discovers, connects through consent, and lists and deletes', async () => {
    expect(await run('discover', world.resourceUrl)).toBe(EXIT.ok);
    expect(io.lines[0]).toMatch(/^STEP\s+OK\s+STATUS\s+URL\s+NOTE$/);
    expect(io.lines[1]).toMatch(
      /^probe\s+ok\s+401\s+https:\/\/mcp\.example\.test\/mcp\s+challenge/,
    );
    expect(last()).toBe(`authorization server ${world.issuer}; scopes (none)`);
    expect(
      await run(
        'provider',
        'put',
        'linear',
        '--resource-url',
        world.resourceUrl,
        '--label',
        'Linear',
      ),
    ).toBe(EXIT.ok);
    expect(last()).toMatch(
      new RegExp(`^linear: ${world.resourceUrl} via ${world.issuer} \\(client \\S+, dynamic\\)$`),
    );
    consent = async () => {
      const url = io.lines.find((line) => line.startsWith(world.issuer)) as string;
      const back = new URL(world.consent(url));
      await io.fetch(back.href);
    };
    expect(await run('connect', 'linear', 'acme/alice/linear')).toBe(EXIT.ok);
    expect(io.lines).toContain('Open this address to give consent:');
    expect(last()).toBe('connected acme/alice/linear: scopes (none)');
    expect(await run('connection', 'list', '--provider', 'linear', '--json')).toBe(EXIT.ok);
    expect(JSON.parse(last()).items.map((c: { status: string }) => c.status)).toEqual(['active']);
    expect(await run('connection', 'delete', 'acme/alice/linear')).toBe(EXIT.ok);
    expect(await run('provider', 'delete', 'linear')).toBe(EXIT.ok);
    expect(last()).toBe('deleted provider linear');
    expect(io.errors).toEqual([]);
  });

  it('escapes the control characters of remote values in text output, and keeps them in --json', async () => {
    // A hostile authorization server registers a client id and grants a scope that would
    // retitle the terminal window and clear the screen.
    const hostile = '\u001b]0;pwned\u0007';
    world.set({
      issuedClient: { client_id: `evil${hostile}client` },
      resourceScopesSupported: ['read\u001b[2J\u009b31m'],
    });
    expect(await run('provider', 'put', 'linear', '--resource-url', world.resourceUrl)).toBe(
      EXIT.ok,
    );
    expect(await run('provider', 'get', 'linear')).toBe(EXIT.ok);
    expect(last()).toBe(
      `linear: ${world.resourceUrl} via ${world.issuer} (client evil\\x1b]0;pwned\\x07client, dynamic)`,
    );
    consent = async () => {
      const url = io.lines.find((line) => line.startsWith(world.issuer)) as string;
      await io.fetch(new URL(world.consent(url)).href);
    };
    expect(await run('connect', 'linear', 'acme/alice/linear')).toBe(EXIT.ok);
    expect(last()).toBe('connected acme/alice/linear: scopes read\\x1b[2J\\x9b31m');
    expect(await run('connection', 'get', 'acme/alice/linear')).toBe(EXIT.ok);
    expect(last()).toMatch(
      /^acme\/alice\/linear\s+linear\s+active\s+true\s+read\\x1b\[2J\\x9b31m\s+\S+Z\s+-$/,
    );
    // Nothing printed as text holds a control character.
    // biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point.
    expect(io.lines.join('').match(/[\u0000-\u001f\u007f-\u009f]/)).toBeNull();
    expect(await run('provider', 'get', 'linear', '--json')).toBe(EXIT.ok);
    expect(JSON.parse(last()).credentials.client_id).toBe(`evil${hostile}client`);
    expect(io.errors).toEqual([]);
  });

  it('makes a provider inject-only with --inject-only: hand-outs refused, shown in the line', async () => {
    expect(
      await run('provider', 'put', 'linear', '--resource-url', world.resourceUrl, '--inject-only'),
    ).toBe(EXIT.ok);
    expect(last()).toBe(
      `linear: ${world.resourceUrl} via ${world.issuer} (client ${world.clients.keys().next().value}, dynamic, inject-only)`,
    );
    expect(await run('provider', 'get', 'linear', '--json')).toBe(EXIT.ok);
    expect(JSON.parse(last()).hand_out).toBe(false);
    consent = async () => {
      const url = io.lines.findLast((line) => line.startsWith(world.issuer)) as string;
      await io.fetch(new URL(world.consent(url)).href);
    };
    expect(await run('connect', 'linear', 'acme/alice/linear')).toBe(EXIT.ok);
    const handOut = await io.fetch(`${URL_}/api/oauth/credentials/acme/alice/linear`, {
      headers: { authorization: `Bearer ${ROOT_KEY}` },
    });
    expect(handOut.status).toBe(403);
    expect(((await handOut.json()) as { error: string }).error).toBe('credentials_not_exportable');
    // Put again without the switch: tokens may be handed out again.
    expect(await run('provider', 'put', 'linear', '--resource-url', world.resourceUrl)).toBe(
      EXIT.ok,
    );
    expect(last()).not.toContain('inject-only');
    // --dpop: DPoP-bound tokens, so inject-only too.
    expect(
      await run('provider', 'put', 'linear', '--resource-url', world.resourceUrl, '--dpop'),
    ).toBe(EXIT.ok);
    expect(last()).toBe(
      `linear: ${world.resourceUrl} via ${world.issuer} (client ${world.clients.keys().next().value}, dynamic, DPoP, inject-only)`,
    );
    expect(await run('provider', 'get', 'linear', '--json')).toBe(EXIT.ok);
    expect(JSON.parse(last())).toMatchObject({ dpop: true, hand_out: false });
  });

  it('makes a classic API provider from a profile, its secret from stdin, and lists the catalog', async () => {
    io.stdin = async () => new TextEncoder().encode('gh-secret-0123456789\n');
    expect(
      await run(
        'provider',
        'put',
        'github',
        '--profile',
        'github',
        '--client-id',
        'Iv1.cli',
        '--client-secret-stdin',
        '--scope',
        'repo',
      ),
    ).toBe(EXIT.ok);
    expect(last()).toBe(
      'github: oauth2 profile github via https://github.com (client Iv1.cli, manual)',
    );
    expect(io.lines.join('\n')).not.toContain('gh-secret-0123456789');
    expect(await run('provider', 'get', 'github', '--json')).toBe(EXIT.ok);
    expect(JSON.parse(last())).toMatchObject({
      template: 'oauth2',
      profile: 'github',
      configuration: { scopes: ['repo'] },
      credentials: { client_id: 'Iv1.cli', client_secret_set: true },
    });
    expect(
      await run(
        'provider',
        'put',
        'zd',
        '--profile',
        'zendesk',
        '--param',
        'subdomain=acme',
        '--client-id',
        'z',
      ),
    ).toBe(EXIT.ok);
    expect(last()).toBe(
      'zd: oauth2 profile zendesk via https://acme.zendesk.com (client z, manual)',
    );
    expect(
      await run('provider', 'put', 'x', '--profile', 'github', '--resource-url', world.resourceUrl),
    ).toBe(EXIT.usage);
    expect(io.errors.at(-1)?.split('\n')[0]).toBe(
      'keyway: give --resource-url (an MCP server) or --profile (a classic API), not both',
    );
    expect(
      await run('provider', 'put', 'x', '--resource-url', world.resourceUrl, '--param', 'a=b'),
    ).toBe(EXIT.usage);
    expect(io.errors.at(-1)?.split('\n')[0]).toBe(
      'keyway: --param fills the placeholders of a --profile',
    );
    expect(await run('profile', 'list')).toBe(EXIT.ok);
    expect(io.lines.join('\n')).toMatch(
      /^github\s+oauth2\s+GitHub\s+custom\s+repo read:user\s+rotating$/m,
    );
    // The MCP servers of the catalog too, with the credentials that work there.
    expect(io.lines.join('\n')).toMatch(/^hubspot-mcp\s+mcp\s+HubSpot \(MCP\)\s+custom\s+stable$/m);
    expect(io.lines.join('\n')).toMatch(/^microsoft\s+.*\s+tenant\s+/m);
  });

  it('makes providers of the client credentials and JWT bearer grants, the private key from stdin, and connects at once', async () => {
    const pair = (await crypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, [
      'sign',
      'verify',
    ])) as CryptoKeyPair;
    const der = Buffer.from(await crypto.subtle.exportKey('pkcs8', pair.privateKey));
    const pem = `-----BEGIN PRIVATE KEY-----\n${der.toString('base64')}\n-----END PRIVATE KEY-----\n`;
    world.preregister({
      client_id: 'svc',
      token_endpoint_auth_method: 'private_key_jwt',
      public_jwk: await crypto.subtle.exportKey('jwk', pair.publicKey),
      grant_types: ['client_credentials'],
      redirect_uris: [],
    });
    io.stdin = async () => new TextEncoder().encode(pem);
    const put = (...options: string[]) =>
      run('provider', 'put', 'svc', '--resource-url', world.resourceUrl, ...options);
    expect(
      await put('--client-id', 'svc', '--mode', 'client_credentials', '--private-key-stdin'),
    ).toBe(EXIT.ok);
    expect(last()).toBe(
      `svc: ${world.resourceUrl} via ${world.issuer} (client svc, manual, client credentials grant)`,
    );
    expect(io.lines.join('\n')).not.toContain(der.toString('base64').slice(0, 40));
    expect(await run('connect', 'svc', 'acme/services/svc')).toBe(EXIT.ok);
    expect(last()).toBe('connected acme/services/svc: scopes (none) (client credentials grant)');
    expect(world.stats.clientCredentialsGrants).toBe(1);
    expect(world.stats.authorizations).toBe(0);
    expect(await put('--private-key-stdin')).toBe(EXIT.usage);
    expect(io.errors.at(-1)?.split('\n')[0]).toBe(
      'keyway: --mode, --private-key-stdin, --assertion-source and --auth-method go with --client-id',
    );
    expect(await put('--client-id', 'svc', '--private-key-stdin')).toBe(EXIT.usage);
    expect(io.errors.at(-1)?.split('\n')[0]).toBe(
      'keyway: --private-key-stdin is for --mode client_credentials',
    );
    // Workload identity: the broker reads the JWT from a source its operator configured.
    expect(await put('--client-id', 'w', '--mode', 'jwt_bearer', '--assertion-source', 'k8s')).toBe(
      EXIT.refused,
    );
    expect(io.errors.at(-1)?.split('\n')[0]).toMatch(/^keyway: .*"assertion_source"/);
    expect(await put('--client-id', 'w', '--mode', 'jwt_bearer')).toBe(EXIT.usage);
    expect(io.errors.at(-1)?.split('\n')[0]).toBe(
      'keyway: --mode jwt_bearer takes --assertion-source [--assertion-file], and only it',
    );
    expect(
      await put('--client-id', 'x', '--mode', 'enterprise', '--idp-issuer', 'https://idp.example'),
    ).toBe(EXIT.usage);
    expect(io.errors.at(-1)?.split('\n')[0]).toBe(
      'keyway: --mode enterprise needs --idp-token-endpoint',
    );
    expect(await put('--client-id', 'x', '--idp-client-id', 'k')).toBe(EXIT.usage);
    expect(io.errors.at(-1)?.split('\n')[0]).toBe(
      'keyway: --mode enterprise takes --idp-issuer, --idp-token-endpoint and --idp-client-id, and only it',
    );
    expect(await put('--client-id', 'w', '--mode', 'implicit')).toBe(EXIT.usage);
    expect(io.errors.at(-1)?.split('\n')[0]).toBe(
      'keyway: --mode is one of custom, client_credentials, jwt_bearer, enterprise (register: leave out --client-id)',
    );
  });

  it('shows whether a connection can refresh', async () => {
    world.set({ issueRefreshTokens: false });
    await run('provider', 'put', 'linear', '--resource-url', world.resourceUrl);
    consent = async () => {
      const url = io.lines.findLast((line) => line.startsWith(world.issuer)) as string;
      await io.fetch(new URL(world.consent(url)).href);
    };
    expect(await run('connect', 'linear', 'acme/alice/linear')).toBe(EXIT.ok);
    expect(last()).toBe(
      'connected acme/alice/linear: scopes (none) (no refresh token: a new consent is needed when the token expires)',
    );
    expect(await run('connection', 'get', 'acme/alice/linear')).toBe(EXIT.ok);
    expect(io.lines.at(-2)).toMatch(
      /^CONNECTION_ID\s+PROVIDER_ID\s+STATUS\s+REFRESHABLE\s+SCOPES\s+TOKEN_EXPIRES_AT\s+ERROR$/,
    );
    expect(last()).toMatch(/^acme\/alice\/linear\s+linear\s+active\s+false\s+-\s+\S+Z\s+-$/);
    expect(await run('connection', 'list')).toBe(EXIT.ok);
    expect(last()).toMatch(/^acme\/alice\/linear\s+linear\s+active\s+false\s+\S+Z$/);
  });

  it('re-authorizes a connection in error, waiting for the new consent instead of printing the old error', async () => {
    await run('provider', 'put', 'linear', '--resource-url', world.resourceUrl);
    const decide = (decision: 'approve' | 'deny') => async () => {
      const url = io.lines.findLast((line) => line.startsWith(world.issuer)) as string;
      await io.fetch(new URL(world.consent(url, decision)).href);
    };
    consent = decide('approve');
    expect(await run('connect', 'linear', 'acme/alice/linear')).toBe(EXIT.ok);
    const fail = async () => {
      world.revokeRefreshTokens();
      const forced = await io.fetch(
        `${URL_}/api/oauth/credentials/acme/alice/linear?force_refresh=true`,
        { headers: { authorization: `Bearer ${ROOT_KEY}` } },
      );
      expect(forced.status).toBe(409);
      expect(await run('connection', 'get', 'acme/alice/linear')).toBe(EXIT.ok);
      expect(last()).toMatch(/^acme\/alice\/linear\s+linear\s+error\s+true\s.*\sinvalid_grant$/);
    };
    await fail();
    consent = decide('approve');
    expect(await run('connect', 'linear', 'acme/alice/linear')).toBe(EXIT.ok);
    expect(last()).toBe('connected acme/alice/linear: scopes (none)');
    await fail();
    consent = decide('deny');
    expect(await run('connect', 'linear', 'acme/alice/linear')).toBe(EXIT.refused);
    expect(last()).toMatch(/^failed: access_denied: /);
    expect(world.stats.authorizations).toBe(3);
  });

  it('registers a new client on request, and passes extra parameters', async () => {
    expect(
      await run(
        'provider',
        'put',
        'linear',
        '--resource-url',
        world.resourceUrl,
        '--authorization-param',
        'audience=https://api.example.test',
        '--token-param',
        'audience=https://api.example.test',
        '--json',
      ),
    ).toBe(EXIT.ok);
    const put = JSON.parse(last());
    expect(put.configuration).toMatchObject({
      authorization_params: { audience: 'https://api.example.test' },
      token_params: { audience: 'https://api.example.test' },
    });
    expect(await run('provider', 'register', 'linear', '--json')).toBe(EXIT.ok);
    const registered = JSON.parse(last());
    expect(registered.credentials.client_id).not.toBe(put.credentials.client_id);
    expect(world.stats.registrations).toBe(2);
    expect(
      await run('provider', 'put', 'linear', '--resource-url', world.resourceUrl, '--register'),
    ).toBe(EXIT.ok);
    expect(world.stats.registrations).toBe(3);
    expect(
      await run(
        'provider',
        'put',
        'linear',
        '--resource-url',
        world.resourceUrl,
        '--token-param',
        'oops',
      ),
    ).toBe(EXIT.usage);
    expect(io.errors.at(-1)).toMatch(/^keyway: --token-param takes name=value, not "oops"/);
  });

  it('reports a failed consent and exits 1', async () => {
    await run('provider', 'put', 'linear', '--resource-url', world.resourceUrl);
    consent = async () => {
      const url = io.lines.find((line) => line.startsWith(world.issuer)) as string;
      await io.fetch(new URL(world.consent(url, 'deny')).href);
    };
    expect(await run('connect', 'linear', 'acme/bob/linear')).toBe(EXIT.refused);
    expect(last()).toMatch(/^failed: access_denied: /);
  });

  it('puts, reads, lists and deletes secrets, the value taken from the environment only', async () => {
    expect(await run('secret', 'put', 'acme/linear-key', '--value-env', 'LINEAR_SECRET')).toBe(
      EXIT.ok,
    );
    expect(last()).toBe('stored acme/linear-key (version 1)');
    expect(await run('secret', 'get', 'acme/linear-key')).toBe(EXIT.ok);
    expect(last()).toBe('s3cr3t-value');
    expect(await run('secret', 'list', '--prefix', 'acme', '--json')).toBe(EXIT.ok);
    expect(JSON.parse(last()).items.map((s: { path: string }) => s.path)).toEqual([
      'acme/linear-key',
    ]);
    expect(await run('secret', 'delete', 'acme/linear-key')).toBe(EXIT.ok);
    expect(await run('secret', 'put', 'acme/x', '--value-env', 'NOT_SET')).toBe(EXIT.usage);
    expect(io.errors.at(-1)).toMatch(/^keyway: NOT_SET is not set\n/);
  });

  it('takes a secret from standard input or a file, never from the command line', async () => {
    const { mkdtempSync, rmSync, writeFileSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const dir = mkdtempSync(join(tmpdir(), 'keyway-value-'));
    const pem = '-----BEGIN KEY-----\nAAAA\n-----END KEY-----\n';
    writeFileSync(join(dir, 'key.pem'), pem);
    writeFileSync(join(dir, 'latin1'), Buffer.from([0x63, 0x61, 0x66, 0xe9]));
    const value = async (path: string) => {
      expect(await run('secret', 'get', path, '--json')).toBe(EXIT.ok);
      return JSON.parse(io.lines.at(-1) as string).value as string;
    };
    // Standard input: one trailing line break dropped (echo adds one), the rest exact.
    io.stdin = async () => new TextEncoder().encode('from stdin\r\n');
    expect(await run('secret', 'put', 'acme/in', '--value-stdin')).toBe(EXIT.ok);
    expect(await value('acme/in')).toBe('from stdin');
    io.stdin = async () => new TextEncoder().encode('two lines\n\n');
    expect(await run('secret', 'put', 'acme/in', '--value-stdin')).toBe(EXIT.ok);
    expect(await value('acme/in')).toBe('two lines\n');
    // A file: exactly its bytes.
    expect(await run('secret', 'put', 'acme/pem', '--value-file', join(dir, 'key.pem'))).toBe(
      EXIT.ok,
    );
    expect(await value('acme/pem')).toBe(pem);
    // Mistakes: no source, two sources, a missing file, bytes that are not UTF-8.
    const mistakes: [string[], RegExp][] = [
      [
        [],
        /^keyway: give the value in exactly one of --value-env <VAR>, --value-stdin or --value-file <file>\n/,
      ],
      [
        ['--value-stdin', '--value-env', 'LINEAR_SECRET'],
        /^keyway: give the value in exactly one of/,
      ],
      [
        ['--value-file', join(dir, 'absent')],
        new RegExp(`^keyway: --value-file ${join(dir, 'absent')}: ENOENT\\n`),
      ],
      [
        ['--value-file', join(dir, 'latin1')],
        new RegExp(`^keyway: --value-file ${join(dir, 'latin1')}: not UTF-8 text\\n`),
      ],
    ];
    for (const [options, message] of mistakes) {
      expect(await run('secret', 'put', 'acme/bad', ...options)).toBe(EXIT.usage);
      expect(io.errors.at(-1)).toMatch(message);
    }
    expect(await run('secret', 'get', 'acme/bad')).toBe(EXIT.refused);
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers usage mistakes with 2 and the command’s help, and a missing broker with 3', async () => {
    expect(await run('token', 'frobnicate')).toBe(EXIT.usage);
    expect(io.errors[0]).toMatch(
      /^keyway: unknown command "keyway token frobnicate"\n\nkeyway token create/,
    );
    expect(await run('token', 'create', 'x', '--colour', 'red')).toBe(EXIT.usage);
    expect(io.errors.at(-1)).toMatch(/^keyway: Unknown option '--colour'/);
    // A command's help is its own; a resource's lists each of its commands (one table).
    expect(await run('token', 'create', '--help')).toBe(EXIT.ok);
    expect(io.lines.filter((line) => line.startsWith('keyway token '))).toHaveLength(1);
    expect(io.lines).toContain(
      'keyway token create <name> --scope <s> [--scope <s>…] [--expires-in <seconds|1h|7d>]',
    );
    io.lines.length = 0;
    expect(await run('token', '--help')).toBe(EXIT.ok);
    expect(io.lines.filter((line) => line.startsWith('keyway token '))).toEqual([
      'keyway token create <name> --scope <s> [--scope <s>…] [--expires-in <seconds|1h|7d>]',
      'keyway token list [--limit <n>]',
      'keyway token get <name>',
      'keyway token narrow <name> [--scope <s>…] [--expires-in <seconds|1h|7d>]',
      'keyway token revoke <name>',
    ]);
    // An option another command takes is refused by name, not ignored.
    expect(await run('token', 'get', 'ci', '--prefix', 'acme')).toBe(EXIT.usage);
    expect(io.errors.at(-1)).toMatch(
      /^keyway: --prefix is not an option of "keyway token get"\n\nkeyway token get <name>\n/,
    );
    expect(await run('token', 'get')).toBe(EXIT.usage);
    expect(io.errors.at(-1)).toMatch(/^keyway: missing <name>\n\nkeyway token get <name>/);
    io.env = {};
    expect(await run('token', 'list')).toBe(EXIT.usage);
    expect(io.errors.at(-1)).toMatch(/^keyway: set KEYWAY_URL/);
    io.env = { KEYWAY_URL: 'http://127.0.0.1:9', KEYWAY_TOKEN: ROOT_KEY };
    io.fetch = globalThis.fetch;
    expect(await run('token', 'list')).toBe(EXIT.unreachable);
    expect(io.errors.at(-1)).toMatch(/^keyway: unreachable: http:\/\/127\.0\.0\.1:9: /);
  });

  it('generates keys that a broker accepts', async () => {
    expect(await run('keys', 'generate', '--json')).toBe(EXIT.ok);
    const keys = JSON.parse(last()) as { root_key: string; vault_key: string };
    expect(keys.root_key).toMatch(/^[\w-]{43}$/);
    expect(() =>
      createBroker({
        rootKey: keys.root_key,
        vaultKeys: [keys.vault_key],
        storage: memoryStorage(),
      }),
    ).not.toThrow();
  });
});

describe('keyway admin commands as a process, against a real keyway serve', () => {
  const exec = promisify(execFile);
  let broker: Awaited<ReturnType<typeof startBrokerProcess>>;
  let entry: string;

  beforeAll(async () => {
    broker = await startBrokerProcess({ KEYWAY_ROOT_KEY: ROOT_KEY, KEYWAY_DATABASE: ':memory:' });
    entry = await bundleCli();
  }, 60_000);
  afterAll(() => broker?.stop());

  const keyway = (args: string[], env: Record<string, string> = {}) =>
    exec(process.execPath, [entry, ...args], {
      env: { PATH: process.env.PATH ?? '', KEYWAY_URL: broker.url, KEYWAY_TOKEN: ROOT_KEY, ...env },
    }).then(
      ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
      (error: { code: number; stdout: string; stderr: string }) => error,
    );

  it('lists every command in --help', async () => {
    const { stdout } = await keyway(['--help']);
    for (const command of ['serve', ...ADMIN_COMMANDS])
      expect(stdout).toContain(`keyway ${command}`);
  });

  it('runs every command that --help and the README name (none is unknown)', async () => {
    const { stdout } = await keyway(['--help']);
    const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');
    const named = new Set(
      [...`${stdout}\n${readme}`.matchAll(/^\s*keyway ([a-z]+)\b/gm)].map(([, name]) => name),
    );
    // Each admin command is documented, and each documented one is a command.
    named.delete('serve');
    expect([...named].sort()).toEqual([...ADMIN_COMMANDS].sort());
    for (const command of ADMIN_COMMANDS) {
      const help = await keyway([command, '--help']);
      expect([command, help.code]).toEqual([command, 0]);
      expect(help.stdout).toContain(`keyway ${command}`);
    }
  });

  it('names the variables in configuration errors, and writes nothing before they are valid', async () => {
    const { existsSync, mkdtempSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const dir = mkdtempSync(join(tmpdir(), 'keyway-config-'));
    const file = join(dir, 'keyway.sqlite');
    const failures = [
      [{ KEYWAY_ROOT_KEY: 'short-key' }, 'KEYWAY_ROOT_KEY must be at least 32 characters'],
      [{ KEYWAY_BASE_URL: 'ftp://x' }, 'KEYWAY_BASE_URL must be an absolute http(s) URL'],
      [
        { KEYWAY_WEBHOOK_URL: 'https://hooks.example', KEYWAY_WEBHOOK_SECRET: 'plain' },
        'KEYWAY_WEBHOOK_SECRET must be "whsec_" followed by a base64 key (Standard Webhooks)',
      ],
      [
        {
          KEYWAY_SIGN_IN: 'oidc',
          KEYWAY_SIGN_IN_ISSUER: 'login.example.com',
          KEYWAY_SIGN_IN_CLIENT_ID: 'keyway',
          KEYWAY_SIGN_IN_NAMESPACE: 'acme/users/{name}',
        },
        'KEYWAY_SIGN_IN_ISSUER must be an absolute URL; KEYWAY_SIGN_IN_NAMESPACE names {name}; the claims are ' +
          '{sub}, {email}, {preferred_username}',
      ],
      [
        { KEYWAY_SIGN_IN: 'token', KEYWAY_SIGN_IN_ACCESS_TTL: '2h' },
        'KEYWAY_SIGN_IN_ACCESS_TTL must be an integer from 60 to 3600 (seconds)',
      ],
    ] as const;
    for (const [env, message] of failures) {
      const started = await keyway(['serve'], { KEYWAY_DATABASE: file, PORT: '0', ...env });
      expect([started.code, started.stderr]).toEqual([
        1,
        `keyway: invalid configuration: ${message}\n`,
      ]);
    }
    // Neither the database nor a vault key file was created.
    expect([existsSync(file), existsSync(`${file}.vault-keys`)]).toEqual([false, false]);
    rmSync(dir, { recursive: true, force: true });
  });

  it('re-wraps the vault of a database as a process (`keyway vault rewrap`)', async () => {
    const { mkdtempSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { generateVaultKey } = await import('@keyway/core');
    const dir = mkdtempSync(join(tmpdir(), 'keyway-rewrap-bin-'));
    const file = join(dir, 'keyway.sqlite');
    const rewrap = await keyway(['vault', 'rewrap'], {
      KEYWAY_DATABASE: file,
      KEYWAY_VAULT_KEYS: generateVaultKey(),
    });
    rmSync(dir, { recursive: true, force: true });
    expect([rewrap.code, rewrap.stdout, rewrap.stderr]).toEqual([
      0,
      `re-wrapped 0 vault entries of ${file} onto the first key\n`,
      '',
    ]);
  });

  it('mints with the root key, then works with the minted token, with exact exit codes', async () => {
    const minted = await keyway(['token', 'create', 'ops', '--scope', 'acme', '--json']);
    expect(minted.code).toBe(0);
    const { access_token } = JSON.parse(minted.stdout) as { access_token: string };
    const put = await keyway(['secret', 'put', 'acme/db', '--value-env', 'DB'], {
      KEYWAY_TOKEN: access_token,
      DB: 'postgres://x',
    });
    expect([put.code, put.stdout]).toEqual([0, 'stored acme/db (version 1)\n']);
    const outside = await keyway(['secret', 'get', 'billing/db'], { KEYWAY_TOKEN: access_token });
    expect([outside.code, outside.stderr]).toEqual([
      1,
      'keyway: insufficient_scope: the credential\'s scopes do not cover "billing/db"\n',
    ]);
  });
});

describe('keyway vault rewrap, on the database itself', () => {
  it('moves every entry onto the first key, so the old key can go', async () => {
    const { mkdtempSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { generateVaultKey, rootPrincipal } = await import('@keyway/core');
    const { sqliteStorage } = await import('@keyway/store-sqlite');
    const dir = mkdtempSync(join(tmpdir(), 'keyway-rewrap-'));
    const file = join(dir, 'keyway.sqlite');
    const [oldKey, newKey] = [generateVaultKey(), generateVaultKey()];
    const open = async (vaultKeys: string[]) =>
      createBroker({
        rootKey: ROOT_KEY,
        storage: sqliteStorage(file),
        vaultKeys,
        purgeIntervalMs: false,
      });
    const before = await open([oldKey]);
    await before.secrets.put(rootPrincipal(), 'acme/a', { value: 'one' });
    await before.secrets.put(rootPrincipal(), 'acme/b', { value: 'two' });
    await before.close();

    const lines: string[] = [];
    const io: AdminIo = {
      env: { KEYWAY_DATABASE: file, KEYWAY_VAULT_KEYS: `${newKey},${oldKey}` },
      out: (line) => lines.push(line),
      err: (line) => lines.push(line),
      fetch: globalThis.fetch,
      sleep: async () => {},
      tty: false,
    };
    // Without the old key, nothing is moved: the entries it sealed are named.
    const { createHash } = await import('node:crypto');
    const oldId = createHash('sha256')
      .update(Buffer.from(oldKey, 'base64url'))
      .digest()
      .subarray(0, 9)
      .toString('base64url');
    io.env = { KEYWAY_DATABASE: file, KEYWAY_VAULT_KEYS: newKey };
    expect(await runAdmin(['vault', 'rewrap'], io)).toBe(EXIT.usage);
    expect(lines).toEqual([
      `keyway: the vault holds entries sealed with keys that KEYWAY_VAULT_KEYS does not hold (2 under key id ${oldId}), ` +
        'which no request could open: give back the keys they were sealed with, after the one that encrypts ' +
        '(`keyway vault rewrap` then moves them onto it)\n\nkeyway vault rewrap\n      moves every vault entry onto ' +
        'the first of KEYWAY_VAULT_KEYS (new key first), on the database itself; then drop the old key',
    ]);
    lines.length = 0;
    io.env = { KEYWAY_DATABASE: file, KEYWAY_VAULT_KEYS: `${newKey},${oldKey}` };
    expect(await runAdmin(['vault', 'rewrap'], io)).toBe(EXIT.ok);
    expect(lines).toEqual([`re-wrapped 2 vault entries of ${file} onto the first key`]);
    expect(await runAdmin(['vault', 'rewrap', '--json'], io)).toBe(EXIT.ok);
    expect(JSON.parse(lines.at(-1) as string)).toEqual({ moved: 0, database: file });

    const after = await open([newKey]);
    expect(await after.secrets.get(rootPrincipal(), 'acme/a')).toMatchObject({
      value: 'one',
      version: 1,
    });
    expect(await after.secrets.get(rootPrincipal(), 'acme/b')).toMatchObject({ value: 'two' });
    await after.close();

    io.env = { KEYWAY_DATABASE: join(dir, 'other.sqlite') };
    expect(await runAdmin(['vault', 'rewrap'], io)).toBe(EXIT.usage);
    expect(lines.at(-1)).toMatch(
      /^keyway: set KEYWAY_VAULT_KEYS \(the new key first, then the old ones\)/,
    );
    rmSync(dir, { recursive: true, force: true });
  });
});
