import { KeywayError } from '@keyway/core';
import { type QueryParameterKind, type QueryShape, queryParameters } from '@keyway/core/contract';
import { readBounded } from '@keyway/core/outbound';

/** Default request body limit: 1 MiB (docs/api.md §1.2). */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;

/**
 * The raw request target of requests that came through {@link toNodeHandler}, before the
 * WHATWG URL parser resolved `..`, turned `\` into `/` and dropped tabs. Kept on the side so
 * the handler can refuse such paths (docs/api.md §2) instead of quietly reading another one.
 */
const rawTargets = new WeakMap<Request, string>();

/** Remembers the raw request target of a request built by an adapter. */
export function setRawTarget(request: Request, target: string): void {
  rawTargets.set(request, target);
}

/**
 * The client address of a request, from what the adapter or runtime passed beside it:
 * `{ clientAddress }` (`toNodeHandler`), Deno's `info.remoteAddr`, Bun's
 * `server.requestIP()`; else `null`.
 */
export function clientAddressOf(request: Request, context: unknown): string | null {
  if (typeof context !== 'object' || context === null) return null;
  const given = context as {
    clientAddress?: unknown;
    remoteAddr?: { hostname?: unknown };
    requestIP?: unknown;
  };
  if (typeof given.clientAddress === 'string') return given.clientAddress;
  if (typeof given.remoteAddr?.hostname === 'string') return given.remoteAddr.hostname;
  if (typeof given.requestIP === 'function') {
    const ip = (given.requestIP as (r: Request) => { address?: unknown } | null).call(
      context,
      request,
    );
    if (typeof ip?.address === 'string') return ip.address;
  }
  return null;
}

/** The still-encoded path of a request: the raw target when an adapter kept it. */
export function rawPathOf(request: Request): string {
  const raw = rawTargets.get(request);
  if (raw !== undefined) {
    const end = raw.search(/[?#]/);
    return end === -1 ? raw : raw.slice(0, end);
  }
  return new URL(request.url).pathname;
}

/**
 * The credential of an `Authorization: Bearer <token>` header's value (scheme
 * case-insensitive, RFC 6750 §2.1), `null` when there is no header, or `undefined` when a
 * header is present but is not a well-formed bearer credential.
 */
export function bearerOf(header: string | null | undefined): string | null | undefined {
  if (header === null || header === undefined) return null;
  // Lenient on the credential's alphabet (any visible ASCII), so every valid root key can
  // be sent; the credential itself is checked by core.
  const match = /^bearer +([\x21-\x7e]+) *$/i.exec(header);
  return match ? (match[1] as string) : undefined;
}

function isJsonMediaType(contentType: string | null): boolean {
  if (contentType === null) return false;
  const mediaType = contentType.split(';', 1)[0]?.trim().toLowerCase();
  return mediaType === 'application/json';
}

/** The `413` of a body over `limit` bytes. */
export const tooLarge = (limit: number) =>
  new KeywayError('payload_too_large', `the request body is larger than ${limit} bytes`);

/** The `400` of a body that ended before it was whole. */
export const brokenBody = (cause: unknown) =>
  new KeywayError('invalid_request', 'the request body ended before it was complete', { cause });

/**
 * A Web request's whole body, at most `limit` bytes: `413` beyond (a declared length is
 * refused before reading), `400` when it ends early (the client went away, or its
 * connection broke, while sending: its request, not a fault of the server).
 */
export function webBodyBytes(request: Request, limit: number): Promise<Uint8Array> {
  return readBounded(request, limit, { tooLarge: () => tooLarge(limit), broken: brokenBody });
}

/** What a request body is read from: its headers, and its bytes (as {@link webBodyBytes}). */
export interface BodySource {
  header(name: string): string | null;
  bytes(limit: number): Promise<Uint8Array>;
}

/**
 * Reads a JSON request body: at most `limit` bytes (413, checked before anything else,
 * without buffering more than the limit), `application/json` (415), UTF-8 JSON (400).
 */
export async function readJsonBody(source: BodySource, limit: number): Promise<unknown> {
  const bytes = await source.bytes(limit);
  if (!isJsonMediaType(source.header('content-type'))) {
    throw new KeywayError(
      'unsupported_media_type',
      'the request body must be JSON, sent with "Content-Type: application/json"',
    );
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch (cause) {
    throw new KeywayError('invalid_request', 'the request body is not valid UTF-8', { cause });
  }
  try {
    return JSON.parse(text);
  } catch (cause) {
    throw new KeywayError('invalid_request', 'the request body is not valid JSON', { cause });
  }
}

/**
 * Reads a form body (`application/x-www-form-urlencoded`: the OAuth endpoints' requests and
 * the sign-in pages' forms): at most `limit` bytes (413), that media type (415), UTF-8.
 */
export async function readFormBody(source: BodySource, limit: number): Promise<URLSearchParams> {
  const bytes = await source.bytes(limit);
  const mediaType = source.header('content-type')?.split(';', 1)[0]?.trim().toLowerCase();
  if (mediaType !== 'application/x-www-form-urlencoded') {
    throw new KeywayError(
      'unsupported_media_type',
      'the request body must be a form, sent with "Content-Type: application/x-www-form-urlencoded"',
    );
  }
  try {
    return new URLSearchParams(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch (cause) {
    throw new KeywayError('invalid_request', 'the request body is not valid UTF-8', { cause });
  }
}

/**
 * A query string value as the type its schema expects: digits as a number, `true` and
 * `false` as booleans. Anything else stays a string, for core's schema to refuse with its
 * own message (docs/api.md §1.2).
 */
function typed(value: string, type: QueryParameterKind): unknown {
  if (type === 'integer') return /^[0-9]{1,15}$/.test(value) ? Number(value) : value;
  if (type === 'boolean') return value === 'true' ? true : value === 'false' ? false : value;
  return value;
}

/**
 * The query parameters of a request, typed for a query shape of `@keyway/core`
 * (`ConnectionListQuery`, …): only the shape's parameters are allowed, each at most once;
 * core then checks the values.
 */
export function readQuery(params: URLSearchParams, shape: QueryShape): Record<string, unknown> {
  const kinds = queryParameters(shape);
  const query: Record<string, unknown> = {};
  for (const [key, value] of params) {
    const kind = Object.hasOwn(kinds, key) ? kinds[key] : undefined;
    if (kind === undefined) {
      const message = `unknown query parameter ${JSON.stringify(key.slice(0, 64))}`;
      throw new KeywayError('invalid_request', message, { details: [{ path: key, message }] });
    }
    if (Object.hasOwn(query, key)) {
      const message = `query parameter "${key}" is given more than once`;
      throw new KeywayError('invalid_request', message, { details: [{ path: key, message }] });
    }
    query[key] = typed(value, kind);
  }
  return query;
}
