import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import * as oauth from 'oauth4webapi';
import { z } from 'zod';
import { toBase64Url, utf8 } from './bytes.js';
import { selectScopes } from './discovery.js';
import { KeywayError } from './errors.js';
import type { EmitEvent } from './events.js';
import { OutboundError, type OutboundFetch } from './outbound.js';
import { type ListOptions, type Page, parseListOptions, toPage } from './pagination.js';
import { actorOf, assertCoversPath, type Principal } from './principal.js';
import type { ProviderService, ProviderState } from './providers.js';
import { libraryOptions } from './registration.js';
import { parseResourcePath } from './resource-path.js';
import { listableSubtrees } from './secrets.js';
import type { ConnectionRecord, ConnectionStatus, JsonObject, Storage } from './storage.js';
import { parseShape } from './validation.js';
import type { Vault } from './vault.js';

/** Vault kinds of what connections keep. */
export const CONNECTION_TOKENS_KIND = 'connection_tokens';
export const PKCE_VERIFIER_KIND = 'pkce_verifier';

/** How long an authorization may take from authorize to callback. */
export const PENDING_AUTHORIZATION_TTL_MS = 10 * 60 * 1000;

/** Body of `POST /api/oauth/authorize/<provider_id>` (API.md §5). */
export interface AuthorizeInput {
  connection_id: string;
  scopes?: string[];
  redirect_to?: string;
}

/** The answer of an authorize call. */
export interface AuthorizeResult {
  connection_id: string;
  provider_id: string;
  authorization_url: string;
  expires_at: string;
}

/** A connection as the API shows it: never a token. */
export interface ConnectionView {
  connection_id: string;
  provider_id: string;
  status: ConnectionStatus;
  scopes: string[];
  token_expires_at: string | null;
  created_at: string;
  updated_at: string;
  authorized_at: string | null;
  last_refreshed_at: string | null;
  error: { code: string; description: string } | null;
}

/** What `GET /api/oauth/credentials/<path>` answers (API.md §5). */
export interface Credentials {
  connection_id: string;
  access_token: string;
  token_type: 'Bearer';
  expires_at: string | null;
  scopes: string[];
}

/** The outcome of a callback, for the HTTP layer to redirect or render. */
export interface CallbackOutcome {
  connection_id: string;
  status: 'active' | 'error';
  error: { code: string; description: string } | null;
  redirect_to: string | null;
}

/** What `state` of a connection record holds. */
export interface ConnectionState {
  scopes: string[];
  token_expires_at: number | null;
  authorized_at: number | null;
  last_refreshed_at: number | null;
  error: { code: string; description: string } | null;
}

/** What the connection's vault entry holds (encrypted). */
export interface ConnectionTokens {
  access_token: string;
  token_type: string;
  refresh_token: string | null;
  expires_at: number | null;
  scope: string[];
  issuer: string;
  client_id: string;
}

interface PendingState {
  /** The redirect_uri of the authorization request: the code exchange must repeat it. */
  redirect_uri: string;
  redirect_to: string | null;
  scopes: string[];
  issuer: string;
  client_id: string;
  resource: string;
}

const AuthorizeShape = z.strictObject({
  connection_id: z.string(),
  scopes: z
    .array(
      z
        .string()
        .regex(
          /^[\x21\x23-\x5b\x5d-\x7e]+$/,
          'a scope is printable ASCII without spaces, quotes or backslashes',
        ),
    )
    .max(64)
    .optional(),
  redirect_to: z.string().optional(),
});

const hashState = (state: string) => bytesToHex(sha256(utf8(state)));

/** The oauth4webapi view of a provider's server and client. */
export function oauthParties(state: ProviderState, clientId: string) {
  const server = state.authorization_server;
  const as: oauth.AuthorizationServer = {
    issuer: server.issuer,
    authorization_endpoint: server.authorization_endpoint,
    token_endpoint: server.token_endpoint,
    ...(server.revocation_endpoint ? { revocation_endpoint: server.revocation_endpoint } : {}),
    ...(server.authorization_response_iss_parameter_supported
      ? { authorization_response_iss_parameter_supported: true }
      : {}),
  };
  return { as, client: { client_id: clientId } satisfies oauth.Client };
}

function connectionState(record: ConnectionRecord): ConnectionState {
  return record.state as unknown as ConnectionState;
}

function toView(record: ConnectionRecord): ConnectionView {
  const state = connectionState(record);
  const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
  return {
    connection_id: record.id,
    provider_id: record.providerId,
    status: record.status,
    scopes: state.scopes,
    token_expires_at: iso(state.token_expires_at),
    created_at: new Date(record.createdAt).toISOString(),
    updated_at: new Date(record.updatedAt).toISOString(),
    authorized_at: iso(state.authorized_at),
    last_refreshed_at: iso(state.last_refreshed_at),
    error: state.error,
  };
}

/** Options of the connection service, supplied by `createBroker`. */
export interface ConnectionServiceOptions {
  storage: Storage;
  vault: () => Vault;
  outbound: OutboundFetch;
  providers: ProviderService;
  now: () => number;
  randomBytes: (length: number) => Uint8Array;
  /** The OAuth callback, `{baseUrl}/api/oauth/callback`, or `null` without a base URL. */
  redirectUri: string | null;
  /** Origins `redirect_to` may point to. */
  allowedRedirects: readonly string[];
  emit: EmitEvent;
  /** Refresh when the access token expires within this many ms. Default 60000. */
  refreshMarginMs?: number;
  /** How long one instance may hold a connection's refresh lease. Default 30000. */
  refreshLeaseMs?: number;
}

/** Describes what went wrong talking to an authorization server: never a secret. */
export function describeOAuthFailure(error: unknown): { code: string; description: string } {
  if (
    error instanceof oauth.AuthorizationResponseError ||
    error instanceof oauth.ResponseBodyError
  ) {
    return { code: error.error, description: error.error_description ?? error.error };
  }
  if (error instanceof OutboundError)
    return { code: 'server_unreachable', description: error.message };
  if (error instanceof oauth.OperationProcessingError) {
    // oauth4webapi reads error bodies of 4xx answers only; a 5xx is the server's trouble.
    const status = error.cause instanceof Response ? error.cause.status : 0;
    if (status >= 500) {
      return {
        code: 'server_error',
        description: `the authorization server answered HTTP ${status}`,
      };
    }
    return { code: 'invalid_response', description: error.message };
  }
  return { code: 'server_error', description: 'the authorization server could not be used' };
}

/**
 * Connections (API.md §5): authorize, callback, read, list and delete. Reached as
 * `broker.connections`.
 */
export class ConnectionService {
  protected readonly o: ConnectionServiceOptions;
  /** Refreshes in flight in this process, by connection: concurrent callers share one. */
  readonly #refreshing = new Map<string, Promise<ConnectionTokens>>();
  /** This instance's name on leases. */
  readonly #owner: string;

  constructor(options: ConnectionServiceOptions) {
    this.o = options;
    this.#owner = toBase64Url(options.randomBytes(12));
  }

  /**
   * The provider of a connection as oauth4webapi sees it: its server, the client Keyway
   * holds at `issuer`, and that client's authentication (secret from the vault).
   */
  async #party(providerId: string, issuer: string, clientId: string) {
    const resolved = await this.o.providers.resolve(providerId);
    const { as, client } = oauthParties(resolved.state, clientId);
    const secret = await this.o.providers.clientSecret(providerId, issuer);
    const method = resolved.state.registrations[issuer]?.token_endpoint_auth_method ?? 'none';
    return { resolved, as, client, auth: clientAuthentication(method, secret) };
  }

  /**
   * A connection's access token, for trusted server code or an MCP client (API.md §5):
   * refreshed first when it expires within the refresh margin or when `force_refresh` is
   * set. Refresh is single-flight per connection, in this process and across every
   * instance sharing the storage: concurrent callers wait for the one refresh and get its
   * result.
   *
   * @throws {KeywayError} `invalid_path`, `insufficient_scope`, `not_found`,
   *   `connection_not_active`, `reauthorization_required` (the refresh token was rejected;
   *   the connection is now in `error`), `upstream_error` (refresh failed and the current
   *   token has expired).
   */
  async credentials(
    principal: Principal,
    id: string,
    options: { force_refresh?: boolean | string | undefined } = {},
  ): Promise<Credentials> {
    const connectionId = parseResourcePath(id);
    const force = options.force_refresh === true || options.force_refresh === 'true';
    if (
      options.force_refresh !== undefined &&
      !force &&
      options.force_refresh !== false &&
      options.force_refresh !== 'false'
    ) {
      const message = '"force_refresh" must be true or false';
      throw new KeywayError('invalid_request', message, {
        details: [{ path: 'force_refresh', message }],
      });
    }
    assertCoversPath(principal, connectionId);
    const record = await this.o.storage.getConnection(connectionId);
    if (record === null)
      throw new KeywayError('not_found', `no connection ${JSON.stringify(connectionId)}`);
    let tokens = record.status === 'active' ? await this.tokensOf(connectionId) : null;
    if (tokens === null) {
      throw new KeywayError(
        'connection_not_active',
        `connection ${JSON.stringify(connectionId)} is ${record.status}: authorize it first`,
      );
    }
    const margin = this.o.refreshMarginMs ?? 60_000;
    if (force || (tokens.expires_at !== null && tokens.expires_at - this.o.now() <= margin)) {
      tokens = await this.#refreshOnce(connectionId, tokens);
    }
    return {
      connection_id: connectionId,
      access_token: tokens.access_token,
      token_type: 'Bearer',
      expires_at: tokens.expires_at === null ? null : new Date(tokens.expires_at).toISOString(),
      scopes: tokens.scope.length > 0 ? tokens.scope : connectionState(record).scopes,
    };
  }

  /** One refresh per connection in this process: later callers join the running one. */
  #refreshOnce(id: string, seen: ConnectionTokens): Promise<ConnectionTokens> {
    let running = this.#refreshing.get(id);
    if (running === undefined) {
      running = this.#refreshAcrossInstances(id, seen).finally(() => this.#refreshing.delete(id));
      this.#refreshing.set(id, running);
    }
    return running;
  }

  /**
   * One refresh per connection across instances: take the storage lease, re-read the
   * tokens (another instance may have refreshed while we waited), refresh only if still
   * needed, release. Without the lease, wait for its holder's result.
   */
  async #refreshAcrossInstances(id: string, seen: ConnectionTokens): Promise<ConnectionTokens> {
    const leaseMs = this.o.refreshLeaseMs ?? 30_000;
    const key = `refresh:${id}`;
    const deadline = Date.now() + leaseMs + 5_000;
    for (let wait = 10; ; wait = Math.min(wait * 2, 200)) {
      const now = this.o.now();
      if (await this.o.storage.acquireLease(key, this.#owner, now + leaseMs, now)) {
        try {
          const current = await this.tokensOf(id);
          if (current === null)
            throw new KeywayError(
              'connection_not_active',
              `connection ${JSON.stringify(id)} has no tokens`,
            );
          // Someone refreshed while we waited for the lease: theirs is our result.
          if (current.access_token !== seen.access_token) return current;
          return await this.#refresh(id, current);
        } finally {
          await this.o.storage.releaseLease(key, this.#owner).catch(() => {});
        }
      }
      const current = await this.tokensOf(id);
      if (current !== null && current.access_token !== seen.access_token) return current;
      if (Date.now() > deadline) {
        throw new KeywayError(
          'upstream_error',
          'another instance is refreshing this connection and has not finished',
        );
      }
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }

  async #refresh(id: string, tokens: ConnectionTokens): Promise<ConnectionTokens> {
    const record = await this.o.storage.getConnection(id);
    if (record === null) throw new KeywayError('not_found', `no connection ${JSON.stringify(id)}`);
    const now = this.o.now();
    const stillValid = tokens.expires_at === null || tokens.expires_at > now;
    if (tokens.refresh_token === null) {
      // Nothing to refresh with: a valid token is still the best answer, even when forced.
      if (stillValid) return tokens;
      await this.#recordFailure(
        id,
        {
          code: 'token_expired',
          description: 'the access token expired and there is no refresh token',
        },
        'error',
      );
      this.o.emit({ type: 'connection.refresh_failed', actor: 'system', resource: id });
      throw new KeywayError(
        'reauthorization_required',
        'the access token expired and cannot be refreshed: authorize again',
      );
    }
    let next: ConnectionTokens;
    try {
      const { resolved, as, client, auth } = await this.#party(
        record.providerId,
        tokens.issuer,
        tokens.client_id,
      );
      const response = await oauth.refreshTokenGrantRequest(
        as,
        client,
        auth,
        tokens.refresh_token,
        {
          ...libraryOptions(this.o.outbound),
          additionalParameters: { resource: resolved.state.configuration.resource_url },
        },
      );
      const result = await oauth.processRefreshTokenResponse(as, client, response);
      next = tokensFrom(result, tokens.refresh_token, tokens, this.o.now());
    } catch (error) {
      this.o.emit({ type: 'connection.refresh_failed', actor: 'system', resource: id });
      if (error instanceof oauth.ResponseBodyError && error.error === 'invalid_grant') {
        await this.#recordFailure(
          id,
          {
            code: 'invalid_grant',
            description: error.error_description ?? 'the refresh token was rejected',
          },
          'error',
        );
        throw new KeywayError(
          'reauthorization_required',
          'the authorization server rejected the refresh token: authorize again',
        );
      }
      // A transient failure while the current token is still valid: keep using it.
      if (stillValid) return tokens;
      const failure = describeOAuthFailure(error);
      throw new KeywayError(
        'upstream_error',
        `the token could not be refreshed: ${failure.code} (${failure.description})`,
        {
          cause: error,
        },
      );
    }
    const refreshedAt = this.o.now();
    const written = await this.update(
      id,
      (r) => ({
        ...r,
        status: 'active',
        state: {
          ...r.state,
          ...(next.scope.length > 0 ? { scopes: next.scope } : {}),
          token_expires_at: next.expires_at,
          last_refreshed_at: refreshedAt,
          error: null,
        },
      }),
      next,
    );
    if (written === null)
      throw new KeywayError('not_found', `connection ${JSON.stringify(id)} was deleted meanwhile`);
    this.o.emit({ type: 'connection.refreshed', actor: 'system', resource: id });
    return next;
  }

  #redirectUri(): string {
    if (this.o.redirectUri === null) {
      throw new KeywayError(
        'internal_error',
        'the broker has no baseUrl, so it has no OAuth callback',
      );
    }
    return this.o.redirectUri;
  }

  #redirectTarget(text: string | undefined): string | null {
    if (text === undefined) return null;
    let url: URL | null = null;
    try {
      url = new URL(text);
    } catch {
      url = null;
    }
    if (
      url === null ||
      !this.o.allowedRedirects.includes(url.origin) ||
      url.username ||
      url.password
    ) {
      throw new KeywayError(
        'invalid_redirect',
        '"redirect_to" is not an allowed origin of this deployment',
        {
          details: [{ path: 'redirect_to', message: 'not an allowed origin' }],
        },
      );
    }
    return url.href;
  }

  /**
   * Starts an authorization: stores the pending authorization (hash of a fresh `state`,
   * the PKCE verifier encrypted in the vault, expiry) and, for a new connection, a
   * `pending` connection; answers the consent address. An active connection stays active
   * with its tokens until the new authorization completes.
   *
   * @throws {KeywayError} `invalid_request`, `invalid_path`, `invalid_redirect`,
   *   `insufficient_scope`, `not_found`, `conflict`.
   */
  async authorize(
    principal: Principal,
    providerId: string,
    input: AuthorizeInput,
  ): Promise<AuthorizeResult> {
    const provider = parseResourcePath(providerId);
    const shape = parseShape(AuthorizeShape, input);
    const connectionId = parseResourcePath(shape.connection_id, 'connection_id');
    const redirectTo = this.#redirectTarget(shape.redirect_to);
    assertCoversPath(principal, connectionId);
    assertCoversPath(principal, provider);
    const redirectUri = this.#redirectUri();
    const resolved = await this.o.providers.resolve(provider);
    const existing = await this.o.storage.getConnection(connectionId);
    if (existing !== null && existing.providerId !== provider) {
      throw new KeywayError(
        'conflict',
        `connection ${JSON.stringify(connectionId)} belongs to provider ${JSON.stringify(existing.providerId)}`,
      );
    }

    const { state: providerState, client } = resolved;
    const server = providerState.authorization_server;
    const scopes = selectScopes(
      shape.scopes ?? providerState.configuration.scopes,
      providerState.challenge_scope,
      providerState.resource.scopes_supported,
      server.scopes_supported,
    );
    const now = this.o.now();
    const state = toBase64Url(this.o.randomBytes(32));
    const stateHash = hashState(state);
    const verifier = oauth.generateRandomCodeVerifier();
    const challenge = await oauth.calculatePKCECodeChallenge(verifier);
    const resource = providerState.configuration.resource_url;
    const expiresAt = now + PENDING_AUTHORIZATION_TTL_MS;

    if (existing === null) {
      const record: ConnectionRecord = {
        id: connectionId,
        providerId: provider,
        status: 'pending',
        state: {
          scopes,
          token_expires_at: null,
          authorized_at: null,
          last_refreshed_at: null,
          error: null,
        } satisfies ConnectionState as unknown as JsonObject,
        version: 1,
        createdAt: now,
        updatedAt: now,
      };
      if (await this.o.storage.insertConnection(record)) {
        this.o.emit({
          type: 'connection.created',
          actor: actorOf(principal),
          resource: connectionId,
        });
      } else {
        const raced = await this.o.storage.getConnection(connectionId);
        if (raced !== null && raced.providerId !== provider) {
          throw new KeywayError(
            'conflict',
            `connection ${JSON.stringify(connectionId)} belongs to another provider`,
          );
        }
      }
    }
    const verifierEntry = await this.o
      .vault()
      .seal({ kind: PKCE_VERIFIER_KIND, key: stateHash }, verifier);
    await this.o.storage.insertPendingAuthorization({
      stateHash,
      connectionId,
      providerId: provider,
      state: {
        verifier: verifierEntry.ciphertext,
        redirect_uri: redirectUri,
        redirect_to: redirectTo,
        scopes,
        issuer: server.issuer,
        client_id: client.client_id,
        resource,
      },
      expiresAt,
      createdAt: now,
    });

    const url = new URL(server.authorization_endpoint);
    url.searchParams.set('response_type', 'code');
    url.searchParams.set('client_id', client.client_id);
    url.searchParams.set('redirect_uri', redirectUri);
    url.searchParams.set('state', state);
    url.searchParams.set('code_challenge', challenge);
    url.searchParams.set('code_challenge_method', 'S256');
    if (scopes.length > 0) url.searchParams.set('scope', scopes.join(' '));
    url.searchParams.set('resource', resource);
    this.o.emit({
      type: 'connection.authorization_started',
      actor: actorOf(principal),
      resource: connectionId,
    });
    return {
      connection_id: connectionId,
      provider_id: provider,
      authorization_url: url.href,
      expires_at: new Date(expiresAt).toISOString(),
    };
  }

  /**
   * Completes an authorization from the browser's return to the callback: takes the
   * pending authorization (once, before expiry), checks the response (state, RFC 9207
   * `iss`), exchanges the code with the PKCE verifier and `resource`, and stores the tokens
   * encrypted. An unknown, expired or replayed `state` changes nothing.
   *
   * @throws {KeywayError} `invalid_request` for an unknown, expired or replayed state.
   */
  async callback(query: URLSearchParams): Promise<CallbackOutcome> {
    const state = query.get('state');
    if (state === null || state === '' || query.getAll('state').length > 1) {
      throw new KeywayError('invalid_request', 'the callback carries no single state');
    }
    const stateHash = hashState(state);
    const pending = await this.o.storage.takePendingAuthorization(stateHash, this.o.now());
    if (pending === null) {
      throw new KeywayError(
        'invalid_request',
        'this authorization is unknown, expired or already used',
      );
    }
    const saved = pending.state as unknown as PendingState & { verifier: string };
    const verifier = await this.o.vault().open({
      kind: PKCE_VERIFIER_KIND,
      key: stateHash,
      ciphertext: saved.verifier,
      keyId: '',
    });
    const outcome = (
      status: 'active' | 'error',
      error: CallbackOutcome['error'],
    ): CallbackOutcome => ({
      connection_id: pending.connectionId,
      status,
      error,
      redirect_to: saved.redirect_to,
    });

    let tokens: ConnectionTokens;
    try {
      const { resolved, as, client, auth } = await this.#party(
        pending.providerId,
        saved.issuer,
        saved.client_id,
      );
      if (resolved.state.authorization_server.issuer !== saved.issuer) {
        throw new KeywayError(
          'invalid_request',
          'the provider moved to another authorization server meanwhile',
        );
      }
      const params = oauth.validateAuthResponse(as, client, query, state);
      const response = await oauth.authorizationCodeGrantRequest(
        as,
        client,
        auth,
        params,
        // RFC 6749 §4.1.3: the same redirect_uri as the authorization request.
        saved.redirect_uri,
        verifier,
        { ...libraryOptions(this.o.outbound), additionalParameters: { resource: saved.resource } },
      );
      const result = await oauth.processAuthorizationCodeResponse(as, client, response);
      tokens = tokensFrom(result, null, saved, this.o.now());
    } catch (error) {
      const failure = describeOAuthFailure(error);
      const status = await this.#recordFailure(pending.connectionId, failure);
      this.o.emit({
        type: 'connection.authorization_failed',
        actor: 'system',
        resource: pending.connectionId,
      });
      return outcome(status, failure);
    }

    const now = this.o.now();
    const written = await this.update(
      pending.connectionId,
      (record) => ({
        ...record,
        status: 'active',
        state: {
          scopes: tokens.scope.length > 0 ? tokens.scope : saved.scopes,
          token_expires_at: tokens.expires_at,
          authorized_at: now,
          last_refreshed_at: null,
          error: null,
        } satisfies ConnectionState as unknown as JsonObject,
      }),
      tokens,
    );
    if (written === null) {
      return outcome('error', {
        code: 'connection_deleted',
        description: 'the connection was deleted meanwhile',
      });
    }
    this.o.emit({ type: 'connection.authorized', actor: 'system', resource: pending.connectionId });
    return outcome('active', null);
  }

  /**
   * Records a failure on a connection. `keep-active`: a failed authorization leaves an
   * active connection active (a pending one goes to `error`); `error`: the connection can
   * no longer be used (its refresh failed for good).
   */
  async #recordFailure(
    id: string,
    failure: { code: string; description: string },
    mode: 'keep-active' | 'error' = 'keep-active',
  ): Promise<'active' | 'error'> {
    const written = await this.update(id, (record) => ({
      ...record,
      status: mode === 'keep-active' && record.status === 'active' ? 'active' : 'error',
      state: { ...record.state, error: failure },
    }));
    return written?.status === 'active' ? 'active' : 'error';
  }

  /**
   * Applies a change to a connection by compare-and-set, re-reading and re-applying on a
   * concurrent write; the tokens, when given, are written in the same transaction.
   */
  protected async update(
    id: string,
    change: (record: ConnectionRecord) => ConnectionRecord,
    tokens?: ConnectionTokens,
  ): Promise<ConnectionRecord | null> {
    for (let attempt = 0; attempt < 10; attempt++) {
      const current = await this.o.storage.getConnection(id);
      if (current === null) return null;
      const next = { ...change(current), version: current.version + 1, updatedAt: this.o.now() };
      const vault =
        tokens === undefined
          ? undefined
          : {
              put: [
                await this.o
                  .vault()
                  .seal({ kind: CONNECTION_TOKENS_KIND, key: id }, JSON.stringify(tokens)),
              ],
            };
      if (await this.o.storage.compareAndSetConnection(next, current.version, vault)) return next;
    }
    throw new KeywayError(
      'conflict',
      `connection ${JSON.stringify(id)} is changing too often; retry`,
    );
  }

  /** The tokens of a connection, from the vault, or `null`. */
  protected async tokensOf(id: string): Promise<ConnectionTokens | null> {
    const entry = await this.o.storage.getVaultEntry(CONNECTION_TOKENS_KIND, id);
    return entry === null
      ? null
      : (JSON.parse(await this.o.vault().open(entry)) as ConnectionTokens);
  }

  /**
   * Reads a connection (never a token).
   *
   * @throws {KeywayError} `invalid_path`, `insufficient_scope`, `not_found`.
   */
  async get(principal: Principal, id: string): Promise<ConnectionView> {
    const connectionId = parseResourcePath(id);
    assertCoversPath(principal, connectionId);
    const record = await this.o.storage.getConnection(connectionId);
    if (record === null)
      throw new KeywayError('not_found', `no connection ${JSON.stringify(connectionId)}`);
    return toView(record);
  }

  /** Lists the connections the caller's scopes cover, by prefix, provider and status. */
  async list(
    principal: Principal,
    options: ListOptions & {
      prefix?: string | undefined;
      provider_id?: string | undefined;
      status?: string | undefined;
    } = {},
  ): Promise<Page<ConnectionView>> {
    const prefix =
      options.prefix === undefined ? undefined : parseResourcePath(options.prefix, 'prefix');
    const providerId =
      options.provider_id === undefined
        ? undefined
        : parseResourcePath(options.provider_id, 'provider_id');
    if (options.status !== undefined && !['pending', 'active', 'error'].includes(options.status)) {
      const message = '"status" must be pending, active or error';
      throw new KeywayError('invalid_request', message, { details: [{ path: 'status', message }] });
    }
    const { limit, after } = parseListOptions(options);
    const within = listableSubtrees(principal, prefix);
    const records = await this.o.storage.listConnections({
      ...(within === undefined ? {} : { within }),
      ...(after === undefined ? {} : { after }),
      ...(providerId === undefined ? {} : { providerId }),
      ...(options.status === undefined ? {} : { status: options.status as ConnectionStatus }),
      limit: limit + 1,
    });
    return toPage(records, limit, (record) => record.id, toView);
  }

  /**
   * Deletes a connection: revokes its tokens at the authorization server when it offers
   * revocation (RFC 7009, best effort: a failure there does not keep the connection),
   * then removes its tokens and record.
   *
   * @throws {KeywayError} `invalid_path`, `insufficient_scope`, `not_found`.
   */
  async delete(principal: Principal, id: string): Promise<void> {
    const connectionId = parseResourcePath(id);
    assertCoversPath(principal, connectionId);
    const record = await this.o.storage.getConnection(connectionId);
    if (record === null)
      throw new KeywayError('not_found', `no connection ${JSON.stringify(connectionId)}`);
    const tokens = await this.tokensOf(connectionId);
    if (tokens !== null) await this.#revoke(record.providerId, tokens);
    await this.o.storage.deleteConnection(connectionId, [
      { kind: CONNECTION_TOKENS_KIND, key: connectionId },
    ]);
    this.o.emit({ type: 'connection.deleted', actor: actorOf(principal), resource: connectionId });
  }

  async #revoke(providerId: string, tokens: ConnectionTokens): Promise<void> {
    try {
      const { resolved, as, client, auth } = await this.#party(
        providerId,
        tokens.issuer,
        tokens.client_id,
      );
      if (resolved.state.authorization_server.revocation_endpoint === null) return;
      // The refresh token first: revoking it ends the grant (RFC 7009 §2.1).
      for (const [token, hint] of [
        [tokens.refresh_token, 'refresh_token'],
        [tokens.access_token, 'access_token'],
      ] as const) {
        if (token === null) continue;
        const response = await oauth.revocationRequest(as, client, auth, token, {
          ...libraryOptions(this.o.outbound),
          additionalParameters: { token_type_hint: hint },
        });
        await oauth.processRevocationResponse(response);
      }
    } catch {
      // Best effort (API.md §5): the connection is deleted whatever the server says.
    }
  }
}

/** The oauth4webapi client authentication for a registration. */
export function clientAuthentication(method: string, secret: string | null): oauth.ClientAuth {
  if (method === 'client_secret_basic' && secret !== null) return oauth.ClientSecretBasic(secret);
  if (method === 'client_secret_post' && secret !== null) return oauth.ClientSecretPost(secret);
  return oauth.None();
}

/** The tokens to keep from a token response; an unrotated refresh token is kept. */
export function tokensFrom(
  result: oauth.TokenEndpointResponse,
  previousRefreshToken: string | null,
  party: { issuer: string; client_id: string },
  now: number,
): ConnectionTokens {
  return {
    access_token: result.access_token,
    token_type: result.token_type,
    refresh_token: result.refresh_token ?? previousRefreshToken,
    expires_at: typeof result.expires_in === 'number' ? now + result.expires_in * 1000 : null,
    scope:
      typeof result.scope === 'string' && result.scope.trim() !== ''
        ? result.scope.trim().split(/\s+/)
        : [],
    issuer: party.issuer,
    client_id: party.client_id,
  };
}
