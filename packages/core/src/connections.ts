import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import * as oauth from 'oauth4webapi';
import { z } from 'zod';
import { toBase64Url, utf8 } from './bytes.js';
import { quoted, selectScopes } from './discovery.js';
import { KeywayError } from './errors.js';
import type { EmitEvent } from './events.js';
import {
  clientAuthentication,
  currentParty,
  type OAuthParty,
  OAuthPartySchema,
  oauthPartyOf,
  providerKeepsParty,
} from './oauth-party.js';
import { allowedHostSet, endpointProblem, OutboundError, type OutboundFetch } from './outbound.js';
import { type ListOptions, type Page, parseListOptions, toPage } from './pagination.js';
import { actorOf, assertCoversPath, type Principal } from './principal.js';
import type { ProviderService } from './providers.js';
import { libraryOptions } from './registration.js';
import { parseResourcePath } from './resource-path.js';
import { listableSubtrees } from './secrets.js';
import type {
  ConnectionRecord,
  ConnectionStatus,
  JsonObject,
  Storage,
} from './storage/contract.js';
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
  /** Hold the completed consent until the app confirms it (API.md §5 user verification). */
  verify_user?: boolean;
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
  /** `verification_required`: consent succeeded; the app must confirm `flow_id`. */
  status: 'active' | 'error' | 'verification_required';
  error: { code: string; description: string } | null;
  redirect_to: string | null;
  /** With `verification_required`: the one-time id to confirm with `POST /api/oauth/verify`. */
  flow_id?: string;
}

/** What `state` of a connection record holds. */
export interface ConnectionState {
  scopes: string[];
  token_expires_at: number | null;
  authorized_at: number | null;
  last_refreshed_at: number | null;
  error: { code: string; description: string } | null;
  /**
   * Grows by one with each completed authorization. A refresh writes its tokens only while
   * the generation it refreshed is still the current one, so a slow refresh never
   * overwrites the tokens of a newer authorization.
   */
  generation: number;
}

/** What the connection's vault entry holds (encrypted). */
export interface ConnectionTokens {
  access_token: string;
  token_type: string;
  refresh_token: string | null;
  expires_at: number | null;
  scope: string[];
  /** The {@link ConnectionState.generation} of the authorization these tokens belong to. */
  generation: number;
  /** The server and client they came from: refresh and revocation go there only. */
  party: OAuthParty;
}

const FailureSchema = z.object({ code: z.string(), description: z.string() });

const ConnectionStateSchema = z.object({
  scopes: z.array(z.string()),
  token_expires_at: z.number().nullable(),
  authorized_at: z.number().nullable(),
  last_refreshed_at: z.number().nullable(),
  error: FailureSchema.nullable(),
  // Records written before generations existed are generation 0.
  generation: z.number().int().nonnegative().default(0),
});

const TokensSchema = z.object({
  access_token: z.string(),
  token_type: z.string(),
  refresh_token: z.string().nullable(),
  expires_at: z.number().nullable(),
  scope: z.array(z.string()),
  generation: z.number().int().nonnegative().default(0),
  party: OAuthPartySchema.optional(),
  // Written before the party was kept: only the issuer and client id.
  issuer: z.string().optional(),
  client_id: z.string().optional(),
});

const PendingStateSchema = z.object({
  /** The PKCE verifier, sealed. */
  verifier: z.string(),
  /** The redirect_uri of the authorization request: the code exchange must repeat it. */
  redirect_uri: z.string(),
  redirect_to: z.string().nullable(),
  scopes: z.array(z.string()),
  party: OAuthPartySchema,
  verify_user: z.boolean().default(false),
});
type PendingState = z.infer<typeof PendingStateSchema>;

/** What a user-verification flow holds until the app confirms it. */
const VerificationStateSchema = z.object({
  kind: z.literal('verification'),
  /** The tokens of the completed consent, sealed. */
  tokens: z.string(),
  scopes: z.array(z.string()),
});

/** Vault kind of the tokens a user-verification flow holds. */
export const VERIFICATION_TOKENS_KIND = 'verification_tokens';

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
  verify_user: z.boolean().optional(),
});

const VerifyShape = z.strictObject({ flow_id: z.string().min(1).max(200) });

const hashState = (state: string) => bytesToHex(sha256(utf8(state)));
// Another domain than states: a flow id is never taken as a state, nor a state as a flow id.
const hashFlowId = (flowId: string) => bytesToHex(sha256(utf8(`keyway-flow:${flowId}`)));

/** Reads stored data through its schema: a row that fails is an internal error, never a crash. */
function parseStored<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const result = schema.safeParse(value);
  if (!result.success) {
    throw new KeywayError('internal_error', `stored ${what} is not valid`, {
      cause: result.error,
    });
  }
  return result.data;
}

function connectionState(record: ConnectionRecord): ConnectionState {
  return parseStored(ConnectionStateSchema, record.state, `state of connection ${record.id}`);
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

/** The failure a connection records when its provider left the party it was authorized with. */
const PARTY_CHANGED = {
  code: 'reauthorization_required',
  description:
    'the provider moved to another authorization server or client since this connection was authorized: authorize again',
};

/** A change {@link ConnectionService.update} writes, or `null` to write nothing. */
type ConnectionChange = { record: ConnectionRecord; tokens?: ConnectionTokens } | null;

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
  /** Hosts that may be reached over plain http and on private addresses (development). */
  allowedHosts: readonly string[];
  emit: EmitEvent;
  /** Refresh when the access token expires within this many ms. Default 60000. */
  refreshMarginMs?: number;
  /**
   * How long one instance holds a connection's refresh lease before another may take it;
   * renewed every third of it while the refresh runs. Default 30000.
   */
  refreshLeaseMs?: number;
}

/** An authorization response refused before anything of it is used (RFC 9207 `iss`). */
class ResponseRefused extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const FORGOTTEN_CLIENT = {
  code: 'reauthorization_required',
  description:
    'the authorization server no longer knows the registered client (invalid_client): authorize again, a new client is registered first',
};

/**
 * The OAuth `error` code of a failed token request, also when the server sent it with a
 * `WWW-Authenticate` challenge (a 401 `invalid_client` often comes with `Basic`).
 */
async function oauthErrorCode(error: unknown): Promise<string | null> {
  if (error instanceof oauth.ResponseBodyError) return error.error;
  if (error instanceof oauth.WWWAuthenticateChallengeError) {
    const body = (await error.response
      .clone()
      .json()
      .catch(() => null)) as { error?: unknown } | null;
    if (typeof body?.error === 'string') return body.error;
    const parameter = error.cause.find((challenge) => challenge.parameters.error)?.parameters.error;
    return parameter ?? null;
  }
  return null;
}

/** Describes what went wrong talking to an authorization server: never a secret. */
export function describeOAuthFailure(error: unknown): { code: string; description: string } {
  if (error instanceof ResponseRefused) return { code: error.code, description: error.message };
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
 * Connections (API.md §5): authorize, callback, user verification, credentials with
 * refresh, read, list and delete. Reached as `broker.connections`.
 */
export class ConnectionService {
  protected readonly o: ConnectionServiceOptions;
  /** Refreshes in flight in this process, by connection: concurrent callers share one. */
  readonly #refreshing = new Map<string, Promise<ConnectionTokens>>();
  /** This instance's name on leases. */
  readonly #owner: string;
  readonly #allowedHosts: ReadonlySet<string>;

  constructor(options: ConnectionServiceOptions) {
    this.o = options;
    this.#owner = toBase64Url(options.randomBytes(12));
    this.#allowedHosts = allowedHostSet(options.allowedHosts);
  }

  /**
   * How Keyway authenticates as a party's client: with the secret the provider keeps for
   * that client at that issuer. `null` when the provider no longer holds that client (it
   * registered another one there), or, with `current`, when the provider no longer uses
   * that server and client at all (it moved): their tokens are never sent anywhere then.
   * Without `current` (revocation), a public client can still be used at its old server.
   */
  async #authenticationOf(
    providerId: string,
    party: OAuthParty,
    current: 'current' | 'any',
  ): Promise<oauth.ClientAuth | null> {
    const { state } = await this.o.providers.resolve(providerId);
    if (current === 'current' && !providerKeepsParty(state, party)) return null;
    if (state.registrations[party.issuer]?.client_id !== party.client_id) {
      return party.token_endpoint_auth_method === 'none' ? oauth.None() : null;
    }
    const secret = await this.o.providers.clientSecret(providerId, party.issuer);
    return clientAuthentication(party.token_endpoint_auth_method, secret);
  }

  /**
   * A connection's access token, for trusted server code or an MCP client (API.md §5):
   * refreshed first when it expires within the refresh margin or when `force_refresh` is
   * set. Refresh is single-flight per connection, in this process and across every
   * instance sharing the storage: concurrent callers wait for the one refresh and get its
   * result.
   *
   * @throws {KeywayError} `invalid_path`, `insufficient_scope`, `not_found`,
   *   `connection_not_active`, `reauthorization_required` (the refresh token was rejected,
   *   or the provider moved to another server or client; the connection is now in
   *   `error`), `upstream_error` (refresh failed and the current token has expired).
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
    let tokens = record.status === 'active' ? await this.tokensOf(record) : null;
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

  /** The current tokens of a connection, read again, or `null` when it has none. */
  async #currentTokens(id: string): Promise<ConnectionTokens | null> {
    const record = await this.o.storage.getConnection(id);
    return record === null ? null : this.tokensOf(record);
  }

  /**
   * One refresh per connection across instances: take the storage lease, re-read the
   * tokens (another instance may have refreshed while we waited), refresh only if still
   * needed, release. Without the lease, wait for its holder's result. The lease is renewed
   * while the refresh runs, so a slow server (or the discovery of a provider declared in
   * code) never lets a second instance start the same refresh.
   */
  async #refreshAcrossInstances(id: string, seen: ConnectionTokens): Promise<ConnectionTokens> {
    const leaseMs = this.o.refreshLeaseMs ?? 30_000;
    const key = `refresh:${id}`;
    const deadline = Date.now() + leaseMs + 5_000;
    for (let wait = 10; ; wait = Math.min(wait * 2, 200)) {
      const now = this.o.now();
      if (await this.o.storage.acquireLease(key, this.#owner, now + leaseMs, now)) {
        const renewal = setInterval(
          () => {
            const at = this.o.now();
            this.o.storage.acquireLease(key, this.#owner, at + leaseMs, at).catch(() => {});
          },
          Math.max(Math.floor(leaseMs / 3), 1),
        );
        (renewal as { unref?: () => void }).unref?.();
        try {
          const current = await this.#currentTokens(id);
          if (current === null)
            throw new KeywayError(
              'connection_not_active',
              `connection ${JSON.stringify(id)} has no tokens`,
            );
          // Someone refreshed while we waited for the lease: theirs is our result.
          if (current.access_token !== seen.access_token) return current;
          return await this.#refresh(id, current);
        } finally {
          clearInterval(renewal);
          await this.o.storage.releaseLease(key, this.#owner).catch(() => {});
        }
      }
      const current = await this.#currentTokens(id);
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

  /** Puts a connection in `error` for good and answers the error the caller gets. */
  async #requireReauthorization(
    id: string,
    failure: { code: string; description: string },
    message: string,
  ): Promise<KeywayError> {
    await this.#recordFailure(id, failure, 'error');
    this.o.emit({ type: 'connection.reauthorization_required', actor: 'system', resource: id });
    return new KeywayError('reauthorization_required', message);
  }

  async #refresh(id: string, tokens: ConnectionTokens): Promise<ConnectionTokens> {
    const record = await this.o.storage.getConnection(id);
    if (record === null) throw new KeywayError('not_found', `no connection ${JSON.stringify(id)}`);
    const now = this.o.now();
    const stillValid = tokens.expires_at === null || tokens.expires_at > now;
    if (tokens.refresh_token === null) {
      // Nothing to refresh with: a valid token is still the best answer, even when forced.
      if (stillValid) return tokens;
      throw await this.#requireReauthorization(
        id,
        {
          code: 'token_expired',
          description: 'the access token expired and there is no refresh token',
        },
        'the access token expired and cannot be refreshed: authorize again',
      );
    }
    // The refresh token goes only to the server and client it came from, and only while
    // the provider still uses them: a provider re-pointed elsewhere never receives it.
    const auth = await this.#authenticationOf(record.providerId, tokens.party, 'current');
    if (auth === null) {
      throw await this.#requireReauthorization(id, PARTY_CHANGED, PARTY_CHANGED.description);
    }
    let next: ConnectionTokens;
    try {
      const { as, client } = oauthPartyOf(tokens.party);
      const response = await oauth.refreshTokenGrantRequest(
        as,
        client,
        auth,
        tokens.refresh_token,
        {
          ...libraryOptions(this.o.outbound),
          additionalParameters: { resource: tokens.party.resource },
        },
      );
      const result = await oauth.processRefreshTokenResponse(as, client, response);
      next = tokensFrom(result, tokens, this.o.now());
    } catch (error) {
      this.o.emit({ type: 'connection.refresh_failed', actor: 'system', resource: id });
      const code = await oauthErrorCode(error);
      if (
        code === 'invalid_client' &&
        (await this.o.providers.markRegistrationStale(
          record.providerId,
          tokens.party.issuer,
          tokens.party.client_id,
        ))
      ) {
        throw await this.#requireReauthorization(
          id,
          FORGOTTEN_CLIENT,
          'the authorization server no longer knows the registered client: authorize again',
        );
      }
      if (code === 'invalid_grant') {
        throw await this.#requireReauthorization(
          id,
          {
            code: 'invalid_grant',
            description:
              (error instanceof oauth.ResponseBodyError ? error.error_description : undefined) ??
              'the refresh token was rejected',
          },
          'the authorization server rejected the refresh token: authorize again',
        );
      }
      // A transient failure while the current token is still valid: keep using it.
      if (stillValid) return tokens;
      const failure = describeOAuthFailure(error);
      throw new KeywayError(
        'upstream_error',
        `the token could not be refreshed: ${failure.code} (${failure.description})`,
        { cause: error },
      );
    }
    const refreshedAt = this.o.now();
    let superseded = false;
    const written = await this.update(id, (current) => {
      const state = connectionState(current);
      // A newer authorization (or a provider change) happened while we refreshed: its
      // tokens win, and ours are dropped.
      if (current.status !== 'active' || state.generation !== tokens.generation) {
        superseded = true;
        return null;
      }
      return {
        record: {
          ...current,
          status: 'active',
          state: {
            ...state,
            ...(next.scope.length > 0 ? { scopes: next.scope } : {}),
            token_expires_at: next.expires_at,
            last_refreshed_at: refreshedAt,
            error: null,
          } satisfies ConnectionState as unknown as JsonObject,
        },
        tokens: next,
      };
    });
    if (written === null)
      throw new KeywayError('not_found', `connection ${JSON.stringify(id)} was deleted meanwhile`);
    if (superseded) {
      const current = written.status === 'active' ? await this.tokensOf(written) : null;
      if (current === null) {
        throw new KeywayError(
          'connection_not_active',
          `connection ${JSON.stringify(id)} changed while it was refreshed: it is ${written.status}`,
        );
      }
      return current;
    }
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
   * the PKCE verifier encrypted in the vault, the party the code will be exchanged with,
   * expiry) and, for a new connection, a `pending` connection; answers the consent address.
   * An active connection stays active with its tokens until the new authorization
   * completes. With `verify_user`, the app must confirm the completed consent
   * ({@link ConnectionService.verify}) before the connection uses it.
   *
   * @throws {KeywayError} `invalid_request`, `invalid_path`, `invalid_redirect`,
   *   `insufficient_scope`, `not_found`, `conflict`, `unsupported_authorization_server`
   *   (a stored endpoint that is no longer acceptable).
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
    const verifyUser = shape.verify_user === true;
    if (verifyUser && redirectTo === null) {
      const message = '"verify_user" needs a "redirect_to": the app confirms the flow there';
      throw new KeywayError('invalid_request', message, {
        details: [{ path: 'redirect_to', message }],
      });
    }
    assertCoversPath(principal, connectionId);
    assertCoversPath(principal, provider);
    const redirectUri = this.#redirectUri();
    const known = await this.o.storage.getConnection(connectionId);
    if (known !== null && known.providerId !== provider) {
      throw new KeywayError(
        'conflict',
        `connection ${JSON.stringify(connectionId)} belongs to provider ${JSON.stringify(known.providerId)}`,
      );
    }
    // Re-reads the resource's metadata: a move to another authorization server registers
    // there first (and may put this connection in error: its tokens are the old server's).
    const resolved = await this.o.providers.forAuthorization(provider);
    const existing = await this.o.storage.getConnection(connectionId);

    const { state: providerState } = resolved;
    const server = providerState.authorization_server;
    const party = currentParty(providerState);
    if (party === null)
      throw new KeywayError('internal_error', `provider ${provider} has no client`);
    // The consent address is built only from a checked endpoint, also for records stored
    // before every endpoint was checked at discovery.
    const problem = endpointProblem(server.authorization_endpoint, this.#allowedHosts);
    if (problem !== null) {
      const message = `authorization_endpoint ${problem}`;
      throw new KeywayError('unsupported_authorization_server', message, {
        details: [{ path: 'authorization_endpoint', message }],
      });
    }
    const chosen = selectScopes(
      shape.scopes ?? providerState.configuration.scopes,
      providerState.challenge_scope,
      providerState.resource.scopes_supported,
      server.scopes_supported,
    );
    // API.md §6 item 12: without `scopes`, a connection that already holds granted scopes
    // asks for them too, so a step-up never loses one.
    const granted =
      shape.scopes === undefined &&
      existing !== null &&
      connectionState(existing).authorized_at !== null
        ? connectionState(existing).scopes
        : [];
    const scopes = [...new Set([...chosen, ...granted])];
    const now = this.o.now();
    const state = toBase64Url(this.o.randomBytes(32));
    const stateHash = hashState(state);
    const verifier = oauth.generateRandomCodeVerifier();
    const challenge = await oauth.calculatePKCECodeChallenge(verifier);
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
          generation: 0,
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
        party: { ...party },
        verify_user: verifyUser,
      } satisfies PendingState,
      expiresAt,
      createdAt: now,
    });

    const url = new URL(server.authorization_endpoint);
    url.searchParams.set('response_type', 'code');
    url.searchParams.set('client_id', party.client_id);
    url.searchParams.set('redirect_uri', redirectUri);
    url.searchParams.set('state', state);
    url.searchParams.set('code_challenge', challenge);
    url.searchParams.set('code_challenge_method', 'S256');
    if (scopes.length > 0) url.searchParams.set('scope', scopes.join(' '));
    url.searchParams.set('resource', party.resource);
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
   * `iss`), exchanges the code with the PKCE verifier and `resource` at the server the
   * authorization was started with, and stores the tokens encrypted with that party. An
   * unknown, expired or replayed `state` changes nothing. With user verification, the
   * tokens are held for the app's confirmation instead.
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
    if (pending === null || pending.state.kind === 'verification') {
      throw new KeywayError(
        'invalid_request',
        'this authorization is unknown, expired or already used',
      );
    }
    const saved = parseStored(PendingStateSchema, pending.state, 'pending authorization');
    const verifier = await this.o.vault().open({
      kind: PKCE_VERIFIER_KIND,
      key: stateHash,
      ciphertext: saved.verifier,
      keyId: '',
    });
    const outcome = (
      status: CallbackOutcome['status'],
      error: CallbackOutcome['error'],
      flowId?: string,
    ): CallbackOutcome => ({
      connection_id: pending.connectionId,
      status,
      error,
      redirect_to: saved.redirect_to,
      ...(flowId === undefined ? {} : { flow_id: flowId }),
    });

    let tokens: Omit<ConnectionTokens, 'generation'>;
    try {
      const auth = await this.#authenticationOf(pending.providerId, saved.party, 'current');
      if (auth === null) {
        throw new KeywayError(
          'invalid_request',
          'the provider moved to another authorization server or client meanwhile',
        );
      }
      // RFC 9207 §2.4: a present `iss` is compared with the recorded issuer by simple string
      // comparison, before any other parameter is acted on (an empty one too).
      const iss = query.getAll('iss');
      if (iss.length > 0 && (iss.length > 1 || iss[0] !== saved.party.issuer)) {
        throw new ResponseRefused(
          'invalid_response',
          `the authorization response's "iss" ${quoted(iss.join(', '))} is not the issuer ${quoted(saved.party.issuer)} exactly (RFC 9207): refused`,
        );
      }
      const { as, client } = oauthPartyOf(saved.party);
      const params = oauth.validateAuthResponse(as, client, query, state);
      const response = await oauth.authorizationCodeGrantRequest(
        as,
        client,
        auth,
        params,
        // RFC 6749 §4.1.3: the same redirect_uri as the authorization request.
        saved.redirect_uri,
        verifier,
        {
          ...libraryOptions(this.o.outbound),
          additionalParameters: { resource: saved.party.resource },
        },
      );
      const result = await oauth.processAuthorizationCodeResponse(as, client, response);
      tokens = tokensFrom(result, { refresh_token: null, party: saved.party }, this.o.now());
    } catch (error) {
      const forgotten =
        (await oauthErrorCode(error)) === 'invalid_client' &&
        (await this.o.providers.markRegistrationStale(
          pending.providerId,
          saved.party.issuer,
          saved.party.client_id,
        ));
      const failure = forgotten ? FORGOTTEN_CLIENT : describeOAuthFailure(error);
      const status = await this.#recordFailure(pending.connectionId, failure);
      this.o.emit({
        type: 'connection.authorization_failed',
        actor: 'system',
        resource: pending.connectionId,
      });
      return outcome(status, failure);
    }

    if (saved.verify_user) {
      // Consent succeeded, but the app has not yet said the right user gave it: hold the
      // tokens with a one-time flow id until it does, for as long as the state would live.
      const flowId = toBase64Url(this.o.randomBytes(32));
      const flowHash = hashFlowId(flowId);
      const sealed = await this.o
        .vault()
        .seal({ kind: VERIFICATION_TOKENS_KIND, key: flowHash }, JSON.stringify(tokens));
      await this.o.storage.insertPendingAuthorization({
        stateHash: flowHash,
        connectionId: pending.connectionId,
        providerId: pending.providerId,
        state: { kind: 'verification', tokens: sealed.ciphertext, scopes: saved.scopes },
        expiresAt: pending.expiresAt,
        createdAt: this.o.now(),
      });
      return outcome('verification_required', null, flowId);
    }
    const written = await this.#activate(pending.connectionId, tokens, saved.scopes);
    if (written === null) {
      return outcome('error', {
        code: 'connection_deleted',
        description: 'the connection was deleted meanwhile',
      });
    }
    this.o.emit({ type: 'connection.authorized', actor: 'system', resource: pending.connectionId });
    return outcome('active', null);
  }

  /** Writes the tokens of a completed authorization: a new generation, active. */
  async #activate(
    id: string,
    tokens: Omit<ConnectionTokens, 'generation'>,
    requestedScopes: string[],
  ): Promise<ConnectionRecord | null> {
    const now = this.o.now();
    return this.update(id, (record) => {
      const generation = connectionState(record).generation + 1;
      return {
        record: {
          ...record,
          status: 'active',
          state: {
            scopes: tokens.scope.length > 0 ? tokens.scope : requestedScopes,
            token_expires_at: tokens.expires_at,
            authorized_at: now,
            last_refreshed_at: null,
            error: null,
            generation,
          } satisfies ConnectionState as unknown as JsonObject,
        },
        tokens: { ...tokens, generation },
      };
    });
  }

  /**
   * Confirms a user-verification flow (API.md §5, opt-in with `verify_user`): the app,
   * which knows who is signed in, says the consent came from the right user. The flow id
   * is single-use, also when the confirmation is refused; only then does the connection
   * use the new tokens.
   *
   * @throws {KeywayError} `invalid_request` (unknown, expired or used flow id),
   *   `insufficient_scope` (the credential does not cover the connection), `not_found`.
   */
  async verify(principal: Principal, input: { flow_id: string }): Promise<ConnectionView> {
    const { flow_id } = parseShape(VerifyShape, input);
    const flowHash = hashFlowId(flow_id);
    const taken = await this.o.storage.takePendingAuthorization(flowHash, this.o.now());
    const flow =
      taken === null || taken.state.kind !== 'verification'
        ? null
        : parseStored(VerificationStateSchema, taken.state, 'verification flow');
    if (taken === null || flow === null) {
      const message = 'this flow is unknown, expired or already used';
      throw new KeywayError('invalid_request', message, {
        details: [{ path: 'flow_id', message }],
      });
    }
    assertCoversPath(principal, taken.connectionId);
    const tokens = parseStored(
      TokensSchema.required({ party: true }),
      JSON.parse(
        await this.o.vault().open({
          kind: VERIFICATION_TOKENS_KIND,
          key: flowHash,
          ciphertext: flow.tokens,
          keyId: '',
        }),
      ),
      'verification tokens',
    );
    const written = await this.#activate(
      taken.connectionId,
      tokens as ConnectionTokens,
      flow.scopes,
    );
    if (written === null)
      throw new KeywayError('not_found', `no connection ${JSON.stringify(taken.connectionId)}`);
    this.o.emit({
      type: 'connection.authorized',
      actor: actorOf(principal),
      resource: taken.connectionId,
    });
    return toView(written);
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
      record: {
        ...record,
        status: mode === 'keep-active' && record.status === 'active' ? 'active' : 'error',
        state: { ...connectionState(record), error: failure },
      },
    }));
    return written?.status === 'active' ? 'active' : 'error';
  }

  /**
   * Puts every active connection of a provider in `error` with `reauthorization_required`,
   * after the provider moved to another authorization server or client: their tokens
   * belong to the old one, and are never sent to the new one.
   *
   * @returns how many connections were affected.
   */
  async requireReauthorizationOf(providerId: string): Promise<number> {
    let affected = 0;
    let after: string | undefined;
    for (;;) {
      const page = await this.o.storage.listConnections({
        providerId,
        status: 'active',
        limit: 200,
        ...(after === undefined ? {} : { after }),
      });
      for (const record of page) {
        const written = await this.update(record.id, (current) =>
          current.status !== 'active'
            ? null
            : {
                record: {
                  ...current,
                  status: 'error',
                  state: { ...connectionState(current), error: PARTY_CHANGED },
                },
              },
        );
        if (written?.status === 'error' && written.version > record.version) {
          affected++;
          this.o.emit({
            type: 'connection.reauthorization_required',
            actor: 'system',
            resource: record.id,
          });
        }
      }
      if (page.length < 200) return affected;
      after = (page[page.length - 1] as ConnectionRecord).id;
    }
  }

  /**
   * Applies a change to a connection by compare-and-set, re-reading and re-applying on a
   * concurrent write; the tokens, when given, are written in the same transaction. A change
   * that answers `null` writes nothing.
   *
   * @returns the record as written (or as it stands, when the change wrote nothing), or
   *   `null` when the connection does not exist.
   */
  protected async update(
    id: string,
    change: (record: ConnectionRecord) => ConnectionChange,
  ): Promise<ConnectionRecord | null> {
    for (let attempt = 0; attempt < 10; attempt++) {
      const current = await this.o.storage.getConnection(id);
      if (current === null) return null;
      const planned = change(current);
      if (planned === null) return current;
      const next = { ...planned.record, version: current.version + 1, updatedAt: this.o.now() };
      const vault =
        planned.tokens === undefined
          ? undefined
          : {
              put: [
                await this.o
                  .vault()
                  .seal({ kind: CONNECTION_TOKENS_KIND, key: id }, JSON.stringify(planned.tokens)),
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
  protected async tokensOf(record: ConnectionRecord): Promise<ConnectionTokens | null> {
    const entry = await this.o.storage.getVaultEntry(CONNECTION_TOKENS_KIND, record.id);
    if (entry === null) return null;
    const stored = parseStored(
      TokensSchema,
      JSON.parse(await this.o.vault().open(entry)),
      `tokens of connection ${record.id}`,
    );
    const { issuer, client_id, party, ...tokens } = stored;
    if (party !== undefined) return { ...tokens, party };
    return { ...tokens, party: await this.#legacyParty(record.providerId, issuer, client_id) };
  }

  /**
   * The party of tokens stored before parties were kept (only issuer and client id): the
   * provider's current server, when it is still that issuer with that client, since its
   * endpoints come from that issuer's own metadata. Otherwise a party no provider matches,
   * so the connection must be authorized again.
   */
  async #legacyParty(
    providerId: string,
    issuer: string | undefined,
    clientId: string | undefined,
  ): Promise<OAuthParty> {
    const { state } = await this.o.providers.resolve(providerId);
    const party = currentParty(state);
    if (party !== null && party.issuer === issuer && party.client_id === clientId) return party;
    return {
      issuer: issuer ?? '',
      token_endpoint: '',
      revocation_endpoint: null,
      client_id: clientId ?? '',
      token_endpoint_auth_method: 'none',
      resource: state.configuration.resource_url,
      iss_parameter_supported: false,
    };
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
   * Deletes a connection: revokes its tokens at the authorization server they came from
   * when it offers revocation (RFC 7009, best effort: a failure there does not keep the
   * connection), then removes its tokens and record.
   *
   * @throws {KeywayError} `invalid_path`, `insufficient_scope`, `not_found`.
   */
  async delete(principal: Principal, id: string): Promise<void> {
    const connectionId = parseResourcePath(id);
    assertCoversPath(principal, connectionId);
    const record = await this.o.storage.getConnection(connectionId);
    if (record === null)
      throw new KeywayError('not_found', `no connection ${JSON.stringify(connectionId)}`);
    const tokens = await this.tokensOf(record).catch(() => null);
    if (tokens !== null) await this.#revoke(record.providerId, tokens);
    await this.o.storage.deleteConnection(connectionId, [
      { kind: CONNECTION_TOKENS_KIND, key: connectionId },
    ]);
    this.o.emit({ type: 'connection.deleted', actor: actorOf(principal), resource: connectionId });
  }

  /** Revokes at the party the tokens came from, never at the provider's current server. */
  async #revoke(providerId: string, tokens: ConnectionTokens): Promise<void> {
    try {
      const { party } = tokens;
      if (party.revocation_endpoint === null) return;
      const auth = await this.#authenticationOf(providerId, party, 'any');
      // The provider no longer holds that client's secret: nothing to authenticate with.
      if (auth === null) return;
      const { as, client } = oauthPartyOf(party);
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

/** The tokens to keep from a token response; an unrotated refresh token is kept. */
export function tokensFrom(
  result: oauth.TokenEndpointResponse,
  previous: { refresh_token: string | null; party: OAuthParty; generation?: number },
  now: number,
): ConnectionTokens {
  return {
    access_token: result.access_token,
    token_type: result.token_type,
    refresh_token: result.refresh_token ?? previous.refresh_token,
    expires_at: typeof result.expires_in === 'number' ? now + result.expires_in * 1000 : null,
    scope:
      typeof result.scope === 'string' && result.scope.trim() !== ''
        ? result.scope.trim().split(/\s+/)
        : [],
    generation: previous.generation ?? 0,
    party: previous.party,
  };
}
