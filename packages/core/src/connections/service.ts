import { listScope, pathsQuery } from '../auth/listing.js';
import { actorOf, assertCoversPath, type Principal } from '../auth/principal.js';
import { parseResourcePath } from '../auth/resource-path.js';
import { KeywayError } from '../contract/errors.js';
import { listPage, type Page } from '../contract/pagination.js';
import type { ProbeResult } from '../contract/probe-result.js';
import type { UpdateConnectionInput } from '../contract/schemas.js';
import {
  AuthorizeBody,
  type AuthorizeInput,
  ConnectionListQuery,
  type ConnectionListQueryInput,
  CredentialsQuery,
  type CredentialsQueryInput,
  type VerifyInput,
} from '../contract/schemas.js';
import { isoTimeOrNull } from '../contract/time.js';
import { parseQuery, parseShape } from '../contract/validation.js';
import { CONNECTION_VIEW_JSON } from '../contract/view-json.js';
import { type RevocationOutcome, revoke } from '../grants/revocation.js';
import type { ConnectionRecord, ListConnectionsQuery } from '../storage/record-types.js';
import { connectionState } from '../storage/states.js';
import { type AheadOutcome, activeConnections, refreshNow, sweepAhead } from './ahead.js';
import {
  AuthorizationFlow,
  type AuthorizeOptions,
  type AuthorizeResult,
  type CallbackOutcome,
} from './authorization.js';
import type { ConnectionDeps } from './deps.js';
import { assertExportable, readForHandOut } from './hand-out.js';
import { updatePortalSettings } from './portal-fields.js';
import { CONNECTION_TOKENS_KIND, type ConnectionRecords, notFound } from './records.js';
import type { Refresher } from './refresh.js';
import { usableTokensOf } from './usable.js';
import { type ConnectionView, ConnectionViewCache, connectionView, grantedScopes } from './view.js';
import { connectWithoutConsent } from './without-consent.js';

/** The connection probe, made by the upstream layer (docs/api.md §8). */
export type Probe = (principal: Principal, id: string) => Promise<ProbeResult>;

/** The key of the in-process hand-out `connectionFetch` uses (not part of the API). */
export const TRUSTED_HAND_OUT: unique symbol = Symbol('keyway.trustedHandOut');

/**
 * What `GET /api/oauth/credentials/<path>` answers (docs/api.md §5).
 *
 * @see [docs/api.md §5](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#5-connections) "Credentials"
 */
export interface Credentials {
  connection_id: string;
  access_token: string;
  token_type: 'Bearer';
  expires_at: string | null;
  scopes: string[];
}

/**
 * Connections (docs/api.md §5): authorize, callback, user verification, credentials with
 * refresh, read, list and delete. Reached as `broker.connections`; every operation but the
 * callback (whose credential is its single-use `state`) takes the acting principal.
 */
export class ConnectionService {
  readonly #deps: ConnectionDeps;
  readonly #records: ConnectionRecords;
  readonly #flow: AuthorizationFlow;
  readonly #refresher: Refresher;
  readonly #probe: Probe;
  readonly #views = new ConnectionViewCache();

  /**
   * @param deps What `createBroker` hands every part of the connections.
   * @param records The connection records, shared with the gateway.
   * @param refresher The single-flight refresher, shared with the gateway.
   * @param probe The connection probe (docs/api.md §8): an MCP conversation sent with the
   *   connection, which the upstream layer makes.
   */
  constructor(
    deps: ConnectionDeps,
    records: ConnectionRecords,
    refresher: Refresher,
    probe: Probe,
  ) {
    this.#deps = deps;
    this.#records = records;
    this.#flow = new AuthorizationFlow(deps, records);
    this.#refresher = refresher;
    this.#probe = probe;
  }

  /**
   * Starts an authorization: stores the pending authorization (hash of a fresh `state`,
   * the PKCE verifier encrypted in the vault, the party the code will be exchanged with,
   * expiry) and, for a new connection, a `pending` connection; answers the consent address.
   * An active connection stays active with its tokens until the new authorization
   * completes. With `verify_user`, the app must confirm the completed consent
   * ({@link ConnectionService.verify}) before the connection uses it. For a provider of the
   * client credentials grant (docs/api.md §14) there is no consent: the token is obtained
   * at once and the connection's view answered.
   *
   * @param input An {@link AuthorizeInput}, checked here.
   * @param options What started it: a connect page (docs/api.md §19) is told how it ended.
   * @throws {KeywayError} `invalid_request`, `invalid_path`, `invalid_redirect`,
   *   `insufficient_scope`, `not_found`, `conflict`, `unsupported_authorization_server`
   *   (a stored endpoint that is no longer acceptable).
   * @see [docs/api.md §5](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#5-connections); [RFC 7636](https://www.rfc-editor.org/rfc/rfc7636.html) (PKCE); [RFC 8707](https://www.rfc-editor.org/rfc/rfc8707.html) (`resource`)
   */
  async authorize(
    principal: Principal,
    providerId: string,
    input: AuthorizeInput,
    options: AuthorizeOptions = {},
  ): Promise<AuthorizeResult> {
    if (await this.#withoutConsent(principal, providerId, input)) {
      throw new KeywayError(
        'invalid_request',
        `provider ${JSON.stringify(providerId)} needs no consent page (docs/api.md §14): there is no consent URL; ` +
          `use connections.start(), which answers the connection`,
      );
    }
    return this.#flow.authorize(principal, providerId, input, options);
  }

  /**
   * Whether a provider's tokens need no consent page (docs/api.md §14): asked once the input
   * is valid and the caller covers the connection and the provider, as authorize checks them.
   */
  async #withoutConsent(principal: Principal, providerId: string, input: AuthorizeInput) {
    const provider = parseResourcePath(providerId);
    const shape = parseShape(AuthorizeBody, input);
    assertCoversPath(principal, parseResourcePath(shape.connection_id, 'connection_id'));
    assertCoversPath(principal, provider);
    const { state } = await this.#deps.providers.resolve(provider);
    if (state.grant === undefined && shape.subject_token !== undefined) {
      const message = '"subject_token" is for a provider of mode "enterprise"';
      throw new KeywayError('invalid_request', message, {
        details: [{ path: 'subject_token', message }],
      });
    }
    return state.grant !== undefined;
  }

  /**
   * {@link ConnectionService.authorize} for any provider (what `POST
   * /api/oauth/authorize/<provider>` does): the consent address of the authorization code
   * flow, or — for a provider of the client credentials grant (docs/api.md §14), which has
   * no user and no consent — the token obtained at once and the connection's view.
   *
   * @example
   * const started = await broker.connections.start(principal, 'acme/billing', {
   *   connection_id: 'acme/services/billing',
   * });
   * if ('authorization_url' in started) redirect(started.authorization_url);
   *
   * @throws {KeywayError} as {@link ConnectionService.authorize}; with the client credentials
   *   grant, `upstream_error` when the server refuses (the connection says why).
   */
  async start(
    principal: Principal,
    providerId: string,
    input: AuthorizeInput,
  ): Promise<AuthorizeResult | ConnectionView> {
    if (await this.#withoutConsent(principal, providerId, input))
      return connectWithoutConsent(this.#deps, this.#records, principal, providerId, input);
    return this.#flow.authorize(principal, providerId, input);
  }

  /**
   * Completes an authorization from the browser's return to the callback: takes the
   * pending authorization (once, before expiry), checks the response (state, RFC 9207
   * `iss`), exchanges the code with the PKCE verifier and `resource` at the server the
   * authorization was started with, and stores the tokens encrypted with that party. An
   * unknown, expired or replayed `state` changes nothing. With user verification, the
   * tokens are held for the app's confirmation instead.
   *
   * The response must come back to the redirect URI its request named: a server's own
   * callback (`/api/oauth/callback/<key>`) or the shared one; on another, it is refused as
   * a mix-up without its code going anywhere. Pass the whole URL the browser came back to
   * (its last segment is the key when the one before is `callback`), or its query and the
   * key (`null` for the shared callback).
   *
   * @example
   * const outcome = await broker.connections.callback(new URL(request.url));
   *
   * @throws {KeywayError} `invalid_request` for an unknown, expired or replayed state.
   * @see [docs/api.md §5](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#5-connections); [RFC 6749 §4.1.2](https://www.rfc-editor.org/rfc/rfc6749.html#section-4.1.2); [RFC 9207 §2.4](https://www.rfc-editor.org/rfc/rfc9207.html#section-2.4); [RFC 9700 §4.4](https://www.rfc-editor.org/rfc/rfc9700.html#section-4.4)
   */
  callback(response: URL | URLSearchParams, callbackKey?: string | null): Promise<CallbackOutcome> {
    if (response instanceof URLSearchParams)
      return this.#flow.callback(response, callbackKey ?? null);
    const segments = response.pathname.split('/');
    const key =
      callbackKey !== undefined
        ? callbackKey
        : segments.at(-2) === 'callback'
          ? (segments.at(-1) ?? null)
          : null;
    return this.#flow.callback(response.searchParams, key);
  }

  /**
   * Confirms a user-verification flow (docs/api.md §5, opt-in with `verify_user`): the app,
   * which knows who is signed in, says the consent came from the right user. The flow id
   * is single-use, also when the confirmation is refused; only then does the connection
   * use the new tokens.
   *
   * @param input `{ flow_id }`, checked here.
   * @throws {KeywayError} `invalid_request` (unknown, expired or used flow id),
   *   `insufficient_scope` (the credential does not cover the connection), `not_found`.
   */
  verify(principal: Principal, input: VerifyInput): Promise<ConnectionView> {
    return this.#flow.verify(principal, input);
  }

  /**
   * A connection's access token, for trusted server code or an MCP client (docs/api.md §5):
   * refreshed first when it expires within the refresh margin or when `force_refresh` is
   * set. Refresh is single-flight per connection, in this process and across every
   * instance sharing the storage: concurrent callers wait for the one refresh and get its
   * result.
   *
   * @param query `{ force_refresh?: boolean }`, checked here.
   * @throws {KeywayError} `invalid_request`, `invalid_path`, `insufficient_scope`,
   *   `not_found`, `connection_not_active`, `refresh_unavailable` (`force_refresh` on a
   *   connection without a refresh token), `reauthorization_required` (the refresh token
   *   was rejected, or the provider moved to another server or client; the connection is
   *   now in `error`), `upstream_error` (refresh failed and the current token has expired).
   */
  async credentials(
    principal: Principal,
    id: string,
    query?: CredentialsQueryInput,
  ): Promise<Credentials> {
    const connectionId = parseResourcePath(id);
    const force = parseQuery(CredentialsQuery, query).force_refresh === true;
    return this.#handOut(principal, connectionId, force, 'caller');
  }

  /**
   * The in-process hand-out of `connectionFetch`: trusted code holding the broker gets the
   * token of an inject-only connection too (docs/api.md §13), still recorded as a hand-out.
   */
  async [TRUSTED_HAND_OUT](principal: Principal, id: string, force: boolean): Promise<Credentials> {
    return this.#handOut(principal, parseResourcePath(id), force, 'trusted');
  }

  /** A hand-out of a connection's token, recorded before it leaves. */
  async #handOut(
    principal: Principal,
    connectionId: string,
    force: boolean,
    who: 'caller' | 'trusted',
  ): Promise<Credentials> {
    assertCoversPath(principal, connectionId);
    const read = await readForHandOut(this.#deps.storage, connectionId);
    if (read === null) throw notFound(connectionId);
    const record = read.connection;
    if (who === 'caller') await assertExportable(this.#deps.providers, record, read.provider);
    const { vaultEntry } = read;
    const tokens = await usableTokensOf(
      this.#deps,
      this.#records,
      this.#refresher,
      record,
      force,
      vaultEntry,
    );
    if (who === 'caller' && tokens.party.inject_only === true) {
      throw new KeywayError(
        'credentials_not_exportable',
        `connection ${JSON.stringify(connectionId)} was authorized while its provider was inject-only: its tokens ` +
          `never leave the broker until it is authorized again; call the server through the gateway ` +
          `({base}/mcp/${connectionId})`,
      );
    }
    if (tokens.dpop !== undefined) {
      throw new KeywayError(
        'credentials_not_exportable',
        `connection ${JSON.stringify(connectionId)} holds a DPoP-bound token (RFC 9449), useless without the key ` +
          `that never leaves the broker: call the server through the gateway ({base}/mcp/${connectionId})`,
      );
    }
    const expiresAt = isoTimeOrNull(tokens.expires_at);
    // Recorded before the token leaves: a hand-out that cannot be recorded does not happen.
    await this.#deps.events.append({
      type: 'credentials.issued',
      actor: actorOf(principal),
      resource: connectionId,
      data: { token_expires_at: expiresAt, ...(force ? { forced_refresh: true } : {}) },
    });
    return {
      connection_id: connectionId,
      access_token: tokens.access_token,
      token_type: 'Bearer',
      expires_at: expiresAt,
      scopes: tokens.scope.length > 0 ? tokens.scope : grantedScopes(record),
    };
  }

  /**
   * Checks that a connection really works (docs/api.md §8): an MCP conversation with its
   * provider's server using the connection's token (refreshed first when due, and once more
   * on a `401`), through the guarded outbound fetch, reported step by step. Both MCP wires:
   * the stateless one of 2026-07-28 (`server/discover`) and the stateful one (`initialize`,
   * the session closed at the end). The token never appears in the answer.
   *
   * @throws {KeywayError} `invalid_path`, `insufficient_scope`, `not_found`,
   *   `connection_not_active`, `reauthorization_required`, `upstream_error`.
   * @see [docs/api.md §8](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#8-connection-probe)
   */
  probe(principal: Principal, id: string): Promise<ProbeResult> {
    return this.#probe(principal, id);
  }

  /**
   * Refreshes the active, refreshable connections that no refresh has touched for
   * `refreshIdleAfter` (counted from their last refresh, else their authorization), so
   * refresh tokens that expire when idle stay alive. Each refresh takes the connection's
   * lease, so instances that run this at once refresh each connection once; outcomes are
   * the usual events (`connection.refreshed`, `connection.reauthorization_required`,
   * `connection.failed`). The broker runs it in the background when the option is set.
   *
   * @returns how many connections were due, refreshed, and failed.
   * @see docs/connections.md "Idle refresh"
   */
  async refreshIdle(): Promise<{ due: number; refreshed: number; failed: number }> {
    const o = this.#deps;
    const idleAfter = o.refreshIdleAfterMs;
    const outcome = { due: 0, refreshed: 0, failed: 0 };
    if (idleAfter === false) return outcome;
    for await (const record of activeConnections(o)) {
      const state = connectionState(record);
      const touched = state.last_refreshed_at ?? state.authorized_at;
      if (state.refreshable !== true || touched === null || o.now() - touched < idleAfter) {
        continue;
      }
      outcome.due++;
      const result = await refreshNow(this.#records, this.#refresher, record);
      if (result !== 'skipped') outcome[result]++;
    }
    return outcome;
  }

  /**
   * One round of refresh ahead (`refreshAhead`) and the expiring notice: the connections
   * whose server rotates refresh tokens (or every refreshable one, `all`) are refreshed
   * before their access token expires, each once across instances (the refresh lease), and
   * `connection.expiring` is sent once for a refresh token that ends within
   * `expiringNotice`. The broker runs it in the background when `refreshAhead` is set.
   *
   * @returns how many connections were due, refreshed, failed, and announced as expiring.
   * @see docs/connections.md "Refresh ahead"
   */
  refreshAhead(): Promise<AheadOutcome> {
    return sweepAhead(this.#deps, this.#records, this.#refresher);
  }

  /**
   * Reads a connection (never a token).
   *
   * @throws {KeywayError} `invalid_path`, `insufficient_scope`, `not_found`.
   */
  async get(principal: Principal, id: string): Promise<ConnectionView> {
    return connectionView(await this.#read(principal, id), this.#deps.now());
  }

  /** {@link ConnectionService.get} as JSON, for the HTTP API: made once per record read. */
  async [CONNECTION_VIEW_JSON](principal: Principal, id: string): Promise<string> {
    return this.#views.json(await this.#read(principal, id), this.#deps.now());
  }

  /** The record of a connection the principal may read. */
  async #read(principal: Principal, id: string): Promise<ConnectionRecord> {
    const connectionId = parseResourcePath(id);
    assertCoversPath(principal, connectionId);
    const record = await this.#records.get(connectionId);
    if (record === null) throw notFound(connectionId);
    return record;
  }

  /**
   * Sets or clears what the portal reads of a connection (docs/api.md §18): its `alias` and
   * its `tools` policy (`null` clears one; an absent field is kept).
   *
   * @throws {KeywayError} `invalid_request` (the body; an alias a sibling already has),
   *   `invalid_path`, `insufficient_scope`, `not_found`.
   */
  async update(
    principal: Principal,
    id: string,
    input: UpdateConnectionInput,
  ): Promise<ConnectionView> {
    const written = await updatePortalSettings(this.#deps, this.#records, principal, id, input);
    return connectionView(written, this.#deps.now());
  }

  /**
   * Lists the connections the caller's scopes cover, by prefix, provider and status.
   *
   * @param query `{ prefix?, provider_id?, status?, limit?, cursor? }`, checked here.
   */
  async list(
    principal: Principal,
    query?: ConnectionListQueryInput,
  ): Promise<Page<ConnectionView>> {
    const options = parseQuery(ConnectionListQuery, query);
    const scope = listScope(principal, options.prefix);
    const providerId =
      options.provider_id === undefined
        ? undefined
        : parseResourcePath(options.provider_id, 'provider_id');
    const now = this.#deps.now();
    return listPage(
      options,
      (window) => {
        const listed: ListConnectionsQuery = pathsQuery(scope, window);
        if (providerId !== undefined) listed.providerId = providerId;
        if (options.status !== undefined) listed.status = options.status;
        return this.#deps.storage.listConnections(listed);
      },
      (record) => record.id,
      (record) => connectionView(record, now),
    );
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
    const record = await this.#records.get(connectionId);
    if (record === null) throw notFound(connectionId);
    const tokens = await this.#records.tokensOf(record).catch(() => null);
    const revocation: RevocationOutcome =
      tokens === null
        ? { attempted: false, reason: 'no_tokens' }
        : await revoke(this.#deps, record.providerId, tokens);
    const { events, storage } = this.#deps;
    await events.recorded(
      {
        type: 'connection.deleted',
        actor: actorOf(principal),
        resource: connectionId,
        data: { revocation },
      },
      (written) =>
        storage.deleteConnection(
          connectionId,
          [{ kind: CONNECTION_TOKENS_KIND, key: connectionId }],
          written,
        ),
    );
  }
}
