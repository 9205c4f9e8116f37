import { z } from 'zod';
import { KeywayError } from '../contract/errors.js';
import { type PipedAnswer, type PipedBody, pipedHeader } from '../outbound/piped.js';
import { whenBodySettled } from '../outbound/stream.js';
import { readBounded } from '../platform/bytes.js';
import type { Observer } from '../telemetry/observation.js';

/*
 * The gateway's limits (docs/api.md §13): the request body it buffers, how long an upstream
 * answer may go silent, and how many upstream requests may be open at once per connection
 * and per caller.
 */

const GATEWAY_LIMITS =
  '"gateway" must be { maxBodyBytes?, idleTimeoutMs?, maxStreamsPerConnection?, maxStreamsPerCaller? } with integers in range';

/** `createBroker({ gateway })`: checked with the other options. */
export const GatewayLimitsSchema = z.strictObject(
  {
    /** Largest request body forwarded, in bytes (1 KiB to 64 MiB). Default 4 MiB. */
    maxBodyBytes: z
      .number()
      .int()
      .min(1024)
      .max(64 * 1024 * 1024)
      .optional(),
    /**
     * How long the upstream may stay silent, in ms: before its answer's head, and between
     * two chunks of a stream (1 s to 1 h). Default 300000 (5 min).
     */
    idleTimeoutMs: z.number().int().min(1000).max(3_600_000).optional(),
    /** Upstream requests open at once for one connection (1 to 100000). Default 64. */
    maxStreamsPerConnection: z.number().int().min(1).max(100_000).optional(),
    /** Upstream requests open at once for one caller (1 to 100000). Default 256. */
    maxStreamsPerCaller: z.number().int().min(1).max(100_000).optional(),
  },
  { error: GATEWAY_LIMITS },
);

/** The gateway's limits with their defaults. */
export type GatewayLimits = Required<z.output<typeof GatewayLimitsSchema>>;

export function gatewayLimits(input: z.output<typeof GatewayLimitsSchema> = {}): GatewayLimits {
  return {
    maxBodyBytes: input.maxBodyBytes ?? 4 * 1024 * 1024,
    idleTimeoutMs: input.idleTimeoutMs ?? 300_000,
    maxStreamsPerConnection: input.maxStreamsPerConnection ?? 64,
    maxStreamsPerCaller: input.maxStreamsPerCaller ?? 256,
  };
}

/**
 * Open upstream requests counted per connection and per caller, in this process (each
 * instance enforces its own share). `take` takes a slot in both or throws `rate_limited`;
 * the release it answers gives both back, once.
 */
export class StreamSlots {
  readonly #byConnection = new Map<string, number>();
  readonly #byCaller = new Map<string, number>();
  #open = 0;

  constructor(
    readonly limits: GatewayLimits,
    readonly observe: Observer,
  ) {}

  /** Open upstream requests in this process. */
  get open(): number {
    return this.#open;
  }

  take(connectionId: string, caller: string): () => void {
    const { maxStreamsPerConnection, maxStreamsPerCaller } = this.limits;
    const forConnection = this.#byConnection.get(connectionId) ?? 0;
    const forCaller = this.#byCaller.get(caller) ?? 0;
    if (forConnection >= maxStreamsPerConnection || forCaller >= maxStreamsPerCaller) {
      const which =
        forConnection >= maxStreamsPerConnection
          ? `connection ${JSON.stringify(connectionId)} has ${forConnection} upstream requests open (the limit)`
          : `this caller has ${forCaller} upstream requests open (the limit)`;
      throw new KeywayError('rate_limited', `${which}: close one and retry`, { retryAfter: 1 });
    }
    this.#byConnection.set(connectionId, forConnection + 1);
    this.#byCaller.set(caller, forCaller + 1);
    this.observe({ kind: 'gateway_streams', open: ++this.#open });
    let released = false;
    return () => {
      if (released) return;
      released = true;
      StreamSlots.#less(this.#byConnection, connectionId);
      StreamSlots.#less(this.#byCaller, caller);
      this.observe({ kind: 'gateway_streams', open: --this.#open });
    };
  }

  static #less(counts: Map<string, number>, key: string): void {
    const left = (counts.get(key) ?? 1) - 1;
    if (left <= 0) counts.delete(key);
    else counts.set(key, left);
  }
}

/**
 * Copies the headers of a forwarded request whose lower-case name `keep` takes into `into`,
 * several values of one name joined with `, ` as `Headers` joins them: from Web `Headers`, or
 * from Node's record (lower-case names already), with no array made per header.
 */
export function copyHeaders(
  headers: Headers | Readonly<Record<string, string | string[] | undefined>>,
  keep: (name: string) => boolean,
  into: Record<string, string>,
): void {
  if (headers instanceof Headers) {
    headers.forEach((value, name) => {
      if (keep(name)) into[name] = value;
    });
    return;
  }
  for (const name of Object.keys(headers)) {
    const value = headers[name];
    if (value === undefined) continue;
    const key = name.toLowerCase();
    if (keep(key)) into[key] = Array.isArray(value) ? value.join(', ') : value;
  }
}

/**
 * The body of a forwarded request (the gateway's, the proxy's), read whole and at most
 * `limit` bytes; `null` for `GET` and `HEAD`.
 *
 * @throws {KeywayError} `payload_too_large`, or `invalid_request` for a body cut short.
 */
export async function forwardedBody(
  request: {
    method: string;
    headers: Headers | Readonly<Record<string, string | string[] | undefined>>;
    body: Uint8Array | ReadableStream<Uint8Array> | null;
  },
  limit: number,
): Promise<Uint8Array | null> {
  if (request.method === 'GET' || request.method === 'HEAD') return null;
  const tooLarge = () =>
    new KeywayError('payload_too_large', `the request body is larger than ${limit} bytes`);
  const given = request.body;
  if (given instanceof Uint8Array) {
    if (given.byteLength > limit) throw tooLarge();
    return given;
  }
  const headers = request.headers instanceof Headers ? request.headers : new Headers();
  return readBounded({ headers, body: given }, limit, {
    tooLarge,
    broken: (cause) =>
      new KeywayError('invalid_request', 'the request body ended before it was complete', {
        cause,
      }),
  });
}

/** An upstream's answer: a Web `Response`, or a piped one (Node's transport). */
export type UpstreamAnswer = Response | PipedAnswer;

/** What {@link relay} answers: the caller's status, headers and body. */
export interface Relayed {
  status: number;
  headers: Record<string, string>;
  body: ReadableStream<Uint8Array> | PipedBody | null;
}

/** One header of an upstream answer, or `null`. */
export function upstreamHeader(answer: UpstreamAnswer, name: string): string | null {
  return answer instanceof Response ? answer.headers.get(name) : pipedHeader(answer, name);
}

/** Drops an upstream answer's body unread (its request is closed). */
export async function discardAnswer(answer: UpstreamAnswer): Promise<void> {
  if (answer instanceof Response) await answer.body?.cancel().catch(() => {});
  else answer.body?.cancel();
}

/**
 * An upstream answer as the caller gets it (the gateway's, the proxy's): the `returned`
 * headers only, with `Cache-Control: no-store` (and `X-Accel-Buffering: no` for an event
 * stream, so proxies in front do not hold events back); its body streamed on, the slot
 * `release`d when it is over.
 */
export function relay(
  answer: UpstreamAnswer,
  release: () => void,
  returned: readonly string[],
): Relayed {
  const headers: Record<string, string> = { 'cache-control': 'no-store' };
  for (const name of returned) {
    const value = upstreamHeader(answer, name);
    if (value !== null) headers[name] = value;
  }
  if (headers['content-type']?.startsWith('text/event-stream')) headers['x-accel-buffering'] = 'no';
  const { body, status } = answer;
  if (body === null) {
    release();
    return { status, headers, body: null };
  }
  // The upstream body itself goes on; the streaming fetch says when it is over (slot freed).
  if (body instanceof ReadableStream) {
    if (!whenBodySettled(body, release)) {
      release();
      throw new Error('only answers of the streaming fetch are relayed');
    }
  } else body.whenSettled(release);
  return { status, headers, body };
}

/**
 * An upstream's answer, checked and relayed: a redirect is refused (neither the gateway nor
 * the proxy follows one), anything else is counted by its class and {@link relay}ed.
 *
 * @param upstream What answered and who does not follow, for the error: `the MCP server`
 *   and `the gateway`.
 * @throws {KeywayError} `upstream_error` for a redirect.
 */
export async function relayAnswer(
  answer: UpstreamAnswer,
  release: () => void,
  returned: readonly string[],
  count: (outcome: string) => void,
  upstream: [string, string],
): Promise<Relayed> {
  if (answer.status >= 300 && answer.status < 400) {
    await discardAnswer(answer);
    throw new KeywayError(
      'upstream_error',
      `${upstream[0]} answered a redirect (HTTP ${answer.status}), which ${upstream[1]} does not follow`,
    );
  }
  count(`${Math.floor(answer.status / 100)}xx`);
  return relay(answer, release, returned);
}
