import { OutboundError } from './network-failure.js';

/*
 * Piped answers: an upstream answer whose body a server adapter pipes to its own
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
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /**
   * The same headers as they came, name then value (Node's `rawHeaders`). Where they are
   * given, `headers` is made only when something reads it: {@link pipedHeader} reads these.
   */
  readonly rawHeaders?: readonly string[];
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

/**
 * The method of `broker.gateway` and `broker.proxy` that answers a {@link RelayedAnswer}, for
 * a server adapter that pipes a {@link PipedBody} to its socket itself (`@keyway/http/node`):
 * the same request as their `forward`, with no Web stream made of the upstream's answer.
 */
export const RELAYED: unique symbol = Symbol.for('keyway.relayed');

/** An answer of {@link RELAYED}: `forward`'s, its body possibly a {@link PipedBody}. */
export interface RelayedAnswer {
  status: number;
  /** Lower-case names. */
  headers: Record<string, string>;
  body: ReadableStream<Uint8Array> | PipedBody | string | null;
}

/**
 * A request through the guarded streaming fetch, answered piped. A `URL` is used as it is,
 * not copied: the caller hands it over and changes it no more.
 */
export type PipedFetch = (url: string | URL, init: PipedInit) => Promise<PipedAnswer>;

/**
 * The headers whose repeats Node drops, keeping the first (its `message.headers`); a
 * repeated `cookie` is joined with `; `, any other with `, `.
 */
const FIRST_ONLY = new Set([
  'age',
  'authorization',
  'content-length',
  'content-type',
  'etag',
  'expires',
  'from',
  'host',
  'if-modified-since',
  'if-unmodified-since',
  'last-modified',
  'location',
  'max-forwards',
  'proxy-authorization',
  'referer',
  'retry-after',
  'server',
  'user-agent',
]);

/**
 * One header of a piped answer (`name` in lower case), as Node's `headers` object has it
 * (repeats joined by Node's rules, `set-cookie`'s with `, `), or `null`. Read from the raw
 * headers where there are some: Node then never builds its object of them all.
 */
export function pipedHeader(answer: PipedAnswer, name: string): string | null {
  const raw = answer.rawHeaders;
  if (raw === undefined) {
    const value = answer.headers[name];
    if (value === undefined) return null;
    return Array.isArray(value) ? value.join(', ') : value;
  }
  let found: string | null = null;
  for (let i = 0; i < raw.length; i += 2) {
    const key = raw[i] as string;
    if (key.length !== name.length || key.toLowerCase() !== name) continue;
    const value = raw[i + 1] as string;
    if (found === null) {
      if (FIRST_ONLY.has(name)) return value;
      found = value;
    } else found += name === 'cookie' ? `; ${value}` : `, ${value}`;
  }
  return found;
}

/**
 * A piped body as a Web stream, for a caller that wants a `Response` (`broker.gateway.mcp`,
 * a fetch-style handler): nothing is read ahead of the reader.
 */
export function pipedStream(body: PipedBody): ReadableStream<Uint8Array> {
  let waiting: (() => void) | null = null;
  return new ReadableStream<Uint8Array>(
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
}

/** Headers as Node gives them (lower-case names, repeated ones as arrays) as Web `Headers`. */
export function nodeHeaders(raw: Readonly<Record<string, string | string[] | undefined>>): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(raw)) {
    if (value === undefined) continue;
    for (const item of Array.isArray(value) ? value : [value]) headers.append(name, item);
  }
  return headers;
}

/**
 * A piped answer as a Web `Response` (its body streamed), still an answer of the streaming
 * fetch: a relay learns when its body is over.
 */
export function pipedResponse(answer: PipedAnswer): Response {
  const body = answer.body === null ? null : pipedStream(answer.body);
  const piped = answer.body;
  if (body !== null && piped !== null) settleHooks.set(body, (hook) => piped.whenSettled(hook));
  return new Response(body, { status: answer.status, headers: nodeHeaders(answer.headers) });
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
  readonly headers: Record<string, string | string[] | undefined>;
  /** As {@link PipedAnswer.rawHeaders}. */
  readonly rawHeaders?: readonly string[];
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

/**
 * A piped body over a transport's readable: the idle limit between chunks (`idleMs`, none
 * without), the caller's abort (`signal`: the exchange closes the readable on it, and the
 * body then fails with the abort's reason), and the hooks run once it is over. Read once:
 * whatever ends it first ends it, and nothing reaches its sink after.
 */
export class SourceBody implements PipedBody {
  readonly #source: PipedSource;
  readonly #origin: string;
  readonly #idleMs: number | undefined;
  readonly #signal: AbortSignal | undefined;
  #hooks: (() => void)[] = [];
  #settled = false;
  #sink: PipedSink | null = null;
  #piped = false;
  #idle: ReturnType<typeof setTimeout> | undefined;
  /** Paused by the sink: the idle limit waits for it. */
  #paused = false;

  constructor(
    source: PipedSource,
    origin: string,
    options: { idleMs?: number; signal?: AbortSignal | undefined } = {},
  ) {
    this.#source = source;
    this.#origin = origin;
    this.#idleMs = options.idleMs;
    const signal = options.signal ?? undefined;
    this.#signal = signal;
    // An error before anyone reads is held for the sink (Node throws an unheard one).
    source.once('error', (cause) => this.#fail(cause));
    // After its end as a rule: an error made (a stack captured) only when it came first.
    source.once('close', () => {
      if (!this.#settled) this.#fail(new Error('the stream closed before its end'));
    });
    source.once('end', () => this.#finish());
  }

  pipe(sink: PipedSink): void {
    if (this.#piped) throw new Error('a piped body has one reader');
    this.#piped = true;
    this.#sink = sink;
    if (this.#settled) {
      this.#deliver();
      return;
    }
    this.#arm();
    this.#source.on('data', (chunk) => {
      this.#arm();
      if (this.#settled || sink.write(chunk)) return;
      this.#paused = true;
      this.#source.pause();
    });
  }

  /** (Re)starts the idle limit: Node's timers restart in place, no timer made per chunk. */
  #arm(): void {
    const idleMs = this.#idleMs;
    if (idleMs === undefined) return;
    const timer = this.#idle as { refresh?: () => void } | undefined;
    if (timer?.refresh !== undefined) {
      timer.refresh();
      return;
    }
    clearTimeout(this.#idle);
    this.#idle = setTimeout(() => {
      // A reader slower than the upstream is not an idle upstream: armed again on resume.
      if (this.#paused) return;
      const error = new OutboundError('timeout', `${this.#origin}: no data for ${idleMs} ms`);
      this.#fail(error);
      this.#source.destroy(error);
    }, idleMs);
  }

  resume(): void {
    if (this.#settled || !this.#paused) return;
    this.#paused = false;
    this.#arm();
    this.#source.resume();
  }

  cancel(reason?: unknown): void {
    this.#sink = null;
    this.#fail(reason);
    this.#source.destroy();
  }

  whenSettled(hook: () => void): void {
    if (this.#settled) hook();
    else this.#hooks.push(hook);
  }

  /** What ended the body: `undefined` for a clean end, else the error. */
  #outcome: { error: unknown } | undefined;

  #finish(): void {
    this.#settle(undefined);
  }

  #fail(cause: unknown): void {
    if (this.#settled) return;
    const signal = this.#signal;
    const error = signal?.aborted
      ? signal.reason
      : cause instanceof OutboundError
        ? cause
        : new OutboundError('network', `${this.#origin}: the stream failed`, { cause });
    this.#settle({ error });
  }

  #settle(outcome: { error: unknown } | undefined): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#outcome = outcome;
    clearTimeout(this.#idle);
    this.#deliver();
    for (const hook of this.#hooks.splice(0)) hook();
  }

  /** Tells the sink how the body ended, once. */
  #deliver(): void {
    const sink = this.#sink;
    if (sink === null || !this.#settled) return;
    this.#sink = null;
    if (this.#outcome === undefined) sink.end();
    else sink.error(this.#outcome.error);
  }
}
