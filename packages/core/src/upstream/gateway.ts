import * as oauth from 'oauth4webapi';
import { assertCoversPath, type Principal } from '../auth/principal.js';
import { parseResourcePath } from '../auth/resource-path.js';
import { setCoversPath } from '../auth/scope.js';
import type { Usable } from '../connections/usable.js';
import { isKeywayError, KeywayError } from '../contract/errors.js';
import { gatewayForwards } from '../contract/gateway-headers.js';
import { dpopOptions, withNonceRetry } from '../grants/dpop.js';
import { OutboundError } from '../outbound/network-failure.js';
import { oauthFetch } from '../outbound/oauth-fetch.js';
import {
  type PipedAnswer,
  type PipedBody,
  pipedHeader,
  pipedResponse,
  pipedStream,
  RELAYED,
  type RelayedAnswer,
} from '../outbound/piped.js';
import { toBase64Url } from '../platform/bytes.js';
import { withHeaders } from '../platform/headers.js';
import { RESOURCE_CHANGED } from '../providers/party.js';
import { type ConnectionTokens, connectionState, renewable } from '../storage/states.js';
import { asksForScope, bearerChallenge, challengedScopes } from './challenge.js';
import { InsufficientScopeError } from './connection-fetch.js';
import type { UpstreamDeps } from './deps.js';
import {
  callerOf,
  copyHeaders,
  discardAnswer,
  forwardedBody,
  type GatewayLimits,
  type HeldBody,
  relayAnswer,
  type UnreadBody,
  type UpstreamAnswer,
} from './limits.js';
import { sendWithOneRefresh, usableFor } from './send.js';

/*
 * The MCP gateway (docs/api.md §13): a caller's MCP request forwarded to the resource its
 * connection was authorized for, with the connection's token in place of the caller's
 * credential, and the answer streamed back as it arrives.
 */

/** The upstream's headers the caller gets. */
const RETURNED = ['content-type', 'mcp-session-id'];

/** JSON-RPC's "URL elicitation required" (MCP 2025-11-25). */
export const URL_ELICITATION_REQUIRED = -32042;

/**
 * A request for the gateway without a Web `Request`: what a server adapter has at hand (the
 * Node adapter passes Node's own header object and the body it read).
 */
export interface GatewayRequest {
  method: string;
  /** The caller's headers: a `Headers`, or an object of lower-case names (Node's). */
  headers: Headers | Readonly<Record<string, string | string[] | undefined>>;
  /**
   * The body: read (its size is checked here), as a stream, or not read yet (read once the
   * request holds its stream slot); `null` for none.
   */
  body: Uint8Array | ReadableStream<Uint8Array> | UnreadBody | null;
  /** Aborted when the caller goes away: the upstream request is closed then. */
  signal?: AbortSignal;
}

/**
 * The gateway's answer before it becomes a Web `Response`: what a server adapter writes
 * directly (the Node adapter pipes `body` to its socket).
 */
export interface GatewayAnswer {
  status: number;
  /** Lower-case names. */
  headers: Record<string, string>;
  /** The upstream's body as it streams, a JSON text, or nothing. */
  body: ReadableStream<Uint8Array> | string | null;
}

/** Whether an error means the user must consent again. */
function needsConsent(error: unknown): boolean {
  return (
    isKeywayError(error) &&
    (error.code === 'connection_not_active' || error.code === 'reauthorization_required')
  );
}

/** The `id` of a JSON-RPC request (not a notification, not a response), or undefined. */
function requestIdOf(body: Uint8Array): string | number | undefined {
  try {
    const message: unknown = JSON.parse(new TextDecoder().decode(body));
    if (typeof message !== 'object' || message === null || Array.isArray(message)) return undefined;
    const { id, method } = message as { id?: unknown; method?: unknown };
    if (typeof method !== 'string') return undefined;
    return typeof id === 'string' || typeof id === 'number' ? id : undefined;
  } catch {
    return undefined;
  }
}

const JSON_ANSWER = { 'content-type': 'application/json', 'cache-control': 'no-store' };

/**
 * The MCP gateway: `broker.gateway`. What `{base}/mcp/<connection>` serves over HTTP, for
 * any Web-standard server to call with the authenticated caller and its `Request`.
 *
 * @see [docs/api.md §13](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#13-mcp-gateway-and-api-proxy); docs/gateway.md
 */
export class Gateway {
  readonly #o: UpstreamDeps;

  /** @param options What `createBroker` gives: records, refresher, limits. */
  constructor(options: UpstreamDeps) {
    this.#o = options;
  }

  /** The gateway's limits in force. */
  get limits(): GatewayLimits {
    return this.#o.limits;
  }

  /**
   * Forwards one MCP request (`POST`, `GET` for the server's stream, `DELETE` to end a
   * session) to the resource the connection was authorized for, and answers what it
   * answered, its body streamed. Only `Content-Type`, `Accept`, `Mcp-Session-Id`,
   * `MCP-Protocol-Version`, `Last-Event-ID` and SEP-2243's `Mcp-Method`, `Mcp-Name` and
   * `Mcp-Param-*` go upstream, with the connection's token as `Authorization`; only
   * `Content-Type` and `Mcp-Session-Id` come back.
   *
   * A token due is refreshed first; an upstream `401` refreshes once and retries once, and a
   * second `401` means the user must consent again (with any scope its challenge named); an
   * upstream `403 insufficient_scope` throws {@link InsufficientScopeError} with its scopes.
   * A connection that needs consent answers a JSON-RPC `-32042` error with a fresh
   * authorization URL to a JSON-RPC request from a caller that may also authorize through
   * the provider, else throws `reauthorization_required`.
   *
   * @example
   * // A Web-standard route: the caller authenticated with a broker token.
   * const principal = await broker.authenticate(bearer);
   * return broker.gateway.mcp(principal, 'acme/users/alice/linear', request);
   *
   * @throws {KeywayError} `invalid_path`, `insufficient_scope` (the caller's scopes, or the
   *   upstream's step-up), `not_found`, `payload_too_large`, `reauthorization_required`,
   *   `rate_limited` (too many open upstream requests), `upstream_error`.
   */
  async mcp(
    principal: Principal,
    id: string,
    request: Request | GatewayRequest,
  ): Promise<Response> {
    const { status, headers, body } = await this.forward(principal, id, request);
    return new Response(body, { status, headers });
  }

  /**
   * {@link Gateway.mcp} answering a {@link GatewayAnswer} rather than a Web `Response`: for a
   * server adapter that writes status, headers and body itself (one object less per call).
   *
   * @throws {KeywayError} as {@link Gateway.mcp}.
   */
  async forward(
    principal: Principal,
    id: string,
    request: Request | GatewayRequest,
  ): Promise<GatewayAnswer> {
    return webAnswer(await this[RELAYED](principal, id, request));
  }

  /**
   * {@link Gateway.forward} for a server adapter that pipes the upstream's answer itself: its
   * body may be a {@link PipedBody} (the Node transport's), never turned into a Web stream.
   */
  async [RELAYED](
    principal: Principal,
    id: string,
    request: Request | GatewayRequest,
  ): Promise<RelayedAnswer> {
    const connectionId = parseResourcePath(id);
    assertCoversPath(principal, connectionId);
    // The slot first: a caller at its limit is refused before any byte of its body is held.
    const release = this.#o.slots.take(connectionId, callerOf(principal));
    let held: HeldBody | undefined;
    let relayed = false;
    try {
      held = forwardedBody(request, this.#o.limits.maxBodyBytes, this.#o.slots);
      // Awaited here only when it is still to be read: a turn less for every call.
      const bytes = held.bytes instanceof Promise ? await held.bytes : held.bytes;
      const answer = await this.#forward(principal, connectionId, request, bytes, release);
      relayed = answer.relayed;
      return answer.answer;
    } finally {
      // The body was sent (or never will be); a relayed stream keeps its slot until it ends.
      held?.release();
      if (!relayed) release();
    }
  }

  /** {@link Gateway.forward} once the request holds its slot and its body. */
  async #forward(
    principal: Principal,
    connectionId: string,
    request: Request | GatewayRequest,
    body: Uint8Array | null,
    release: () => void,
  ): Promise<{ answer: RelayedAnswer; relayed: boolean }> {
    const { records } = this.#o;
    const signal = request.signal ?? new AbortController().signal;
    const consent = async (error: unknown, scopes?: string[]) => ({
      answer: await this.#consent(principal, connectionId, body, error, scopes),
      relayed: false,
    });
    let current: Usable;
    try {
      // Awaited only when it had to wait (no promise turn for tokens opened already).
      const usable = usableFor(this.#o, connectionId, false);
      current = usable instanceof Promise ? await usable : usable;
    } catch (error) {
      if (needsConsent(error)) return consent(error);
      throw error;
    }
    const { record } = current;
    // The token goes to the endpoint it was authorized for, never to the provider's
    // current one: a provider re-pointed by whoever manages it must not receive it.
    const endpoint = records.resourceUrlOf(record.providerId, current.tokens.party);
    const target = endpoint instanceof Promise ? await endpoint : endpoint;
    if (target === null) {
      return consent(
        await records.requireReauthorization(
          connectionId,
          RESOURCE_CHANGED,
          RESOURCE_CHANGED.description,
        ),
      );
    }
    // Keyway's own agent, on either path (oauth4webapi keeps one that is set).
    const headers: Record<string, string> = { 'user-agent': 'Keyway-Gateway' };
    copyHeaders(request.headers, gatewayForwards, headers);
    const provider = record.providerId;
    try {
      const send = (tokens: ConnectionTokens) =>
        this.#send(tokens, request.method, signal, target, headers, body);
      let answer: Awaited<ReturnType<typeof send>>;
      try {
        // A refused answer's body was dropped by #send.
        ({ answer } = await sendWithOneRefresh(
          this.#o,
          connectionId,
          current.tokens,
          send,
          (sent) => sent.kind === 'refused',
          async () => {},
        ));
      } catch (error) {
        // The refresh the refusal called for needs the user.
        if (needsConsent(error)) return consent(error);
        throw error;
      }
      if (answer.kind === 'refused') {
        // The server will not take the connection's token, fresh or not: the user must
        // consent again, with any scope the server's challenge named.
        const refused = new KeywayError(
          'reauthorization_required',
          `the MCP server refused the connection's token (HTTP ` +
            `401)${renewable(current.tokens) ? ' after a refresh' : '; the connection holds no refresh token'}: ` +
            `authorize it again`,
        );
        return consent(refused, answer.scopes);
      }
      if (answer.kind === 'step_up') throw answer.error;
      const { response } = answer;
      const count = (outcome: string) => this.#o.observe({ kind: 'gateway', provider, outcome });
      const relayed = relayAnswer(response, release, RETURNED, count, [
        'the MCP server',
        'the gateway',
      ]);
      return { answer: relayed, relayed: true };
    } catch (error) {
      // A consent asked for was counted where it was asked (#consent).
      if (!(isKeywayError(error) && error.code === 'reauthorization_required')) {
        this.#o.observe({
          kind: 'gateway',
          provider,
          outcome: error instanceof InsufficientScopeError ? 'step_up' : 'upstream_error',
        });
      }
      if (signal.aborted) {
        throw new KeywayError(
          'upstream_error',
          'the caller went away before the MCP server answered',
        );
      }
      if (error instanceof OutboundError) {
        throw new KeywayError('upstream_error', `the MCP server: ${error.message}`, {
          cause: error,
        });
      }
      throw error;
    }
  }

  /**
   * One upstream request: its answer, or `refused` (a `401` — the token), or `step_up` (a
   * `403` with `insufficient_scope`), the body of those cancelled. A bearer token goes
   * through the piped fetch where there is one (Node): its answer is handed on without Web
   * objects unless it carries a challenge; a DPoP-bound one through oauth4webapi's request,
   * which adds the proof.
   */
  async #send(
    tokens: ConnectionTokens,
    method: string,
    signal: AbortSignal,
    url: string,
    headers: Record<string, string>,
    body: Uint8Array | null,
  ): Promise<
    | { kind: 'answer'; response: UpstreamAnswer }
    | { kind: 'refused'; scopes: string[] }
    | { kind: 'step_up'; error: InsufficientScopeError }
  > {
    const { piped } = this.#o.stream;
    try {
      let challenged: Response | undefined;
      if (piped !== undefined && tokens.dpop === undefined) {
        const answer: PipedAnswer = await piped(url, {
          method,
          headers: withHeaders(headers, { authorization: `Bearer ${tokens.access_token}` }),
          body,
          signal,
        });
        if (answer.status !== 401 && pipedHeader(answer, 'www-authenticate') === null) {
          return { kind: 'answer', response: answer };
        }
        // A challenge: read by oauth4webapi below, as on the Web path.
        challenged = pipedResponse(answer);
      }
      // A DPoP-bound token goes as `DPoP` with a fresh proof (`ath`), a nonce retried once.
      const dpop = challenged === undefined ? await dpopOptions(tokens.dpop) : {};
      const answered = challenged;
      const response = await withNonceRetry(() =>
        oauth.protectedResourceRequest(
          tokens.access_token,
          method,
          new URL(url),
          new Headers(headers),
          body,
          {
            [oauth.allowInsecureRequests]: true,
            // A piped answer with a challenge is judged here without being requested again.
            [oauth.customFetch]:
              answered === undefined ? oauthFetch(this.#o.stream) : () => Promise.resolve(answered),
            signal,
            ...dpop,
          },
        ),
      );
      if (response.status === 401) {
        await discardAnswer(response);
        return { kind: 'refused', scopes: [] };
      }
      return { kind: 'answer', response };
    } catch (error) {
      if (!(error instanceof oauth.WWWAuthenticateChallengeError)) throw error;
      const bearer = bearerChallenge(error.cause);
      // Scopes as RFC 6749 §3.3 writes them: nothing else reaches the caller or a consent.
      const scopes = challengedScopes(bearer);
      if (asksForScope(error.status, bearer)) {
        await discardAnswer(error.response);
        return { kind: 'step_up', error: new InsufficientScopeError(scopes, error.response) };
      }
      if (error.status === 401) {
        await discardAnswer(error.response);
        return { kind: 'refused', scopes };
      }
      // Any other answer with a challenge passes as it came, without the challenge (it
      // names the upstream's own authorization, not the gateway's).
      return { kind: 'answer', response: error.response };
    }
  }

  /**
   * The answer when the connection needs the user again: to a JSON-RPC request from a caller
   * whose scopes also cover the provider, a `-32042` error whose elicitation is a fresh
   * authorization URL; otherwise `409 reauthorization_required`.
   */
  async #consent(
    principal: Principal,
    connectionId: string,
    body: Uint8Array | null,
    cause: unknown,
    challenged: string[] = [],
  ): Promise<RelayedAnswer> {
    const { records } = this.#o;
    const record = await records.get(connectionId);
    const id = body === null ? undefined : requestIdOf(body);
    const providerId = record?.providerId;
    const mayAuthorize =
      providerId !== undefined &&
      (principal.kind === 'root' || setCoversPath(principal.scopes, providerId));
    const status = record?.status ?? 'deleted';
    if (providerId !== undefined) {
      this.#o.observe({ kind: 'gateway', provider: providerId, outcome: 'consent_required' });
    }
    // A provider with no consent page (docs/api.md §14: client credentials, JWT bearer,
    // enterprise) has no URL to send a user to: it is authorized again through the API.
    const withoutConsent =
      providerId !== undefined &&
      (await this.#o.providers.resolve(providerId).then(
        ({ state }) => state.grant !== undefined,
        () => false,
      ));
    if (id === undefined || !mayAuthorize || providerId === undefined || withoutConsent) {
      throw isKeywayError(cause) && cause.code === 'reauthorization_required' && status === 'active'
        ? cause
        : new KeywayError(
            'reauthorization_required',
            `connection ${JSON.stringify(connectionId)} needs the user's consent (it is ${status}): authorize it again`,
            { cause },
          );
    }
    // A challenge's scopes are asked for with those already granted (MCP step-up).
    const granted = record === null ? [] : connectionState(record).scopes;
    const started = await this.#o.authorize(principal, providerId, {
      connection_id: connectionId,
      ...(challenged.length > 0 ? { scopes: [...new Set([...granted, ...challenged])] } : {}),
    });
    const message =
      `Keyway needs your consent to use ${providerId} for ${connectionId}: open the link to authorize ` +
      `it, then retry.`;
    return {
      status: 200,
      headers: { ...JSON_ANSWER },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id,
        error: {
          code: URL_ELICITATION_REQUIRED,
          message: 'This request needs the user to authorize the connection.',
          data: {
            elicitations: [
              {
                mode: 'url',
                elicitationId: toBase64Url(this.#o.randomBytes(16)),
                url: started.authorization_url,
                message,
              },
            ],
            connection_id: connectionId,
            provider_id: providerId,
            authorization_url: started.authorization_url,
            expires_at: started.expires_at,
          },
        },
      }),
    };
  }
}

/** A relayed answer as a Web one: a piped body read as a Web stream. */
export function webAnswer(answer: RelayedAnswer): GatewayAnswer {
  const { status, headers, body } = answer;
  const web = body === null || typeof body === 'string' || body instanceof ReadableStream;
  return { status, headers, body: web ? body : pipedStream(body) };
}
