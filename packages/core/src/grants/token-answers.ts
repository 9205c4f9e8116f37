import * as oauth from 'oauth4webapi';
import type { OutboundFetch } from '../outbound/fetch.js';
import { editJsonAnswer, libraryOptions, oauthFetch } from '../outbound/oauth-fetch.js';
import type { OAuth2Quirks, ProviderState } from '../storage/states.js';
import { asTokenAnswer } from './token-endpoint.js';

/*
 * The quirks of an `oauth2` provider's token endpoint (docs/api.md §15), applied around the
 * one token flow both templates share: its requests written as the server expects them
 * (extra headers, a JSON body), its answers read into RFC 6749 §5 before oauth4webapi
 * judges them (a form-encoded body, `ok: false` with status 200, tokens nested under
 * another key, a `token_type` that is not one). An `mcp` provider has no quirks: its
 * requests and answers pass as they are.
 */

/** The extra token parameters of a provider: its profile's, then the operator's. */
export function tokenParamsOf(state: ProviderState): Record<string, string> | undefined {
  const merged = { ...state.oauth2?.token_params, ...state.configuration.token_params };
  return Object.keys(merged).length === 0 ? undefined : merged;
}

/** oauth4webapi options for a token request: through the guarded fetch, as the server expects. */
export function tokenRequestOptions(outbound: OutboundFetch, quirks: OAuth2Quirks | undefined) {
  if (
    quirks === undefined ||
    (quirks.token_request_format === 'form' &&
      Object.keys(quirks.token_request_headers).length === 0)
  ) {
    return libraryOptions(outbound);
  }
  const send = (url: string, init: RequestInit) => {
    const headers = new Headers(init.headers);
    for (const [name, value] of Object.entries(quirks.token_request_headers))
      headers.set(name, value);
    let body = init.body;
    if (quirks.token_request_format === 'json' && body instanceof URLSearchParams) {
      body = JSON.stringify(Object.fromEntries(body));
      headers.set('content-type', 'application/json');
    }
    return outbound(url, { ...init, headers, body: body ?? null });
  };
  return { ...libraryOptions(outbound), [oauth.customFetch]: oauthFetch(send) };
}

/** The value at a dot-separated path (digits index an array), or `undefined`. */
function at(body: unknown, path: string): unknown {
  let value: unknown = body;
  for (const key of path.split('.')) {
    if (Array.isArray(value)) value = /^\d+$/.test(key) ? value[Number(key)] : undefined;
    else if (typeof value === 'object' && value !== null && Object.hasOwn(value, key))
      value = (value as Record<string, unknown>)[key];
    else return undefined;
  }
  return value;
}

/** The values at `paths` of an answer that are short strings or numbers, as text. */
function valuesAt(body: unknown, paths: Record<string, string>): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const [name, path] of Object.entries(paths)) {
    const value = at(body, path);
    if (
      (typeof value === 'string' || typeof value === 'number') &&
      `${value}`.length <= MAX_METADATA
    )
      kept[name] = String(value);
  }
  return kept;
}

/** The RFC 6749 fields a profile may read from elsewhere in the answer. */
const MAPPED = ['access_token', 'refresh_token', 'expires_in', 'scope'] as const;

/** The longest value a connection keeps as metadata; a longer one is dropped. */
const MAX_METADATA = 512;

/** Where the values a profile keeps from a token answer travel to {@link metadataOf}. */
const METADATA = 'keyway_metadata';

/**
 * A token endpoint's answer in RFC 6749 §5's shape, read as the provider's profile says,
 * then as every answer is ({@link asTokenAnswer}).
 */
export async function readTokenAnswer(
  response: Response,
  quirks: OAuth2Quirks | undefined,
): Promise<Response> {
  if (quirks === undefined) return asTokenAnswer(response);
  const read = quirks.token_response;
  let answer = response;
  const type = response.headers.get('content-type') ?? '';
  if (read.format === 'form' && !/json/i.test(type)) {
    const fields = Object.fromEntries(new URLSearchParams(await response.text()));
    const headers = new Headers(response.headers);
    headers.set('content-type', 'application/json');
    headers.delete('content-length');
    answer = new Response(JSON.stringify(fields), { status: response.status, headers });
  }
  answer = await editJsonAnswer(answer, (body, status) => {
    const code = at(body, read.error);
    const failed = read.ok_field !== undefined && at(body, read.ok_field) === false;
    if (failed || (status !== 200 && read.error !== 'error')) {
      // An error as RFC 6749 §5.2 writes it, from where the profile says it is.
      const described = at(body, read.error_description);
      return {
        body: {
          error: typeof code === 'string' && code !== '' ? code : 'server_error',
          error_description:
            typeof described === 'string'
              ? described
              : `the server answered ${read.ok_field}: false`,
        },
        status: failed ? 400 : status,
      };
    }
    if (status !== 200) return { body, status };
    const out: Record<string, unknown> = { ...body };
    for (const field of MAPPED) {
      if (read[field] === field) continue;
      const value = at(body, read[field]);
      if (value === undefined) delete out[field];
      else out[field] = value;
    }
    if (read.bearer) out.token_type = 'Bearer';
    const kept = valuesAt(body, read.extra);
    if (Object.keys(kept).length > 0) out[METADATA] = kept;
    return { body: out, status };
  });
  return asTokenAnswer(answer);
}

/**
 * What a connection keeps of an authorization besides its tokens (docs/api.md §15): the
 * values its profile reads from the token answer and from the redirect back. `undefined`
 * when there are none.
 */
export function metadataOf(
  result: oauth.TokenEndpointResponse,
  redirect: URLSearchParams | null,
  quirks: OAuth2Quirks | undefined,
  previous?: Record<string, string>,
): Record<string, string> | undefined {
  if (quirks === undefined) return undefined;
  const kept: Record<string, string> = { ...previous };
  const fromAnswer = result[METADATA];
  if (typeof fromAnswer === 'object' && fromAnswer !== null && !Array.isArray(fromAnswer)) {
    for (const [name, value] of Object.entries(fromAnswer))
      if (typeof value === 'string' && value.length <= MAX_METADATA) kept[name] = value;
  }
  for (const name of quirks.redirect_params) {
    const value = redirect?.get(name);
    if (value !== null && value !== undefined && value.length <= MAX_METADATA) kept[name] = value;
  }
  return Object.keys(kept).length === 0 ? undefined : kept;
}

/**
 * What a profile's request after connect (docs/api.md §15) gives a new connection: `GET`
 * with its access token through the guarded fetch, values of the JSON answer kept. A failed
 * request gives nothing (the connection is kept without them: the proxy then asks for an
 * authorization again where its API base needs one).
 */
export async function afterConnect(
  outbound: OutboundFetch,
  quirks: OAuth2Quirks | undefined,
  accessToken: string,
  metadata: Record<string, string> | undefined,
): Promise<Record<string, string> | undefined> {
  const request = quirks?.after_connect;
  if (request === null || request === undefined) return metadata;
  let kept: Record<string, string> = {};
  try {
    const response = await outbound(request.url, {
      headers: { authorization: `Bearer ${accessToken}`, accept: 'application/json' },
    });
    if (response.ok) kept = valuesAt(await response.json(), request.metadata);
    else await response.body?.cancel();
  } catch {
    // Unreachable, refused or not JSON: the connection keeps its tokens without these values.
  }
  const all = { ...metadata, ...kept };
  return Object.keys(all).length === 0 ? undefined : all;
}
