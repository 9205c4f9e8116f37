/*
 * Piped answers (#27 item 5): an upstream answer whose body a server adapter pipes to its own
 * socket, with no Web `Response`, `Headers` or `ReadableStream` between. The Node transport
 * offers it; the gateway and the API proxy use it when their transport does, and the Web
 * path (a `Response`) everywhere else.
 */

/** Where a {@link PipedBody} flows to. */
export interface PipedSink {
  /** A chunk; answer `false` to pause the body until {@link PipedBody.resume}. */
  write(chunk: Uint8Array): boolean;
  /** The body ended cleanly. */
  end(): void;
  /** The body failed (network, the idle limit, the caller's abort): the answer is cut short. */
  error(error: unknown): void;
}

/** A streamed answer body, pushed to one sink with backpressure. */
export interface PipedBody {
  /** Starts the flow into `sink`. Once: a body has one reader. */
  pipe(sink: PipedSink): void;
  /** Resumes a body paused by its sink's `write` answering `false`. */
  resume(): void;
  /** Stops the body and closes the upstream request; the sink hears nothing more. */
  cancel(reason?: unknown): void;
  /** Runs `hook` once when the body is over (ended, failed, cancelled); at once if it is. */
  whenSettled(hook: () => void): void;
}

/** An upstream answer with a piped body. */
export interface PipedAnswer {
  status: number;
  /** The answer's headers as Node gives them: lower-case names. */
  headers: Readonly<Record<string, string | string[] | undefined>>;
  /** `null` for an answer without a body (`204`, `304`, `HEAD`). */
  body: PipedBody | null;
}

/** A request whose answer is piped: the method, its headers (lower-case names) and body. */
export interface PipedInit {
  method: string;
  headers: Record<string, string>;
  body: Uint8Array | null;
  /** Aborted when the caller goes away: the upstream request is closed then. */
  signal?: AbortSignal;
}

/** A request through the guarded streaming fetch, answered piped. */
export type PipedFetch = (url: string, init: PipedInit) => Promise<PipedAnswer>;

/** One header of a piped answer, as `Headers.get` would give it (values joined), or `null`. */
export function pipedHeader(answer: PipedAnswer, name: string): string | null {
  const value = answer.headers[name];
  if (value === undefined) return null;
  return Array.isArray(value) ? value.join(', ') : value;
}

/**
 * A piped body as a Web stream, for a caller that wants a `Response` (`broker.gateway.mcp`,
 * a fetch-style handler): nothing is read ahead of the reader.
 */
export function pipedStream(body: PipedBody): ReadableStream<Uint8Array> {
  let waiting: (() => void) | null = null;
  const stream = new ReadableStream<Uint8Array>(
    {
      start(controller) {
        body.pipe({
          write(chunk) {
            // A plain view: a Node `Buffer` is one, but not every reader expects a subclass.
            controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
            return (controller.desiredSize ?? 0) > 0;
          },
          end: () => controller.close(),
          error: (error) => controller.error(error),
        });
        waiting = () => body.resume();
      },
      pull() {
        waiting?.();
      },
      cancel(reason) {
        body.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
  // Still an answer of the streaming fetch: a relay learns when it is over.
  settleHooks.set(stream, (hook) => body.whenSettled(hook));
  return stream;
}

/** A piped answer as a Web `Response` (its body streamed). */
export function pipedResponse(answer: PipedAnswer): Response {
  const headers = new Headers();
  for (const [name, value] of Object.entries(answer.headers)) {
    if (value === undefined) continue;
    for (const item of Array.isArray(value) ? value : [value]) headers.append(name, item);
  }
  return new Response(answer.body === null ? null : pipedStream(answer.body), {
    status: answer.status,
    headers,
  });
}

/** A Node readable as the transport hands it on (Node's `IncomingMessage`). */
export interface PipedSource {
  on(event: 'data', listener: (chunk: Uint8Array) => void): unknown;
  once(event: 'end' | 'close', listener: () => void): unknown;
  once(event: 'error', listener: (error: Error) => void): unknown;
  pause(): unknown;
  resume(): unknown;
  destroy(error?: Error): unknown;
}

/** An answer's head, and its body as the transport's readable (`null`: no body). */
export interface ExchangeAnswer {
  status: number;
  statusText: string;
  headers: Record<string, string | string[] | undefined>;
  source: PipedSource | null;
}

/** One request of an {@link Exchange}: its answer, and how to abort it. */
export interface ExchangeCall {
  answer: Promise<ExchangeAnswer>;
  /** Closes the request (and its answer's body) with `reason`. */
  abort(reason: Error): void;
}

/** The request under a transport that can answer without Web objects (Node's). */
export type Exchange = (url: URL, init: PipedInit) => ExchangeCall;

/** Where a transport keeps its {@link Exchange}: a `fetch`-style function has none. */
export const EXCHANGE: unique symbol = Symbol('keyway.exchange');

/** The exchange under a transport, when it has one. */
export function exchangeOf(transport: object): Exchange | undefined {
  return (transport as { [EXCHANGE]?: Exchange })[EXCHANGE];
}

/** How to be told when a body of the streaming fetch is over, by body. */
export const settleHooks = new WeakMap<ReadableStream<Uint8Array>, (hook: () => void) => void>();

/**
 * Runs `hook` once when `body`, the body of an answer of the streaming fetch, is
 * over: read to its end, failed (idle limit, network, the caller's abort) or cancelled; at
 * once if it is over already. Lets a relay hand the same body on, with no stream of its own
 * between, and still learn when it ends.
 *
 * @returns `false` (and runs nothing) for a body that did not come from a streaming fetch.
 */
export function whenBodySettled(body: ReadableStream<Uint8Array>, hook: () => void): boolean {
  const register = settleHooks.get(body);
  if (register === undefined) return false;
  register(hook);
  return true;
}
