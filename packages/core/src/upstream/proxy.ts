import type { Principal } from '../auth/principal.js';
import { parseResourcePath } from '../auth/resource-path.js';
import { setCoversPath } from '../auth/scope.js';
import { connectionApiBase } from '../catalog/connection-values.js';
import type { ConnectionValue } from '../catalog/schema.js';
import { KeywayError } from '../contract/errors.js';
import { OutboundError } from '../outbound/network-failure.js';
import { RELAYED, type RelayedAnswer } from '../outbound/piped.js';
import { withHeaders } from '../platform/headers.js';
import type { ConnectionTokens } from '../storage/states.js';
import type { UpstreamDeps } from './deps.js';
import { type GatewayAnswer, type GatewayRequest, webAnswer } from './gateway.js';
import {
  callerOf,
  copyHeaders,
  discardAnswer,
  forwardedBody,
  type HeldBody,
  relayAnswer,
  type UpstreamAnswer,
} from './limits.js';
import { sendWithOneRefresh, usableFor } from './send.js';

/*
 * The API proxy (docs/api.md §13): `{base}/proxy/<connection>/<rest>` forwarded to the
 * `api_base_url` the connection's tokens were issued for, with the connection's token in
 * place of the caller's credential. The path can never leave that base.
 */

/** The caller's headers the API gets: how to read the body and conditions, nothing else. */
const FORWARDED = new Set(['accept', 'accept-language', 'content-type']);
/** The API's headers the caller gets back. */
const RETURNED = ['content-type', 'etag', 'last-modified', 'link', 'retry-after', 'location'];
/** The most path segments a connection id is looked for in. */
const MAX_SEGMENTS = 32;

/** A request for the proxy: the gateway's, with what follows `/proxy/` still encoded. */
export interface ProxyRequest extends GatewayRequest {
  /** The path after `/proxy/`, as the request target wrote it (percent-encoded). */
  path: string;
  /** The query string, with or without its `?`, as the request target wrote it. */
  query: string;
}

const refused = (message: string) =>
  new KeywayError('invalid_path', `the proxy path ${message}`, {
    details: [{ path: 'path', message }],
  });

/**
 * The segments of a proxied path, decoded, each checked: none empty (but a trailing `/`),
 * none a dot segment in any spelling, none holding an encoded `/` or a `\`.
 *
 * @throws {KeywayError} `invalid_path`.
 */
export function proxySegments(path: string): { segments: string[]; trailingSlash: boolean } {
  const raw = path.split('/');
  const trailingSlash = raw.length > 1 && raw.at(-1) === '';
  if (trailingSlash) raw.pop();
  const segments = raw.map((segment) => {
    if (segment === '') throw refused('has an empty segment (`//`, or an absolute URL)');
    let decoded: string;
    try {
      decoded = decodeURIComponent(segment);
    } catch {
      throw refused('has a segment that is not valid percent-encoding');
    }
    if (decoded === '.' || decoded === '..') throw refused('has a dot segment');
    if (/[/\\?#]/.test(decoded)) throw refused('has an encoded `/`, `\\`, `?` or `#`');
    return decoded;
  });
  return { segments, trailingSlash };
}

/**
 * A connection's API base: its party's, with the connection's own values filled in
 * (docs/api.md §15).
 *
 * @throws {KeywayError} `reauthorization_required` when a value is missing (it comes with
 *   an authorization); `upstream_error` when the provider gave one its pattern refuses.
 */
function baseOf(
  id: string,
  template: string,
  values: readonly ConnectionValue[] | undefined,
  tokens: ConnectionTokens,
): string {
  if (values === undefined || values.length === 0) return template;
  const filled = connectionApiBase(template, values, tokens.metadata);
  if ('base' in filled) return filled.base;
  const { name, description, missing } = filled.problem;
  const details = [{ path: `metadata.${name}`, message: description }];
  if (missing) {
    throw new KeywayError(
      'reauthorization_required',
      `the connection ${JSON.stringify(id)} has no "${name}" (${description}), which its API base needs: authorize ` +
        `it again`,
      { details },
    );
  }
  throw new KeywayError(
    'upstream_error',
    `the provider gave the connection ${JSON.stringify(id)} a "${name}" that is not ${description}: nothing was sent`,
    { details },
  );
}

/** The API proxy: `broker.proxy`. */
export class ApiProxy {
  readonly #o: UpstreamDeps;

  constructor(options: UpstreamDeps) {
    this.#o = options;
  }

  /**
   * Forwards one request to the API of the connection its path begins with (the longest
   * prefix that is a connection the caller covers) and answers what the API answered, its
   * body streamed. A token due is refreshed first; an API `401` refreshes once and retries
   * once, then passes on. Only `Accept`, `Accept-Language` and `Content-Type` and the
   * `If-*` conditions go to the API, with the profile's API headers and the connection's
   * token; only `Content-Type`, `ETag`, `Last-Modified`, `Link`, `Retry-After` and
   * `Location` come back. Redirects are not followed.
   *
   * @throws {KeywayError} `invalid_path`, `not_found`, `invalid_request` (a provider
   *   without `api_base_url`), `payload_too_large`, `reauthorization_required`,
   *   `rate_limited`, `upstream_error`.
   */
  async forward(principal: Principal, request: ProxyRequest): Promise<GatewayAnswer> {
    return webAnswer(await this[RELAYED](principal, request));
  }

  /**
   * {@link ApiProxy.forward} for a server adapter that pipes the API's answer itself: its
   * body may be a piped one (the Node transport's), never turned into a Web stream.
   */
  async [RELAYED](principal: Principal, request: ProxyRequest): Promise<RelayedAnswer> {
    const { segments, trailingSlash } = proxySegments(request.path);
    const found = await this.#connectionOf(principal, segments);
    // The slot first: a caller at its limit is refused before any byte of its body is held.
    const release = this.#o.slots.take(found.id, callerOf(principal));
    let held: HeldBody | undefined;
    let relayed = false;
    try {
      held = forwardedBody(request, this.#o.limits.maxBodyBytes, this.#o.slots);
      // Awaited here only when it is still to be read: a turn less for every call.
      const bytes = held.bytes instanceof Promise ? await held.bytes : held.bytes;
      const answer = await this.#forward(request, found, trailingSlash, bytes, release);
      relayed = true;
      return answer;
    } finally {
      // The body was sent (or never will be); a relayed stream keeps its slot until it ends.
      held?.release();
      if (!relayed) release();
    }
  }

  /** {@link ApiProxy.forward} once the request holds its slot and its body. */
  async #forward(
    request: ProxyRequest,
    found: { id: string; rest: string[] },
    trailingSlash: boolean,
    body: Uint8Array | null,
    release: () => void,
  ): Promise<RelayedAnswer> {
    const current = await usableFor(this.#o, found.id, false);
    const template = current.tokens.party.api_base_url;
    if (template === undefined || template === null) {
      throw new KeywayError(
        'invalid_request',
        `the provider of ${JSON.stringify(found.id)} has no api_base_url: the proxy serves classic APIs (docs/api.md ` +
          `§13)`,
      );
    }
    const { state } = await this.#o.providers.resolve(current.record.providerId);
    const base = baseOf(found.id, template, state.oauth2?.connection_values, current.tokens);
    const rest = found.rest.map(encodeURIComponent).join('/');
    const query =
      request.query === '' || request.query === '?' ? '' : `?${request.query.replace(/^\?/, '')}`;
    const url = new URL(
      `${base}${rest === '' ? '' : `/${rest}`}${trailingSlash ? '/' : ''}${query}`,
    );
    const root = new URL(base);
    const inside =
      url.origin === root.origin &&
      (url.pathname === root.pathname ||
        url.pathname.startsWith(`${root.pathname.replace(/\/$/, '')}/`));
    if (!inside) throw refused('leaves the API base');
    // Lower-case names, as `Headers` keeps them: Keyway's agent (some APIs, GitHub's, refuse
    // a request without one) unless the profile names its own, the profile's, the caller's.
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(state.oauth2?.api_headers ?? {})) {
      const key = name.toLowerCase();
      headers[key] = headers[key] === undefined ? value : `${headers[key]}, ${value}`;
    }
    headers['user-agent'] ??= 'Keyway-Proxy';
    copyHeaders(request.headers, (name) => FORWARDED.has(name) || name.startsWith('if-'), headers);
    const provider = current.record.providerId;
    const signal = request.signal ?? new AbortController().signal;
    try {
      // Piped where the transport can (Node), else a Web `Response`.
      const { stream } = this.#o;
      const send = (tokens: ConnectionTokens): Promise<UpstreamAnswer> => {
        const init = {
          method: request.method,
          headers: withHeaders(headers, { authorization: `Bearer ${tokens.access_token}` }),
          body,
          signal,
        };
        return stream.piped !== undefined
          ? stream.piped(url.href, init)
          : stream(url.href, { ...init, body: body as BodyInit | null });
      };
      // A 401 of the API refreshes once and retries once, then passes on.
      const { answer: response } = await sendWithOneRefresh(
        this.#o,
        found.id,
        current.tokens,
        send,
        (answer) => answer.status === 401,
        discardAnswer,
      );
      const count = (outcome: string) => this.#o.observe({ kind: 'gateway', provider, outcome });
      return relayAnswer(response, release, RETURNED, count, ['the API', 'the proxy']);
    } catch (error) {
      if (!(error instanceof KeywayError) || error instanceof OutboundError)
        this.#o.observe({ kind: 'gateway', provider, outcome: 'upstream_error' });
      if (error instanceof OutboundError) {
        throw new KeywayError('upstream_error', `the API: ${error.message}`, { cause: error });
      }
      throw error;
    }
  }

  /**
   * The connection a proxied path begins with: the longest prefix of its segments that is a
   * connection the caller covers (prefixes it does not cover are never looked up).
   */
  async #connectionOf(
    principal: Principal,
    segments: string[],
  ): Promise<{ id: string; rest: string[] }> {
    for (let k = Math.min(segments.length, MAX_SEGMENTS); k >= 1; k--) {
      let id: string;
      try {
        id = parseResourcePath(segments.slice(0, k).join('/'));
      } catch {
        continue;
      }
      if (principal.kind !== 'root' && !setCoversPath(principal.scopes, id)) continue;
      if ((await this.#o.records.get(id)) !== null) return { id, rest: segments.slice(k) };
    }
    throw new KeywayError(
      'not_found',
      'the proxy path begins with no connection this credential covers',
    );
  }
}
