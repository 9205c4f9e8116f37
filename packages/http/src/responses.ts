import { InsufficientScopeError, type KeywayError } from '@keyway/core';
import { type PipedBody, pipedStream, withHeaders } from '@keyway/core/outbound';

/* The answers every Keyway route and guard gives (docs/api.md §1.2, §1.3). */

/**
 * An answer before it becomes a Web `Response`: the Node adapter writes it to the socket
 * as it is (no `Response`, no body stream), every other runtime gets a `Response`.
 */
export interface Reply {
  status: number;
  headers: Record<string, string>;
  /**
   * The body: text, none, or a stream (the gateway's), written as it arrives: a Web stream,
   * or a piped body (Node's transport) that the Node adapter writes with no Web stream.
   */
  body: string | null | ReadableStream<Uint8Array> | PipedBody;
}

const JSON_HEADERS = {
  'content-type': 'application/json; charset=utf-8',
  // Nothing an authenticated API answers belongs in a shared cache; responses that carry a
  // secret must not be stored at all (docs/api.md §1.3).
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
};

export function json(
  status: number,
  body: unknown,
  headers?: Record<string, string>,
): Reply & { body: string } {
  return {
    status,
    headers: headers === undefined ? JSON_HEADERS : withHeaders(JSON_HEADERS, headers),
    body: JSON.stringify(body),
  };
}

/** A JSON answer whose body is JSON already. */
export function jsonText(status: number, body: string): Reply & { body: string } {
  return { status, headers: JSON_HEADERS, body };
}

/** Public JSON documents: cacheable for a few minutes. */
export const PUBLIC_JSON_HEADERS = {
  'content-type': 'application/json; charset=utf-8',
  'cache-control': 'public, max-age=300',
  'x-content-type-options': 'nosniff',
};

const NO_CONTENT_HEADERS = { 'cache-control': 'no-store' };

export function noContent(): Reply {
  return { status: 204, headers: NO_CONTENT_HEADERS, body: null };
}

/** The Web `Response` of a reply. */
export function toResponse(reply: Reply): Response {
  const { body } = reply;
  const web = body === null || typeof body === 'string' || body instanceof ReadableStream;
  return new Response(web ? body : pipedStream(body), {
    status: reply.status,
    headers: reply.headers,
  });
}

/**
 * The API error answer of a {@link KeywayError}, with `WWW-Authenticate` for `401`/`403`
 * (RFC 6750 §3) and `Retry-After` for `429`.
 */
export function errorReply(
  error: KeywayError,
  credentialPresented: boolean,
  /** Where the endpoint's protected-resource metadata is (RFC 9728 §5.1), for MCP clients. */
  resourceMetadata?: string,
): Reply & { body: string } {
  const headers: Record<string, string> = {};
  if (error.code === 'invalid_token') {
    const metadata =
      resourceMetadata === undefined ? '' : `, resource_metadata="${resourceMetadata}"`;
    headers['www-authenticate'] = credentialPresented
      ? `Bearer realm="keyway"${metadata}, error="invalid_token"`
      : `Bearer realm="keyway"${metadata}`;
  } else if (error.code === 'insufficient_scope') {
    // An MCP server's step-up through the gateway (docs/api.md §13) names the scope it needs.
    const scope =
      error instanceof InsufficientScopeError && error.scopes.length > 0
        ? `, scope="${error.scopes.join(' ')}"`
        : '';
    headers['www-authenticate'] = `Bearer realm="keyway", error="insufficient_scope"${scope}`;
  }
  if (error.retryAfter !== undefined) headers['retry-after'] = String(error.retryAfter);
  return json(error.status, error.toJSON(), headers);
}

/** {@link errorReply} as a Web `Response`. */
export function errorResponse(error: KeywayError, credentialPresented: boolean): Response {
  return toResponse(errorReply(error, credentialPresented));
}
