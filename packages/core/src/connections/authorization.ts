import * as oauth from 'oauth4webapi';
import { actorOf, assertCoversPath, type Principal } from '../auth/principal.js';
import { parseResourcePath } from '../auth/resource-path.js';
import { setCoversPath } from '../auth/scope.js';
import { type ConnectionFailure, connectionFailure } from '../contract/connection-failure.js';
import { KeywayError } from '../contract/errors.js';
import { AuthorizeBody, type AuthorizeInput, type VerifyInput } from '../contract/schemas.js';
import { isoTime } from '../contract/time.js';
import { parseShape } from '../contract/validation.js';
import { quoted } from '../discovery/index.js';
import { AUTHORIZATION_CODE } from '../grants/authorization-code.js';
import { authenticationOf } from '../grants/client-auth.js';
import { consentUrl, hashFlowId, hashState, requestedScopes } from '../grants/consent.js';
import { newDpopKey, wantsDpop } from '../grants/dpop.js';
import { tokenParamsOf } from '../grants/token-answers.js';
import { describeOAuthFailure, oauthErrorCode, ResponseRefused } from '../grants/token-endpoint.js';
import { endpointProblem } from '../outbound/fetch.js';
import { allowedHostSet } from '../outbound/hosts.js';
import { toBase64Url } from '../platform/bytes.js';
import { currentParty, FORGOTTEN_CLIENT } from '../providers/party.js';
import { type ClientProfile, callbackKey, redirectUriOf } from '../providers/registration.js';
import { noBaseUrl } from '../providers/state.js';
import {
  type ConnectionTokens,
  connectionState,
  PendingRecordStateSchema,
  type PendingState,
  readStored,
} from '../storage/states.js';
import { inSpan, PROVIDER } from '../telemetry/tracing.js';
import type { ConnectionDeps } from './deps.js';
import {
  type ConnectionRecords,
  incarnationOf,
  PENDING_AUTHORIZATION_TTL_MS,
  PKCE_VERIFIER_KIND,
  VERIFICATION_TOKENS_KIND,
} from './records.js';
import { verifyFlow } from './verification.js';
import type { ConnectionView } from './view.js';

/**
 * A URL the browser may be sent back to: one of the deployment's allowed origins
 * (`KEYWAY_ALLOWED_REDIRECTS`), with no credentials in it. Answers its normalized form.
 *
 * @param field The input's field, named in the refusal.
 * @throws {KeywayError} `invalid_redirect`.
 * @see [docs/api.md §5](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#5-connections) `redirect_to`; [docs/api.md §19](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#19-connect-sessions-and-the-hosted-connect-page) `redirect_uri`
 */
export function allowedRedirect(text: string, allowed: readonly string[], field: string): string {
  let url: URL | null;
  try {
    url = new URL(text);
  } catch {
    url = null;
  }
  if (url === null || !allowed.includes(url.origin) || url.username || url.password) {
    throw new KeywayError(
      'invalid_redirect',
      `"${field}" is not an allowed origin of this deployment`,
      {
        details: [{ path: field, message: 'not an allowed origin' }],
      },
    );
  }
  return url.href;
}

/**
 * The answer of an authorize call (docs/api.md §5).
 *
 * @see [docs/api.md §5](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#5-connections) "Authorize"
 */
export interface AuthorizeResult {
  connection_id: string;
  provider_id: string;
  authorization_url: string;
  expires_at: string;
}

/**
 * The outcome of a callback, for the HTTP layer to redirect or render.
 *
 * @see [docs/api.md §5](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#5-connections) "Callback"; [RFC 6749 §4.1.2](https://www.rfc-editor.org/rfc/rfc6749.html#section-4.1.2)
 */
export interface CallbackOutcome {
  connection_id: string;
  /** `verification_required`: consent succeeded; the app must confirm `flow_id`. */
  status: 'active' | 'error' | 'verification_required';
  error: ConnectionFailure | null;
  redirect_to: string | null;
  /** With `verification_required`: the one-time id to confirm with `POST /api/oauth/verify`. */
  flow_id?: string;
  /** `connect`: a connect page (docs/api.md §19) started it, and listens for how it ended. */
  page?: 'connect';
}

/** How an authorization is started, besides its input: what started it. */
export interface AuthorizeOptions {
  /** `connect`: a connect page (docs/api.md §19), told how the consent ended. */
  page?: 'connect';
}

/**
 * The authorization flow (docs/api.md §5): authorize (consent URL, PKCE, state), callback (code
 * exchange at the party the authorization started with), and user verification.
 */
export class AuthorizationFlow {
  readonly #allowedHosts: ReadonlySet<string>;

  readonly #deps: ConnectionDeps;

  constructor(
    deps: ConnectionDeps,
    readonly records: ConnectionRecords,
  ) {
    this.#deps = deps;
    this.#allowedHosts = allowedHostSet(deps.allowedHosts);
  }

  #profile(): ClientProfile {
    const { profile } = this.#deps;
    if (profile === null) throw noBaseUrl();
    return profile;
  }

  #redirectTarget(text: string | undefined): string | null {
    return text === undefined
      ? null
      : allowedRedirect(text, this.#deps.allowedRedirects, 'redirect_to');
  }

  async authorize(
    principal: Principal,
    providerId: string,
    input: AuthorizeInput,
    options: AuthorizeOptions = {},
  ): Promise<AuthorizeResult> {
    const o = this.#deps;
    const provider = parseResourcePath(providerId);
    const shape = parseShape(AuthorizeBody, input);
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
    const profile = this.#profile();
    const known = await this.records.get(connectionId);
    if (known !== null && known.providerId !== provider) {
      throw new KeywayError(
        'conflict',
        `connection ${JSON.stringify(connectionId)} belongs to provider ${JSON.stringify(known.providerId)}`,
      );
    }
    // Re-reads the resource's metadata: a move to another authorization server registers
    // there first (and may put this connection in error: its tokens are the old server's).
    const resolved = await o.providers.forAuthorization(provider);
    const existing = await this.records.get(connectionId);

    const { state: providerState } = resolved;
    const server = providerState.authorization_server;
    // The client's redirect URI: its server's own (the mix-up defense), or the shared one.
    const callback = resolved.client.callback ?? 'shared';
    const redirectUri = redirectUriOf(profile, server.issuer, callback);
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
    const scopes = requestedScopes(
      shape.scopes,
      providerState,
      existing === null ? null : connectionState(existing),
    );
    const now = o.now();
    const state = toBase64Url(o.randomBytes(32));
    const stateHash = hashState(state);
    const verifier = oauth.generateRandomCodeVerifier();
    const challenge = await oauth.calculatePKCECodeChallenge(verifier);
    const expiresAt = now + PENDING_AUTHORIZATION_TTL_MS;
    const tokenParams = tokenParamsOf(providerState);

    const connection = await this.records.ensure(existing, {
      id: connectionId,
      providerId: provider,
      scopes,
      actor: actorOf(principal),
    });
    const verifierEntry = await o
      .vault()
      .seal({ kind: PKCE_VERIFIER_KIND, key: stateHash }, verifier);
    await o.storage.insertPendingAuthorization({
      stateHash,
      connectionId,
      providerId: provider,
      state: {
        verifier: verifierEntry.ciphertext,
        redirect_uri: redirectUri,
        callback_key: callback === 'per_server' ? callbackKey(server.issuer) : null,
        redirect_to: redirectTo,
        scopes,
        party: { ...party },
        verify_user: verifyUser,
        started_by: principal.kind === 'token' ? (principal.idHash ?? null) : null,
        ...(tokenParams === undefined ? {} : { token_params: tokenParams }),
        ...(providerState.oauth2?.pkce === 'none' ? { pkce: 'none' as const } : {}),
        ...(connection === null ? {} : { connection }),
        ...(options.page === undefined ? {} : { page: options.page }),
      } satisfies PendingState,
      expiresAt,
      createdAt: now,
    });

    const url = consentUrl(providerState, party, { redirectUri, state, challenge, scopes });
    return {
      connection_id: connectionId,
      provider_id: provider,
      authorization_url: url,
      expires_at: isoTime(expiresAt),
    };
  }

  /**
   * @param arrivedAt The key of the callback URL the browser came back to
   *   (`/api/oauth/callback/<key>`), or `null` for the shared `/api/oauth/callback`.
   */
  async callback(query: URLSearchParams, arrivedAt: string | null): Promise<CallbackOutcome> {
    const o = this.#deps;
    const state = query.get('state');
    if (state === null || state === '' || query.getAll('state').length > 1) {
      throw new KeywayError('invalid_request', 'the callback carries no single state');
    }
    const stateHash = hashState(state);
    const pending = await o.storage.takePendingAuthorization(stateHash, o.now());
    const taken =
      pending === null
        ? null
        : readStored(PendingRecordStateSchema, pending.state, 'pending authorization');
    if (pending === null || taken === null || taken.kind === 'verification') {
      throw new KeywayError(
        'invalid_request',
        'this authorization is unknown, expired or already used',
      );
    }
    const saved = taken;
    const verifier = await o.vault().open({
      kind: PKCE_VERIFIER_KIND,
      key: stateHash,
      ciphertext: saved.verifier,
      keyId: '',
    });
    const outcome = (
      status: CallbackOutcome['status'],
      error: { code: string; description: string } | null,
      flowId?: string,
    ): CallbackOutcome => ({
      connection_id: pending.connectionId,
      status,
      error: error === null ? null : connectionFailure(error),
      redirect_to: saved.redirect_to,
      ...(flowId === undefined ? {} : { flow_id: flowId }),
      ...(saved.page === undefined ? {} : { page: saved.page }),
    });

    let tokens: Omit<ConnectionTokens, 'generation'>;
    try {
      // RFC 9700 §4.4.2: a response that came back to another redirect URI than the one its
      // authorization request named was issued by another server (a mix-up): its code goes
      // nowhere, also to none of the servers' token endpoints.
      if (arrivedAt !== (saved.callback_key ?? null)) {
        throw new ResponseRefused(
          'invalid_response',
          'the authorization response came back to the redirect URI of another authorization server (a mix-up, RFC ' +
            '9700 §4.4): refused',
        );
      }
      // An authorization lives no longer than what started it: the connection it is for
      // (not deleted meanwhile) and the broker token that asked for it (not revoked,
      // expired or narrowed away from the connection or the provider).
      const connection = await this.records.get(pending.connectionId);
      if (
        connection === null ||
        (saved.connection !== undefined && incarnationOf(connection) !== saved.connection)
      ) {
        return outcome('error', {
          code: 'connection_deleted',
          description: 'the connection was deleted after this authorization started',
        });
      }
      if (!(await this.#starterStillCovers(saved.started_by ?? null, pending))) {
        throw new ResponseRefused(
          'invalid_request',
          'the broker token that started this authorization was revoked, expired or narrowed meanwhile: start it again',
        );
      }
      const auth = await authenticationOf(o, pending.providerId, saved.party, 'current');
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
          `the authorization response's "iss" ${quoted(iss.join(', '))} is not the issuer ` +
            `${quoted(saved.party.issuer)} exactly (RFC 9207): refused`,
        );
      }
      const { state: provider } = await o.providers.resolve(pending.providerId);
      const server = provider.authorization_server;
      // RFC 9449: tokens bound to a key of this connection where the provider says so or its
      // inject-only provider's server takes DPoP (a token handed out stays a Bearer token).
      const dpop =
        server.issuer === saved.party.issuer && wantsDpop(provider, server)
          ? await newDpopKey()
          : undefined;
      const request = {
        providerId: pending.providerId,
        provider,
        party: saved.party,
        scopes: saved.scopes,
        auth,
        dpop,
      };
      const code = {
        query,
        state,
        redirectUri: saved.redirect_uri,
        verifier: saved.pkce === 'none' ? null : verifier,
        tokenParams: saved.token_params,
      };
      tokens = await inSpan('keyway.code_exchange', { [PROVIDER]: pending.providerId }, () =>
        AUTHORIZATION_CODE.obtain(o, request, { code }),
      );
    } catch (error) {
      const forgotten =
        (await oauthErrorCode(error)) === 'invalid_client' &&
        (await o.providers.markRegistrationStale(
          pending.providerId,
          saved.party.issuer,
          saved.party.client_id,
        ));
      const failure = forgotten
        ? FORGOTTEN_CLIENT
        : refusedClient(describeOAuthFailure(error), saved.party.token_endpoint_auth_method);
      const status = await this.records.recordFailure(pending.connectionId, failure);
      return outcome(status, failure);
    }

    if (saved.verify_user) {
      // Consent succeeded, but the app has not yet said the right user gave it: hold the
      // tokens with a one-time flow id until it does, for as long as the state would live.
      const flowId = toBase64Url(o.randomBytes(32));
      const flowHash = hashFlowId(flowId);
      const sealed = await o
        .vault()
        .seal({ kind: VERIFICATION_TOKENS_KIND, key: flowHash }, JSON.stringify(tokens));
      await o.storage.insertPendingAuthorization({
        stateHash: flowHash,
        connectionId: pending.connectionId,
        providerId: pending.providerId,
        state: { kind: 'verification', tokens: sealed.ciphertext, scopes: saved.scopes },
        expiresAt: pending.expiresAt,
        createdAt: o.now(),
      });
      return outcome('verification_required', null, flowId);
    }
    const written = await this.records.activate(
      pending.connectionId,
      tokens,
      saved.scopes,
      'system',
    );
    if (written === null) {
      return outcome('error', {
        code: 'connection_deleted',
        description: 'the connection was deleted meanwhile',
      });
    }
    return outcome('active', null);
  }

  /** Whether the token that started an authorization still covers its connection and provider. */
  async #starterStillCovers(
    idHash: string | null,
    pending: { connectionId: string; providerId: string },
  ): Promise<boolean> {
    if (idHash === null) return true;
    const token = await this.#deps.storage.findTokenByIdHash(idHash);
    return (
      token !== null &&
      token.expiresAt > this.#deps.now() &&
      setCoversPath(token.scopes, pending.connectionId) &&
      setCoversPath(token.scopes, pending.providerId)
    );
  }

  /** Confirms a user-verification flow (docs/api.md §5 "User verification"). */
  verify(principal: Principal, input: VerifyInput): Promise<ConnectionView> {
    return verifyFlow(this.#deps, this.records, principal, input);
  }
}

/**
 * A code exchange the server refused for its client (`invalid_client`), with what to check:
 * an operator's client id and secret, and how the server takes them — HubSpot, for one,
 * reads the secret from the body only (`credentials.token_endpoint_auth_method`).
 */
function refusedClient(
  failure: { code: string; description: string },
  method: string,
): { code: string; description: string } {
  if (failure.code !== 'invalid_client') return failure;
  const other = method === 'client_secret_basic' ? 'client_secret_post' : 'client_secret_basic';
  return {
    code: failure.code,
    description:
      `${failure.description}: the token endpoint refused the client, which authenticated with ${method}. ` +
      `Check its client id and secret; if they are right, the server may take the secret another way: ` +
      `set credentials.token_endpoint_auth_method to "${other}"`,
  };
}
