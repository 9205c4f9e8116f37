import { z } from 'zod';
import { delegationRoot } from '../auth/delegation.js';
import type { Principal } from '../auth/principal.js';
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
  '"gateway" must be { maxBodyBytes?, maxBufferedBytes?, idleTimeoutMs?, maxStreamsPerConnection?, ' +
  'maxStreamsPerCaller? } with integers in range';

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
     * Request bodies held at once across the process, in bytes, by the gateway and the proxy
     * together (1 MiB to 16 GiB). Default 64 MiB: past it a request is refused `429` with
     * `Retry-After` before its body is read.
     */
    maxBufferedBytes: z
      .number()
      .int()
      .min(1024 * 1024)
      .max(16 * 1024 * 1024 * 1024)
      .optional(),
    /**
     * How long the upstream may stay silent, in ms: before its answer's head, and between
     * two chunks of a stream (1 s to 1 h). Default 300000 (5 min).
     */
    idleTimeoutMs: z.number().int().min(1000).max(3_600_000).optional(),
    /** Upstream requests open at once for one connection (1 to 100000). Default 64. */
    maxStreamsPerConnection: z.number().int().min(1).max(100_000).optional(),
    /**
     * Upstream requests open at once for one caller (1 to 100000), counted per delegation tree
     * (`agent`, `agent.a` and `agent.a.b` share it, as they share the mint limit). Default 256.
     */
    maxStreamsPerCaller: z.number().int().min(1).max(100_000).optional(),
  },
  { error: GATEWAY_LIMITS },
);

/** The gateway's limits with their defaults. */
export type GatewayLimits = Required<z.output<typeof GatewayLimitsSchema>>;

export function gatewayLimits(input: z.output<typeof GatewayLimitsSchema> = {}): GatewayLimits {
  return {
    maxBodyBytes: input.maxBodyBytes ?? 4 * 1024 * 1024,
    maxBufferedBytes: input.maxBufferedBytes ?? 64 * 1024 * 1024,
    idleTimeoutMs: input.idleTimeoutMs ?? 300_000,
    maxStreamsPerConnection: input.maxStreamsPerConnection ?? 64,
    maxStreamsPerCaller: input.maxStreamsPerCaller ?? 256,
  };
}

/**
 * Who a stream slot is counted against: the root key, or a broker token's delegation tree
 * (the name before its first dot), so delegating does not multiply a caller's streams.
 */
export function callerOf(principal: Principal): string {
  return principal.kind === 'root' ? 'root' : `tree:${delegationRoot(principal.name)}`;
}

/**
 * Open upstream requests counted per connection and per caller, in this process (each
 * instance enforces its own share), and the request bodies they hold. `take` takes a slot
 * in both or throws `rate_limited`; the release it answers gives both back, once.
 */
export class StreamSlots {
  readonly #byConnection = new Map<string, number>();
  readonly #byCaller = new Map<string, number>();
  #open = 0;
  #buffered = 0;

  constructor(
    readonly limits: GatewayLimits,
    readonly observe: Observer,
  ) {}

  /** Bytes of request bodies held in this process. */
  get buffered(): number {
    return this.#buffered;
  }

  /**
   * Holds `bytes` more of request bodies, or throws `rate_limited` past the process's limit
   * (`maxBufferedBytes`); the caller gives them back with {@link StreamSlots.unhold}.
   */
  hold(bytes: number): void {
    if (this.#buffered + bytes > this.limits.maxBufferedBytes) {
      throw new KeywayError(
        'rate_limited',
        `Keyway holds ${this.#buffered} bytes of forwarded request bodies, near its limit of ` +
          `${this.limits.maxBufferedBytes}: retry shortly`,
        { retryAfter: 1 },
      );
    }
    this.#buffered += bytes;
  }

  /** Gives back bytes {@link StreamSlots.hold} took. */
  unhold(bytes: number): void {
    this.#buffered = Math.max(0, this.#buffered - bytes);
  }

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
 * A request body a server adapter has not read yet (the Node adapter's): read only once the
 * gateway's limits allow it, so no caller holds memory with bodies it never finishes.
 */
export interface UnreadBody {
  /**
   * Reads the whole body, at most `limit` bytes, calling `hold` with each chunk's size before
   * keeping it; `hold` throwing stops the read (the rest is left unread), as does the limit.
   *
   * @throws {KeywayError} `payload_too_large`; `invalid_request` for a body cut short; what
   *   `hold` throws.
   */
  read(limit: number, hold: (bytes: number) => void): Promise<Uint8Array>;
}

/**
 * A forwarded request's body as held: its bytes (or the read that brings them), and the
 * release of what it holds.
 */
export interface HeldBody {
  /** The bytes, `null` for none, or the read under way (awaited by the caller itself). */
  bytes: Uint8Array | null | Promise<Uint8Array>;
  /** Gives the bytes back to the process's budget; more than once is once. */
  release(): void;
}

/**
 * The body of a forwarded request (the gateway's, the proxy's), read whole and at most
 * `limit` bytes, each byte held against the process's budget (`slots`) before it is kept;
 * `null` for `GET` and `HEAD`. Called once the request holds its stream slot. A body still
 * to be read is answered as its read, which the caller awaits (no promise of this function
 * between): the caller releases what it held when the read fails.
 *
 * @throws {KeywayError} `payload_too_large`, `invalid_request` for a body cut short,
 *   `rate_limited` past the process's budget: thrown, or the read's rejection.
 */
export function forwardedBody(
  request: {
    method: string;
    headers: Headers | Readonly<Record<string, string | string[] | undefined>>;
    body: Uint8Array | ReadableStream<Uint8Array> | UnreadBody | null;
  },
  limit: number,
  slots: StreamSlots,
): HeldBody {
  let held = 0;
  const hold = (bytes: number) => {
    slots.hold(bytes);
    held += bytes;
  };
  const release = () => {
    slots.unhold(held);
    held = 0;
  };
  if (request.method === 'GET' || request.method === 'HEAD') return { bytes: null, release };
  const tooLarge = () =>
    new KeywayError('payload_too_large', `the request body is larger than ${limit} bytes`);
  const given = request.body;
  try {
    if (given instanceof Uint8Array) {
      if (given.byteLength > limit) throw tooLarge();
      hold(given.byteLength);
      return { bytes: given, release };
    }
    if (given !== null && !(given instanceof ReadableStream)) {
      return { bytes: given.read(limit, hold), release };
    }
    const headers = request.headers instanceof Headers ? request.headers : new Headers();
    const bytes = readBounded(
      { headers, body: given },
      limit,
      {
        tooLarge,
        broken: (cause) =>
          new KeywayError('invalid_request', 'the request body ended before it was complete', {
            cause,
          }),
      },
      undefined,
      hold,
    );
    return { bytes, release };
  } catch (error) {
    release();
    throw error;
  }
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
 * the proxy follows one), anything else is counted by its class and {@link relay}ed. No
 * promise: the caller relays without a turn of its own.
 *
 * @param upstream What answered and who does not follow, for the error: `the MCP server`
 *   and `the gateway`.
 * @throws {KeywayError} `upstream_error` for a redirect, its body dropped.
 */
export function relayAnswer(
  answer: UpstreamAnswer,
  release: () => void,
  returned: readonly string[],
  count: (outcome: string) => void,
  upstream: [string, string],
): Relayed {
  if (answer.status >= 300 && answer.status < 400) {
    // Dropped at once (the stream's cancellation closes its request as it begins).
    discardAnswer(answer).catch(() => {});
    throw new KeywayError(
      'upstream_error',
      `${upstream[0]} answered a redirect (HTTP ${answer.status}), which ${upstream[1]} does not follow`,
    );
  }
  count(`${Math.floor(answer.status / 100)}xx`);
  return relay(answer, release, returned);
}
