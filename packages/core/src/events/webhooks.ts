import { Webhook } from 'standardwebhooks';
import type { OutboundFetch } from '../outbound/fetch.js';
import { OutboundError } from '../outbound/network-failure.js';
import type { Storage } from '../storage/contract.js';
import type { WebhookAttemptOutcome, WebhookDeliveryRecord } from '../storage/record-types.js';
import type { Observer, WebhookDeliveryOutcome } from '../telemetry/observation.js';
import { inSpan } from '../telemetry/tracing.js';
import type { WebhookEndpoint } from './log.js';

const SECOND = 1000;
const HOUR = 3_600_000;

/**
 * The waits after each failed attempt (docs/api.md §11): 5 s, 1 min, 10 min, 1 h, 6 h, then every
 * 12 h, until 3 days after the event; eleven attempts in all.
 */
export const RETRY_DELAYS_MS: readonly number[] = [
  5 * SECOND,
  60 * SECOND,
  600 * SECOND,
  HOUR,
  6 * HOUR,
];
const REPEAT_MS = 12 * HOUR;
const GIVE_UP_AFTER_MS = 72 * HOUR;

/**
 * When the next attempt of a delivery is due once its `attempts`-th attempt failed at
 * `now`, or `null` when that was the last.
 */
export function nextAttemptAt(createdAt: number, attempts: number, now: number): number | null {
  const next = now + (RETRY_DELAYS_MS[attempts - 1] ?? REPEAT_MS);
  return next - createdAt > GIVE_UP_AFTER_MS ? null : next;
}

/** The whole-attempt timeout. */
const ATTEMPT_TIMEOUT_MS = 15 * SECOND;
/**
 * How long one instance holds a delivery while it attempts it: twice the attempt's
 * timeout. An instance that dies mid-attempt delays that delivery by at most this.
 */
const LEASE_MS = 2 * ATTEMPT_TIMEOUT_MS;
/** An attempt's outcome as spans and metrics name it. */
const DELIVERY_OUTCOME = {
  delivered: 'delivered',
  pending: 'retrying',
  failed: 'failed',
} as const satisfies Record<WebhookAttemptOutcome['status'], WebhookDeliveryOutcome>;

/** Deliveries claimed per round; a full round is followed by another at once. */
const BATCH = 20;

/**
 * Sends the webhook outbox (docs/api.md §11): each round leases the due deliveries (one instance
 * per attempt, across every instance on the storage), signs each as Standard Webhooks says,
 * POSTs it through the guarded outbound fetch, and records the outcome: `delivered` on a
 * 2xx, otherwise the next attempt on the backoff schedule, or `failed` after the last.
 */
export class WebhookSender {
  readonly #storage: Storage;
  readonly #outbound: OutboundFetch;
  readonly #now: () => number;
  readonly #retentionMs: number;
  readonly #onError: (error: unknown) => void;
  readonly #observe: Observer;
  readonly #signers = new Map<string, Webhook>();
  readonly #owner: string;
  #round: Promise<number> | null = null;
  #again = false;
  #timer: ReturnType<typeof setInterval> | undefined;
  #stopped = false;

  constructor(options: {
    storage: Storage;
    outbound: OutboundFetch;
    now: () => number;
    webhooks: readonly WebhookEndpoint[];
    retentionMs: number;
    owner: string;
    onError: (error: unknown) => void;
    /** Told of each attempt's outcome (docs/api.md §16 metrics). */
    observe?: Observer;
  }) {
    this.#storage = options.storage;
    this.#outbound = options.outbound;
    this.#now = options.now;
    this.#retentionMs = options.retentionMs;
    this.#owner = options.owner;
    this.#onError = options.onError;
    this.#observe = options.observe ?? (() => {});
    for (const endpoint of options.webhooks) {
      this.#signers.set(endpoint.url, new Webhook(endpoint.secret));
    }
  }

  /** Polls the outbox every `intervalMs` (for retries, and events of other instances). */
  start(intervalMs: number): void {
    this.#timer = setInterval(() => this.wake(), intervalMs);
    // The poll alone must not keep a process alive (Node, Bun; Deno ignores this).
    (this.#timer as { unref?: () => void }).unref?.();
  }

  /** Runs a round soon; a round under way is followed by another. */
  wake(): void {
    if (this.#stopped) return;
    if (this.#round !== null) {
      this.#again = true;
      return;
    }
    this.#round = this.deliverDue()
      .catch((error) => {
        this.#onError(error);
        return 0;
      })
      .finally(() => {
        this.#round = null;
        if (this.#again) {
          this.#again = false;
          this.wake();
        }
      });
  }

  /** Stops polling and waits for the round under way. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    await this.#round;
  }

  /**
   * Attempts every delivery due now, round after round until none is left.
   *
   * @returns how many attempts were made.
   */
  async deliverDue(): Promise<number> {
    let attempted = 0;
    for (;;) {
      const now = this.#now();
      const due = await this.#storage.claimWebhookDeliveries(
        this.#owner,
        now + LEASE_MS,
        now,
        BATCH,
      );
      await Promise.all(due.map((delivery) => this.#attempt(delivery)));
      attempted += due.length;
      if (due.length < BATCH) return attempted;
    }
  }

  async #attempt(delivery: WebhookDeliveryRecord): Promise<void> {
    const signer = this.#signers.get(delivery.url);
    const outcome = await inSpan(
      'keyway.webhook_delivery',
      { 'keyway.webhook.attempt': delivery.attempts + 1 },
      async () =>
        signer === undefined
          ? this.#failed(delivery, 0, 'the endpoint is no longer configured', true)
          : await this.#send(delivery, signer),
      (ended) => DELIVERY_OUTCOME[ended.status],
    );
    this.#observe({ kind: 'webhook_delivery', outcome: DELIVERY_OUTCOME[outcome.status] });
    const recorded = await this.#storage.finishWebhookAttempt(delivery.id, this.#owner, outcome);
    // The lease ran out during the attempt and another instance took it: its outcome counts.
    if (!recorded) this.#onError(new Error(`webhook delivery ${delivery.id}: the lease was lost`));
  }

  async #send(delivery: WebhookDeliveryRecord, signer: Webhook): Promise<WebhookAttemptOutcome> {
    const sentAt = this.#now();
    let response: Response;
    try {
      response = await this.#outbound(delivery.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'Keyway-Webhooks',
          'webhook-id': delivery.eventId,
          'webhook-timestamp': String(Math.floor(sentAt / SECOND)),
          'webhook-signature': signer.sign(delivery.eventId, new Date(sentAt), delivery.body),
        },
        body: delivery.body,
        signal: AbortSignal.timeout(ATTEMPT_TIMEOUT_MS),
      });
    } catch (error) {
      const reason =
        error instanceof OutboundError
          ? error.failure
          : error instanceof Error && error.name === 'TimeoutError'
            ? 'timeout'
            : 'network';
      return this.#failed(delivery, 0, reason, false);
    }
    // The answer's body is not read: only its status counts.
    await response.body?.cancel().catch(() => {});
    if (response.status >= 200 && response.status < 300) {
      const now = this.#now();
      return {
        status: 'delivered',
        attempts: delivery.attempts + 1,
        nextAttemptAt: delivery.nextAttemptAt,
        lastAttemptAt: now,
        lastStatus: response.status,
        lastError: '',
        expiresAt: now + this.#retentionMs,
      };
    }
    return this.#failed(delivery, response.status, `HTTP ${response.status}`, false);
  }

  #failed(
    delivery: WebhookDeliveryRecord,
    status: number,
    error: string,
    final: boolean,
  ): WebhookAttemptOutcome {
    const now = this.#now();
    const attempts = delivery.attempts + 1;
    const next = final ? null : nextAttemptAt(delivery.createdAt, attempts, now);
    return {
      status: next === null ? 'failed' : 'pending',
      attempts,
      nextAttemptAt: next ?? delivery.nextAttemptAt,
      lastAttemptAt: now,
      lastStatus: status,
      lastError: error,
      expiresAt: next === null ? now + this.#retentionMs : delivery.expiresAt,
    };
  }
}
