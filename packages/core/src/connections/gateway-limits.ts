import { z } from 'zod';
import { KeywayError } from '../contract/errors.js';
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
