import type { IncomingMessage, ServerResponse } from 'node:http';
import { KeywayError } from '@keyway/core';
import { dispatchOf, type KeywayHandler } from '../handler.js';
import type { Forwarded, Incoming } from '../incoming.js';
import {
  brokenBody,
  DEFAULT_MAX_BODY_BYTES,
  setRawTarget,
  tooLarge,
  webBodyBytes,
} from '../request.js';
import { errorReply } from '../responses.js';
import { askForBody, awaitingContinue } from './continue.js';
import { streamOf } from './streams.js';
import { sendReply, writeReply, writeWebResponse } from './write.js';

/** A Node `http` / Express request, with what Express adds when it is there. */
type NodeRequest = IncomingMessage & { originalUrl?: string; body?: unknown };

/** Options of {@link toNodeHandler}. */
export interface NodeHandlerOptions {
  /**
   * Read the scheme and host from `X-Forwarded-Proto` / `X-Forwarded-Host`, and the client
   * address from the last `X-Forwarded-For` entry (the one your proxy appended): only
   * behind a proxy you run, which sets them. Default `false`: the socket's peer.
   */
  trustProxy?: boolean;
  /**
   * Called with what a handler threw or rejected with when there is no Express `next` to
   * pass it to; the client gets `500 internal_error` (or, once the answer has begun, a
   * closed connection). Default: `console.error`.
   */
  onInternalError?: (error: unknown) => void;
}

/** An answer written: nothing more to do. */
const written = () => {};

/** What a client sees of a failure inside the handler: the body of createHandler's own. */
const INTERNAL_ERROR_BODY = JSON.stringify({
  error: 'internal_error',
  error_description: 'the server failed to handle the request',
});

/**
 * One entry of a comma-separated forwarding header: the first (`X-Forwarded-Proto`,
 * `-Host`), or the last, which for `X-Forwarded-For` is the peer your proxy saw (earlier
 * entries are the client's word).
 */
function forwarded(
  value: string | string[] | undefined,
  which: 'first' | 'last' = 'first',
): string | undefined {
  const entries = (Array.isArray(value) ? value.join(',') : value)?.split(',');
  return (which === 'first' ? entries?.[0] : entries?.at(-1))?.trim() || undefined;
}

/** The client address: the socket's peer, or behind a trusted proxy what it appended. */
function clientAddressOf(req: NodeRequest, options: NodeHandlerOptions): string | undefined {
  return (
    (options.trustProxy ? forwarded(req.headers['x-forwarded-for'], 'last') : undefined) ??
    req.socket.remoteAddress
  );
}

/** The body an Express body parser already consumed, serialized again; else the stream. */
function bodyOf(req: NodeRequest): BodyInit | null {
  const method = req.method ?? 'GET';
  if (method === 'GET' || method === 'HEAD') return null;
  if (req.readableEnded && req.body !== undefined) {
    if (typeof req.body === 'string' || req.body instanceof Uint8Array) return req.body as BodyInit;
    return JSON.stringify(req.body);
  }
  return streamOf(req);
}

/** The request target as the client sent it (Express: before its mount path was cut). */
function targetOf(req: NodeRequest): string {
  return req.originalUrl ?? req.url ?? '/';
}

/** The URL of a Node request. Throws on a target or `Host` no URL can be made of. */
function urlOf(req: NodeRequest, options: NodeHandlerOptions): URL {
  const target = targetOf(req);
  const encrypted = (req.socket as { encrypted?: boolean }).encrypted === true;
  const proto =
    (options.trustProxy ? forwarded(req.headers['x-forwarded-proto']) : undefined) ??
    (encrypted ? 'https' : 'http');
  const host =
    (options.trustProxy ? forwarded(req.headers['x-forwarded-host']) : undefined) ??
    req.headers.host ??
    'localhost';
  // An absolute-form or otherwise odd target still yields a URL on our origin.
  return new URL(target.startsWith('/') ? target : `/${target}`, `${proto}://${host}`);
}

function webRequestOf(req: NodeRequest, url: URL, signal?: AbortSignal): Request {
  const headers = new Headers();
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    headers.append(req.rawHeaders[i] as string, req.rawHeaders[i + 1] as string);
  }
  const body = bodyOf(req);
  const request = new Request(url, {
    method: req.method ?? 'GET',
    headers,
    body,
    ...(body === null ? {} : { duplex: 'half' }),
    ...(signal === undefined ? {} : { signal }),
  } as RequestInit);
  setRawTarget(request, targetOf(req));
  return request;
}

/** Builds a Web `Request` from a Node request, keeping its raw target on the side. */
export function toWebRequest(req: NodeRequest, options: NodeHandlerOptions = {}): Request {
  return webRequestOf(req, urlOf(req, options));
}

/**
 * A Node request as the handler reads it: method, raw path and `Authorization` straight
 * from Node, so a read never builds a Web `Request` (nor its headers and body stream);
 * one is made only when a body or a hook asks for it.
 */
class NodeIncoming implements Incoming {
  readonly method: string;
  readonly path: string;
  /** The Web request, once something asked for it. */
  made: Request | undefined;
  readonly #req: NodeRequest;
  readonly #res: ServerResponse;
  readonly #options: NodeHandlerOptions;
  #url: URL | undefined;

  constructor(req: NodeRequest, res: ServerResponse, options: NodeHandlerOptions) {
    this.#req = req;
    this.#res = res;
    this.#options = options;
    this.method = req.method ?? 'GET';
    const target = targetOf(req);
    const end = target.search(/[?#]/);
    this.path = end === -1 ? target : target.slice(0, end);
  }

  authorization(): string | null {
    // Every Authorization header, joined as `Headers.get` joins them (Node's `headers`
    // keeps only the first): two credentials are refused, never one of them picked.
    const raw = this.#req.rawHeaders;
    let value: string | null = null;
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i] as string;
      if (name.length === 13 && name.toLowerCase() === 'authorization') {
        value = value === null ? (raw[i + 1] as string) : `${value}, ${raw[i + 1]}`;
      }
    }
    return value;
  }

  header(name: string): string | null {
    const value = this.#req.headers[name.toLowerCase()];
    return value === undefined ? null : Array.isArray(value) ? value.join(', ') : value;
  }

  /** The URL, made when first needed (a query, a body): a read by path needs none. */
  #urlOf(): URL {
    if (this.#url === undefined) {
      try {
        this.#url = urlOf(this.#req, this.#options);
      } catch (cause) {
        throw new KeywayError('invalid_request', 'malformed request target', { cause });
      }
    }
    return this.#url;
  }

  searchParams(): URLSearchParams {
    return this.#urlOf().searchParams;
  }

  search(): string {
    return this.#urlOf().search;
  }

  bytes(limit: number): Promise<Uint8Array> {
    // A body Express's parser consumed already, or one a Web request holds: read as before.
    if (this.made !== undefined || this.#req.readableEnded) {
      return webBodyBytes(this.request(), limit);
    }
    return readNodeBody(this.#req, limit, () => {});
  }

  request(): Request {
    // Aborted when the client goes away before its answer is written (the gateway then
    // closes its upstream request): a Web request's own, as `Request` keeps its listener.
    this.made ??= webRequestOf(
      this.#req,
      this.#urlOf(),
      abortedOnClose(this.#res, () => this.#res.writableFinished),
    );
    return this.made;
  }

  clientAddress(): string | null {
    return clientAddressOf(this.#req, this.#options) ?? null;
  }

  forwarded(): Forwarded {
    const { method } = this;
    const req = this.#req;
    const body =
      method === 'GET' || method === 'HEAD'
        ? null
        : {
            read: (limit: number, hold: (bytes: number) => void) => readNodeBody(req, limit, hold),
          };
    return { method, headers: req.headers, body, signal: connectionGone(req.socket) };
  }
}

/** What closes when the client goes away: its connection, or the answer to it. */
interface Closing {
  readonly destroyed?: boolean;
  once(event: 'close', listener: () => void): unknown;
}

/**
 * A signal aborted, as the client going away, when `target` closes (at once when it has
 * already), unless `finished` says the answer was written by then.
 */
function abortedOnClose(target: Closing, finished: () => boolean = () => false): AbortSignal {
  const gone = new AbortController();
  const away = () => {
    if (!finished()) gone.abort(new DOMException('the client went away', 'AbortError'));
  };
  if (target.destroyed === true) away();
  else target.once('close', away);
  return gone.signal;
}

const goneSignals = new WeakMap<Closing, AbortSignal>();

/**
 * Aborted when the client's connection closes: the signal of every forwarded request on it.
 * One per connection, not per request (an `AbortSignal` costs a few microseconds to make on
 * Node 20): the connection closing is the client going away for every request still open on
 * it, and a request whose answer was written has nothing left to abort. Those who listen
 * remove their listener when their request is over (the outbound exchange, the streaming
 * fetch), so none piles up on a kept-alive connection; a connection closed already (while
 * its request's body was read) gives a signal aborted at once.
 */
export function connectionGone(socket: Closing): AbortSignal {
  let signal = goneSignals.get(socket);
  if (signal === undefined) {
    signal = abortedOnClose(socket);
    goneSignals.set(socket, signal);
  }
  return signal;
}

/**
 * A Node request body read whole, at most `limit` bytes, `hold` told of each chunk before it
 * is kept: a larger declared length is refused before reading, and reading stops at the first
 * byte past the limit or when `hold` throws (the rest is discarded by the adapter after the
 * answer). Exported for its tests.
 */
export function readNodeBody(
  req: NodeRequest,
  limit: number,
  hold: (bytes: number) => void,
): Promise<Uint8Array> {
  if (Number(req.headers['content-length'] ?? 0) > limit) return Promise.reject(tooLarge(limit));
  askForBody(req);
  return new Promise((resolve, reject) => {
    // A client that left before its body was read (while its token was checked): its
    // `aborted` and `close` came before these listeners, and nothing else will.
    if (req.destroyed && !req.readableEnded) {
      reject(brokenBody(new Error('the client left before its body was read')));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.byteLength;
      if (size > limit) {
        cleanup();
        reject(tooLarge(limit));
        return;
      }
      try {
        hold(chunk.byteLength);
      } catch (error) {
        cleanup();
        reject(error);
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      const whole = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
      resolve(new Uint8Array(whole.buffer, whole.byteOffset, whole.byteLength));
    };
    const onError = (cause: Error) => {
      cleanup();
      reject(brokenBody(cause));
    };
    // Closed before its end, with no error told (Node tells none once the body was whole).
    const onClose = () => onError(new Error('the request closed before its end'));
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('aborted', onError);
      req.off('close', onClose);
    };
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('error', onError);
    req.once('aborted', onError);
    req.once('close', onClose);
  });
}

/** How long a connection closed after an early answer still reads its client's body. */
const LINGER_MS = 5_000;
/** How much of that body it reads and discards at most. */
const LINGER_BYTES = 64 * 1024 * 1024;

/**
 * Closes a connection the way RFC 9112 §9.6 asks after an answer given before the client sent
 * its whole body: the answer, then the server's half of the connection, while the rest of the
 * body is read and discarded; the socket closes once the body has ended, after
 * {@link LINGER_MS}, or past {@link LINGER_BYTES}. A socket closed at once resets the
 * connection under a client still writing its body, which then fails (EPIPE, ECONNRESET)
 * without reading the answer.
 */
function lingerBeforeClose(req: NodeRequest): void {
  const socket = req.socket;
  let answered = false;
  let ended = false;
  let discarded = 0;
  const close = () => {
    clearTimeout(timer);
    req.off('data', count);
    socket.destroy();
  };
  const count = (chunk: Buffer) => {
    discarded += chunk.byteLength;
    if (discarded > LINGER_BYTES) close();
  };
  // Once the body has ended and the answer and the end of the server's half are written.
  const closeWhenWritten = () => {
    if (socket.writableFinished) close();
    else socket.once('finish', close);
  };
  const timer = setTimeout(close, LINGER_MS);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
  req.on('data', count);
  req.once('end', () => {
    ended = true;
    if (answered) closeWhenWritten();
  });
  // Node's server calls it once the answer marked `Connection: close` is written: it ends
  // the socket and destroys it as soon as that end is written, with the body still coming.
  socket.destroySoon = () => {
    answered = true;
    socket.end();
    if (ended) closeWhenWritten();
  };
}

/**
 * After an answer given before the request body was read (401, 404, 405, 413): the rest of
 * the body is read and discarded, so the next request on a keep-alive connection can be
 * parsed. A body that may be larger than the limit (declared so, or of unknown length), or
 * one its client has not sent yet (it waits for `100 Continue`), gets `Connection: close`
 * instead, and the connection closes once the client has sent it (within bounds:
 * {@link lingerBeforeClose}).
 */
function finishUnreadBody(
  req: NodeRequest,
  res: ServerResponse,
  request: Request | undefined,
): void {
  const declared = Number(req.headers['content-length'] ?? Number.NaN);
  // A client still waiting for `100 Continue` has not sent its body, and may never send it:
  // the connection cannot be read on as if it came.
  const unasked = awaitingContinue.delete(req);
  if (unasked || !(declared <= DEFAULT_MAX_BODY_BYTES)) {
    res.setHeader('connection', 'close');
    lingerBeforeClose(req);
  }
  if (request !== undefined && request.body !== null && !request.body.locked) {
    request.body.cancel().catch(() => {});
  } else {
    req.resume();
  }
}

/**
 * Adapts a Keyway handler to Node's `http` server and Express. In Express, mount it before
 * any body parser, at the same path as the handler's `basePath` (`originalUrl` is read).
 *
 * @example
 * import { createServer } from 'node:http';
 * createServer(toNodeHandler(createHandler(broker))).listen(8787);
 *
 * // Express
 * app.use('/keyway', toNodeHandler(createHandler(broker, { basePath: '/keyway' })));
 */
export function toNodeHandler(
  handler: KeywayHandler,
  options: NodeHandlerOptions = {},
): (req: IncomingMessage, res: ServerResponse, next?: (error?: unknown) => void) => void {
  const dispatch = dispatchOf(handler);
  const onInternalError =
    options.onInternalError ?? ((error: unknown) => console.error('keyway: internal error', error));
  const fail =
    (res: ServerResponse, next: ((error?: unknown) => void) | undefined) => (error: unknown) => {
      if (next) return next(error);
      onInternalError(error);
      if (res.headersSent) return res.destroy();
      // Never the error itself: its message may name files, hosts or secrets.
      res.writeHead(500, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      res.end(INTERNAL_ERROR_BODY);
    };
  return (req, res, next) => {
    if (dispatch !== undefined) {
      // A handler of createHandler: its answers go to the socket without Web objects.
      const incoming = new NodeIncoming(req, res, options);
      const failed = fail(res, next);
      // One promise for the answer; it is written without another (sendReply).
      dispatch(incoming).then((reply) => {
        try {
          if (!req.complete) finishUnreadBody(req, res, incoming.made);
          sendReply(res, reply, written, failed);
        } catch (error) {
          failed(error);
        }
      }, failed);
      return;
    }
    // Any other fetch-style handler (a wrapper of ours, or someone else's).
    let request: Request;
    try {
      request = toWebRequest(req, options);
    } catch {
      void writeReply(
        res,
        errorReply(new KeywayError('invalid_request', 'malformed request target'), false),
      );
      return;
    }
    handler(request, { clientAddress: clientAddressOf(req, options) })
      .then((response) => {
        if (!req.complete) finishUnreadBody(req, res, request);
        return writeWebResponse(res, response);
      })
      .catch(fail(res, next));
  };
}
