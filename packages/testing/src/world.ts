import { sha256 } from '@noble/hashes/sha2.js';

/** Where the MCP server publishes its protected-resource metadata (RFC 9728). */
export type MetadataLocation =
  /** Only in the 401 challenge's `resource_metadata`, at a URL no well-known rule finds. */
  | 'header'
  /** Only at the path-inserted well-known URL, with no `resource_metadata` in the challenge. */
  | 'path'
  /** Only at the root well-known URL, with no `resource_metadata` in the challenge. */
  | 'root'
  /** At this URL, named in the challenge. */
  | { url: string };

/** Where the authorization server publishes its metadata. */
export type AuthorizationServerMetadataLocation =
  /** RFC 8414: `/.well-known/oauth-authorization-server<path>`. */
  | 'oauth'
  /** OpenID Connect, path-inserted: `/.well-known/openid-configuration<path>`. */
  | 'openid-inserted'
  /** OpenID Connect, appended: `<path>/.well-known/openid-configuration`. */
  | 'openid-appended';

/** What a faulty endpoint does. */
export type Failure =
  /** `500` with an OAuth error body. */
  | 'server_error'
  /** Never answers (until the request's signal aborts). */
  | 'timeout'
  /** `200` with a body that is not JSON. */
  | 'malformed_json'
  /** `200` with a 2 MiB JSON body. */
  | 'oversized';

/** The endpoints a failure can be injected into. */
export type Endpoint =
  | 'probe'
  | 'resource_metadata'
  | 'authorization_server_metadata'
  | 'registration'
  | 'client_metadata_document'
  | 'token'
  | 'revocation'
  | 'mcp';

/** Options of {@link createTestWorld}. Every one has a default that makes a conformant world. */
export interface TestWorldOptions {
  /** The MCP endpoint. Default `https://mcp.example.test/mcp`. */
  resourceUrl?: string;
  /** The authorization server's issuer (may have a path). Default `https://auth.example.test`. */
  issuer?: string;
  metadataLocation?: MetadataLocation;
  authorizationServerMetadata?: AuthorizationServerMetadataLocation;
  /** Offer dynamic client registration (RFC 7591). Default true. */
  dynamicRegistration?: boolean;
  /** Advertise `client_id_metadata_document_supported`. Default false. */
  clientIdMetadataDocuments?: boolean;
  /** `code_challenge_methods_supported`; `null` leaves it out. Default `['S256']`. */
  codeChallengeMethods?: string[] | null;
  /** The `scope` of the 401 challenge, if any. */
  challengeScope?: string;
  /** `scopes_supported` of the protected-resource metadata, if any. */
  resourceScopesSupported?: string[];
  /** `scopes_supported` of the authorization server metadata, if any. */
  serverScopesSupported?: string[];
  /** `token_endpoint_auth_methods_supported`. Default `['client_secret_basic', 'client_secret_post', 'none']`. */
  tokenEndpointAuthMethods?: string[];
  /**
   * A `resource` in the metadata other than the resource URL: a mismatch, or a matching
   * prefix such as the pathless origin. The authorization server takes exactly this value
   * as the audience.
   */
  metadataResource?: string;
  /** An `issuer` in the server metadata other than the one its URL was built from (mismatch). */
  metadataIssuer?: string;
  /**
   * Fields merged over the authorization server's metadata, as a misbehaving or hostile
   * server would publish them (e.g. `{ authorization_endpoint: 'javascript:alert(1)' }`).
   */
  serverMetadataOverrides?: Record<string, unknown>;
  /** Also list a second, unrelated authorization server (after the first). */
  extraAuthorizationServer?: string;
  /** Advertise `authorization_response_iss_parameter_supported` and send `iss`. Default true. */
  issParameter?: boolean;
  /** Issue a new refresh token on every refresh. Default true. */
  rotateRefreshTokens?: boolean;
  /** Access-token lifetime, seconds. Default 3600. */
  accessTokenLifetime?: number;
  /** Lifetime of a dynamically registered client secret, seconds; 0 = never expires. Default 0. */
  clientSecretLifetime?: number;
  /** The status of a successful registration answer: RFC 7591 says 201, some send 200. Default 201. */
  registrationStatus?: 200 | 201;
  /** Leave `client_secret_expires_at` out of the registration answer (a secret that never expires). Default false. */
  omitSecretExpiry?: boolean;
  /** The client id and secret the next registrations issue (e.g. with `-`, `:`, `%`, space, non-ASCII). Default random. */
  issuedClient?: { client_id?: string; client_secret?: string };
  /**
   * How the token endpoint reads `client_secret_basic`: `form` decodes id and secret as
   * RFC 6749 §2.3.1 says; `raw` compares them undecoded, as some servers do. Default `form`.
   */
  basicCredentials?: 'form' | 'raw';
  /** Endpoints that fail, and how. */
  failures?: Partial<Record<Endpoint, Failure>>;
  /** A scope `tools/call` requires; without it the MCP server answers 403 insufficient_scope. */
  toolScope?: string;
  /**
   * A server of the 2025-03-26 revision (fixed at creation): no protected-resource metadata
   * (the challenge names none, the well-known URLs answer 404), and the authorization server
   * at the MCP server's origin, with its metadata at `/.well-known/oauth-authorization-server`
   * (`metadata`), or with none and the default endpoints `/authorize`, `/token`, `/register`
   * (`defaults`). Default: neither, a current server.
   */
  legacy?: 'metadata' | 'defaults';
  /**
   * What the token endpoint does when a rotated (already used) refresh token comes back:
   * `reject` it (`invalid_grant`), or `revoke-family`: reject it and revoke every token of
   * that grant, as servers that detect replay do. Default `reject`.
   */
  refreshTokenReuse?: 'reject' | 'revoke-family';
  /**
   * Whether a refresh must repeat the authorization's RFC 8707 `resource` (some servers
   * refuse a refresh without it: `invalid_target`). Default `optional`.
   */
  resourceOnRefresh?: 'required' | 'optional';
  /** The clock, epoch ms. Default `Date.now`. */
  now?: () => number;
}

/** A client the authorization server knows. */
export interface RegisteredClient {
  client_id: string;
  client_secret?: string;
  token_endpoint_auth_method: string;
  redirect_uris: string[];
  grant_types: string[];
  application_type: string;
  registration_access_token?: string;
  client_secret_expires_at: number;
  /** How it came to be known. */
  via: 'dynamic' | 'metadata_document' | 'preregistered';
}

/** Counters, for asserting what a flow did. */
export interface WorldStats {
  probes: number;
  registrations: number;
  authorizations: number;
  codeExchanges: number;
  refreshes: number;
  revocations: number;
  mcpCalls: number;
  /** Refresh requests that presented a refresh token already used once. */
  refreshTokenReuses: number;
}

/** A test world: one MCP server, one authorization server, in memory. */
export interface TestWorld {
  /** A `fetch` that answers for both servers; `404` for anything else. */
  readonly fetch: (url: string | URL | Request, init?: RequestInit) => Promise<Response>;
  readonly resourceUrl: string;
  readonly issuer: string;
  /** Every request the world received, in order (method and URL; no bodies). */
  readonly requests: { method: string; url: string }[];
  readonly stats: WorldStats;
  /** Clients by id. */
  readonly clients: Map<string, RegisteredClient>;
  /** Registers a client directly, as an operator would for `custom` credentials. */
  preregister(client: Partial<RegisteredClient> & { redirect_uris: string[] }): RegisteredClient;
  /**
   * Plays the user at the consent page: validates the authorization request the way a
   * server must (client, redirect URI, PKCE S256, resource) and answers the redirect back
   * to the client, with a code or with `error=access_denied` when `decision` is `deny`.
   */
  consent(authorizationUrl: string, decision?: 'approve' | 'deny'): string;
  /** Whether an access token is currently valid at the MCP server. */
  isValidAccessToken(token: string): boolean;
  /** Changes an option while the world runs (e.g. inject a failure mid-flow). */
  set(options: Partial<TestWorldOptions>): void;
  /**
   * Forgets every dynamically registered client, as a server that dropped or expired its
   * registrations does: their token requests then fail with `invalid_client`.
   */
  forgetRegisteredClients(): void;
  /**
   * Every secret the world issued or saw: access and refresh tokens, client secrets,
   * registration access tokens, codes, PKCE verifiers and states. For asserting that none
   * of them leaked into a response, a log line or an event.
   */
  secrets(): string[];
}

const ISSUED_CLIENT_PREFIX = 'client_';

function b64url(bytes: Uint8Array): string {
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function random(prefix: string): string {
  return `${prefix}${b64url(crypto.getRandomValues(new Uint8Array(18)))}`;
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers },
  });

const oauthError = (status: number, error: string, description?: string) =>
  json(status, { error, ...(description ? { error_description: description } : {}) });

function failureResponse(
  failure: Failure,
  signal: AbortSignal | null | undefined,
): Promise<Response> {
  switch (failure) {
    case 'server_error':
      return Promise.resolve(oauthError(500, 'server_error', 'injected failure'));
    case 'malformed_json':
      return Promise.resolve(
        new Response('{"issuer": "https://', { headers: { 'content-type': 'application/json' } }),
      );
    case 'oversized':
      return Promise.resolve(json(200, { padding: 'x'.repeat(2 * 1024 * 1024) }));
    case 'timeout':
      return new Promise((_, reject) => {
        signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
      });
  }
}

function withPath(
  base: URL,
  wellKnown: string,
  position: 'inserted' | 'appended' | 'root',
): string {
  const path = base.pathname === '/' ? '' : base.pathname.replace(/\/$/, '');
  if (position === 'root') return `${base.origin}/.well-known/${wellKnown}`;
  if (position === 'inserted') return `${base.origin}/.well-known/${wellKnown}${path}`;
  return `${base.origin}${path}/.well-known/${wellKnown}`;
}

/**
 * Creates an in-memory MCP resource server and OAuth authorization server, reachable
 * through the returned `fetch` (no sockets), for unit-testing OAuth flows end to end:
 * discovery, registration, consent, code exchange, refresh, revocation and MCP calls.
 *
 * @example
 * import { createTestWorld } from '@keyway/testing';
 * const world = createTestWorld({ metadataLocation: 'path', rotateRefreshTokens: false });
 * const broker = createBroker({ rootKey, storage, vaultKeys, fetch: world.fetch });
 * // … authorize, then play the user:
 * const callbackUrl = world.consent(authorizationUrl, 'approve');
 */
export function createTestWorld(initial: TestWorldOptions = {}): TestWorld {
  let options: TestWorldOptions = { ...initial };
  const opt = <K extends keyof TestWorldOptions>(
    key: K,
    fallback: NonNullable<TestWorldOptions[K]>,
  ) => (options[key] ?? fallback) as NonNullable<TestWorldOptions[K]>;
  const resourceUrl = new URL(opt('resourceUrl', 'https://mcp.example.test/mcp'));
  const legacy = initial.legacy;
  const issuer = new URL(
    legacy === undefined ? opt('issuer', 'https://auth.example.test') : resourceUrl.origin,
  );
  const issuerString = issuer.pathname === '/' ? issuer.origin : issuer.href.replace(/\/$/, '');
  const endpoint = (name: string) =>
    legacy === 'defaults' ? `${issuerString}/${name}` : `${issuerString}/oauth/${name}`;
  const now = () => (options.now ?? Date.now)();

  const requests: { method: string; url: string }[] = [];
  const stats: WorldStats = {
    probes: 0,
    registrations: 0,
    authorizations: 0,
    codeExchanges: 0,
    refreshes: 0,
    revocations: 0,
    mcpCalls: 0,
    refreshTokenReuses: 0,
  };
  const clients = new Map<string, RegisteredClient>();
  const codes = new Map<
    string,
    {
      clientId: string;
      redirectUri: string;
      challenge: string;
      resource: string | null;
      scope: string;
      used: boolean;
    }
  >();
  const accessTokens = new Map<
    string,
    { expiresAt: number; scope: string; resource: string | null; revoked: boolean }
  >();
  const refreshTokens = new Map<
    string,
    {
      clientId: string;
      scope: string;
      resource: string | null;
      revoked: boolean;
      /** The grant it descends from: one family per code exchange. */
      family: string;
      /** Used once already (rotated away). */
      used: boolean;
    }
  >();
  /** Secrets seen in requests: PKCE verifiers and states. */
  const seen = new Set<string>();

  const prmUrl = (): string | null => {
    if (legacy !== undefined) return null;
    const location = opt('metadataLocation', 'header');
    if (location === 'header')
      return `${resourceUrl.origin}/keyway-test/resource-metadata${resourceUrl.pathname}`;
    if (location === 'path') return withPath(resourceUrl, 'oauth-protected-resource', 'inserted');
    if (location === 'root') return withPath(resourceUrl, 'oauth-protected-resource', 'root');
    return location.url;
  };
  const challengeNamesMetadata = () => {
    if (legacy !== undefined) return false;
    const location = opt('metadataLocation', 'header');
    return location === 'header' || typeof location === 'object';
  };
  const asMetadataUrl = (): string | null => {
    if (legacy === 'metadata') return `${issuerString}/.well-known/oauth-authorization-server`;
    if (legacy === 'defaults') return null;
    const kind = opt('authorizationServerMetadata', 'oauth');
    if (kind === 'oauth') return withPath(issuer, 'oauth-authorization-server', 'inserted');
    return withPath(
      issuer,
      'openid-configuration',
      kind === 'openid-inserted' ? 'inserted' : 'appended',
    );
  };

  function challenge(extra: string): Response {
    const parts = ['Bearer realm="mcp"'];
    if (challengeNamesMetadata()) parts.push(`resource_metadata="${prmUrl()}"`);
    if (options.challengeScope !== undefined) parts.push(`scope="${options.challengeScope}"`);
    if (extra) parts.push(extra);
    return json(401, { error: 'unauthorized' }, { 'www-authenticate': parts.join(', ') });
  }

  function resourceMetadata(): Response {
    return json(200, {
      resource: options.metadataResource ?? resourceUrl.href,
      authorization_servers: [
        issuerString,
        ...(options.extraAuthorizationServer ? [options.extraAuthorizationServer] : []),
      ],
      bearer_methods_supported: ['header'],
      ...(options.resourceScopesSupported
        ? { scopes_supported: options.resourceScopesSupported }
        : {}),
    });
  }

  function serverMetadata(): Response {
    const methods = opt('codeChallengeMethods', ['S256']);
    return json(200, {
      issuer: options.metadataIssuer ?? issuerString,
      authorization_endpoint: endpoint('authorize'),
      token_endpoint: endpoint('token'),
      revocation_endpoint: endpoint('revoke'),
      ...(opt('dynamicRegistration', true) ? { registration_endpoint: endpoint('register') } : {}),
      response_types_supported: ['code'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      token_endpoint_auth_methods_supported: opt('tokenEndpointAuthMethods', [
        'client_secret_basic',
        'client_secret_post',
        'none',
      ]),
      ...(options.codeChallengeMethods === null
        ? {}
        : { code_challenge_methods_supported: methods }),
      ...(options.serverScopesSupported ? { scopes_supported: options.serverScopesSupported } : {}),
      ...(opt('clientIdMetadataDocuments', false)
        ? { client_id_metadata_document_supported: true }
        : {}),
      ...(opt('issParameter', true)
        ? { authorization_response_iss_parameter_supported: true }
        : {}),
      ...options.serverMetadataOverrides,
    });
  }

  function register(body: Record<string, unknown>): Response {
    stats.registrations++;
    const redirectUris = body.redirect_uris;
    if (
      !Array.isArray(redirectUris) ||
      redirectUris.length === 0 ||
      redirectUris.some((u) => typeof u !== 'string')
    ) {
      return oauthError(400, 'invalid_redirect_uri', 'redirect_uris is required');
    }
    const applicationType =
      typeof body.application_type === 'string' ? body.application_type : 'web';
    for (const uri of redirectUris as string[]) {
      const parsed = new URL(uri);
      const loopback =
        parsed.hostname === 'localhost' ||
        parsed.hostname === '127.0.0.1' ||
        parsed.hostname === '[::1]';
      if (parsed.protocol === 'http:' && (applicationType === 'web' || !loopback)) {
        return oauthError(400, 'invalid_redirect_uri', 'web clients must use https redirect URIs');
      }
    }
    const offered = opt('tokenEndpointAuthMethods', [
      'client_secret_basic',
      'client_secret_post',
      'none',
    ]);
    const requested =
      typeof body.token_endpoint_auth_method === 'string'
        ? body.token_endpoint_auth_method
        : 'client_secret_basic';
    const method = offered.includes(requested) ? requested : (offered[0] as string);
    const lifetime = opt('clientSecretLifetime', 0);
    const issued = opt('issuedClient', {} as { client_id?: string; client_secret?: string });
    const client: RegisteredClient = {
      client_id: issued.client_id ?? random(ISSUED_CLIENT_PREFIX),
      token_endpoint_auth_method: method,
      redirect_uris: redirectUris as string[],
      grant_types: Array.isArray(body.grant_types)
        ? (body.grant_types as string[])
        : ['authorization_code'],
      application_type: applicationType,
      registration_access_token: random('rat_'),
      client_secret_expires_at: lifetime === 0 ? 0 : Math.floor(now() / 1000) + lifetime,
      via: 'dynamic',
      ...(method === 'none' ? {} : { client_secret: issued.client_secret ?? random('secret_') }),
    };
    clients.set(client.client_id, client);
    return json(opt('registrationStatus', 201), {
      client_id: client.client_id,
      ...(client.client_secret ? { client_secret: client.client_secret } : {}),
      client_id_issued_at: Math.floor(now() / 1000),
      ...(opt('omitSecretExpiry', false)
        ? {}
        : { client_secret_expires_at: client.client_secret_expires_at }),
      token_endpoint_auth_method: method,
      redirect_uris: client.redirect_uris,
      grant_types: client.grant_types,
      application_type: client.application_type,
      registration_access_token: client.registration_access_token,
      registration_client_uri: `${endpoint('register')}/${client.client_id}`,
    });
  }

  /** The client behind a `client_id`; a URL client is known when documents are supported. */
  function clientOf(clientId: string): RegisteredClient | null {
    const known = clients.get(clientId);
    if (known !== undefined) return known;
    if (opt('clientIdMetadataDocuments', false) && clientId.startsWith('https://')) {
      return {
        client_id: clientId,
        token_endpoint_auth_method: 'none',
        redirect_uris: [],
        grant_types: ['authorization_code', 'refresh_token'],
        application_type: 'web',
        client_secret_expires_at: 0,
        via: 'metadata_document',
      };
    }
    return null;
  }

  /** Client authentication at the token and revocation endpoints (RFC 6749 §2.3). */
  function authenticateClient(
    request: Request,
    form: URLSearchParams,
  ): RegisteredClient | Response {
    const header = request.headers.get('authorization');
    let clientId = form.get('client_id');
    let secret: string | null = null;
    let method = 'none';
    if (header?.toLowerCase().startsWith('basic ')) {
      const decoded = atob(header.slice(6));
      const colon = decoded.indexOf(':');
      const parts = colon === -1 ? [decoded] : [decoded.slice(0, colon), decoded.slice(colon + 1)];
      const [id, pass] =
        opt('basicCredentials', 'form') === 'raw'
          ? parts
          : parts.map((part) => decodeURIComponent(part.replace(/\+/g, ' ')));
      clientId = id ?? null;
      secret = pass ?? null;
      method = 'client_secret_basic';
    } else if (form.has('client_secret')) {
      secret = form.get('client_secret');
      method = 'client_secret_post';
    }
    const client = clientId === null ? null : clientOf(clientId);
    if (client === null) return oauthError(401, 'invalid_client', 'unknown client');
    if (client.token_endpoint_auth_method !== method) {
      return oauthError(
        401,
        'invalid_client',
        `this client authenticates with ${client.token_endpoint_auth_method}`,
      );
    }
    if (method !== 'none' && secret !== client.client_secret)
      return oauthError(401, 'invalid_client', 'wrong secret');
    if (client.client_secret_expires_at !== 0 && client.client_secret_expires_at * 1000 <= now()) {
      return oauthError(401, 'invalid_client', 'the client secret has expired');
    }
    return client;
  }

  function issueTokens(
    clientId: string,
    scope: string,
    resource: string | null,
    refresh: string | null,
    family: string = random('family_'),
  ) {
    const accessToken = random('at_');
    const lifetime = opt('accessTokenLifetime', 3600);
    accessTokens.set(accessToken, {
      expiresAt: now() + lifetime * 1000,
      scope,
      resource,
      revoked: false,
    });
    let refreshToken = refresh;
    if (refreshToken === null || opt('rotateRefreshTokens', true)) {
      if (refreshToken !== null) {
        const previous = refreshTokens.get(refreshToken) as { revoked: boolean; used: boolean };
        previous.revoked = true;
        previous.used = true;
      }
      refreshToken = random('rt_');
      refreshTokens.set(refreshToken, {
        clientId,
        scope,
        resource,
        revoked: false,
        family,
        used: false,
      });
    }
    return {
      access_token: accessToken,
      token_type: 'Bearer',
      expires_in: lifetime,
      scope,
      ...(refresh === null || opt('rotateRefreshTokens', true)
        ? { refresh_token: refreshToken }
        : {}),
    };
  }

  async function token(request: Request): Promise<Response> {
    const form = new URLSearchParams(await request.text());
    const client = authenticateClient(request, form);
    if (client instanceof Response) return client;
    const grant = form.get('grant_type');
    if (grant === 'authorization_code') {
      stats.codeExchanges++;
      const code = codes.get(form.get('code') ?? '');
      if (code === undefined || code.used || code.clientId !== client.client_id) {
        return oauthError(400, 'invalid_grant', 'unknown, used or foreign code');
      }
      code.used = true;
      if (form.get('redirect_uri') !== code.redirectUri)
        return oauthError(400, 'invalid_grant', 'redirect_uri mismatch');
      const verifier = form.get('code_verifier') ?? '';
      seen.add(verifier);
      if (b64url(sha256(new TextEncoder().encode(verifier))) !== code.challenge) {
        return oauthError(400, 'invalid_grant', 'PKCE verification failed');
      }
      if (code.resource !== null && form.get('resource') !== code.resource) {
        return oauthError(400, 'invalid_target', 'resource mismatch');
      }
      return json(200, issueTokens(client.client_id, code.scope, code.resource, null));
    }
    if (grant === 'refresh_token') {
      stats.refreshes++;
      const presented = form.get('refresh_token') ?? '';
      const refresh = refreshTokens.get(presented);
      if (refresh?.used) {
        stats.refreshTokenReuses++;
        if (opt('refreshTokenReuse', 'reject') === 'revoke-family') {
          // Replay detected: everything of that grant is revoked (RFC 9700 §4.14.2).
          for (const other of refreshTokens.values())
            if (other.family === refresh.family) other.revoked = true;
        }
      }
      if (refresh === undefined || refresh.revoked || refresh.clientId !== client.client_id) {
        return oauthError(400, 'invalid_grant', 'unknown or revoked refresh token');
      }
      if (
        opt('resourceOnRefresh', 'optional') === 'required' &&
        refresh.resource !== null &&
        form.get('resource') !== refresh.resource
      ) {
        return oauthError(400, 'invalid_target', 'resource missing or different on refresh');
      }
      return json(
        200,
        issueTokens(client.client_id, refresh.scope, refresh.resource, presented, refresh.family),
      );
    }
    return oauthError(400, 'unsupported_grant_type');
  }

  async function revoke(request: Request): Promise<Response> {
    const form = new URLSearchParams(await request.text());
    const client = authenticateClient(request, form);
    if (client instanceof Response) return client;
    stats.revocations++;
    const value = form.get('token') ?? '';
    const access = accessTokens.get(value);
    if (access) access.revoked = true;
    const refresh = refreshTokens.get(value);
    if (refresh) refresh.revoked = true;
    return new Response(null, { status: 200 });
  }

  function isValidAccessToken(value: string): boolean {
    const access = accessTokens.get(value);
    return access !== undefined && !access.revoked && access.expiresAt > now();
  }

  async function mcp(request: Request): Promise<Response> {
    const header = request.headers.get('authorization');
    if (header === null) {
      stats.probes++;
      return challenge('');
    }
    stats.mcpCalls++;
    const presented = header.replace(/^bearer\s+/i, '');
    if (!isValidAccessToken(presented)) return challenge('error="invalid_token"');
    const message = (await request.json().catch(() => null)) as {
      id?: unknown;
      method?: string;
      params?: { arguments?: unknown };
    } | null;
    // A notification (no id) gets 202 and no body (Streamable HTTP).
    if (message !== null && message.id === undefined) return new Response(null, { status: 202 });
    const required = options.toolScope;
    if (message?.method === 'tools/call' && required !== undefined) {
      const granted = (accessTokens.get(presented)?.scope ?? '').split(' ').filter(Boolean);
      if (!granted.includes(required)) {
        return json(
          403,
          { error: 'insufficient_scope' },
          {
            'www-authenticate': `Bearer error="insufficient_scope", scope="${[...granted, required].join(' ')}", resource_metadata="${prmUrl()}"`,
          },
        );
      }
    }
    const result =
      message?.method === 'initialize'
        ? {
            protocolVersion: '2025-06-18',
            capabilities: { tools: {} },
            serverInfo: { name: 'keyway-test-world', version: '1' },
          }
        : message?.method === 'tools/list'
          ? {
              tools: [
                {
                  name: 'echo',
                  description: 'Echoes its arguments',
                  inputSchema: { type: 'object' },
                },
              ],
            }
          : message?.method === 'tools/call'
            ? {
                content: [
                  { type: 'text', text: JSON.stringify(message.params?.arguments ?? null) },
                ],
              }
            : null;
    if (result === null)
      return json(200, {
        jsonrpc: '2.0',
        id: message?.id ?? null,
        error: { code: -32601, message: 'Method not found' },
      });
    return json(200, { jsonrpc: '2.0', id: message?.id ?? null, result });
  }

  async function route(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const here = url.href.split('?')[0] as string;
    const fail = (name: Endpoint) => options.failures?.[name];
    const failing = async (name: Endpoint, answer: () => Response | Promise<Response>) => {
      const failure = fail(name);
      return failure ? failureResponse(failure, request.signal) : answer();
    };
    if (here === resourceUrl.href && request.method === 'POST') {
      return failing(request.headers.has('authorization') ? 'mcp' : 'probe', () => mcp(request));
    }
    if (here === resourceUrl.href) {
      // No server-initiated stream and no sessions here.
      return new Response(null, { status: 405, headers: { allow: 'POST' } });
    }
    if (request.method === 'GET' && here === prmUrl())
      return failing('resource_metadata', resourceMetadata);
    if (request.method === 'GET' && asMetadataUrl() !== null && here === asMetadataUrl())
      return failing('authorization_server_metadata', serverMetadata);
    if (
      request.method === 'POST' &&
      here === endpoint('register') &&
      opt('dynamicRegistration', true)
    ) {
      return failing('registration', async () =>
        register((await request.json().catch(() => ({}))) as Record<string, unknown>),
      );
    }
    if (request.method === 'POST' && here === endpoint('token'))
      return failing('token', () => token(request));
    if (request.method === 'POST' && here === endpoint('revoke'))
      return failing('revocation', () => revoke(request));
    return json(404, { error: 'not_found' });
  }

  return {
    resourceUrl: resourceUrl.href,
    issuer: issuerString,
    requests,
    stats,
    clients,
    async fetch(input, init) {
      const request =
        input instanceof Request && init === undefined ? input : new Request(input, init);
      requests.push({ method: request.method, url: request.url });
      return route(request);
    },
    preregister(partial) {
      const client: RegisteredClient = {
        client_id: partial.client_id ?? random(ISSUED_CLIENT_PREFIX),
        token_endpoint_auth_method:
          partial.token_endpoint_auth_method ??
          (partial.client_secret ? 'client_secret_basic' : 'none'),
        grant_types: partial.grant_types ?? ['authorization_code', 'refresh_token'],
        application_type: partial.application_type ?? 'web',
        client_secret_expires_at: partial.client_secret_expires_at ?? 0,
        via: 'preregistered',
        ...partial,
      };
      clients.set(client.client_id, client);
      return client;
    },
    consent(authorizationUrl, decision = 'approve') {
      stats.authorizations++;
      const url = new URL(authorizationUrl);
      const params = url.searchParams;
      if (url.href.split('?')[0] !== endpoint('authorize'))
        throw new Error('not this server’s authorization endpoint');
      const client = clientOf(params.get('client_id') ?? '');
      if (client === null) throw new Error('unknown client_id');
      const redirectUri = params.get('redirect_uri') ?? '';
      if (client.via !== 'metadata_document' && !client.redirect_uris.includes(redirectUri)) {
        throw new Error('redirect_uri is not registered');
      }
      const back = new URL(redirectUri);
      const state = params.get('state');
      if (state !== null) {
        seen.add(state);
        back.searchParams.set('state', state);
      }
      if (opt('issParameter', true)) back.searchParams.set('iss', issuerString);
      const fault = (error: string) => {
        back.searchParams.set('error', error);
        return back.href;
      };
      if (params.get('response_type') !== 'code') return fault('unsupported_response_type');
      if (params.get('code_challenge_method') !== 'S256' || !params.get('code_challenge'))
        return fault('invalid_request');
      const resource = params.get('resource');
      // The audience is the resource exactly as the metadata publishes it.
      if (resource !== null && resource !== (options.metadataResource ?? resourceUrl.href))
        return fault('invalid_target');
      if (decision === 'deny') return fault('access_denied');
      const code = random('code_');
      codes.set(code, {
        clientId: client.client_id,
        redirectUri,
        challenge: params.get('code_challenge') as string,
        resource,
        scope: params.get('scope') ?? '',
        used: false,
      });
      back.searchParams.set('code', code);
      return back.href;
    },
    isValidAccessToken,
    set(changes) {
      options = { ...options, ...changes };
    },
    forgetRegisteredClients() {
      for (const [id, client] of clients) if (client.via === 'dynamic') clients.delete(id);
    },
    secrets() {
      return [
        ...accessTokens.keys(),
        ...refreshTokens.keys(),
        ...codes.keys(),
        ...seen,
        ...[...clients.values()].flatMap((client) => [
          client.client_secret,
          client.registration_access_token,
        ]),
      ].filter((secret): secret is string => typeof secret === 'string' && secret.length >= 8);
    },
  };
}
