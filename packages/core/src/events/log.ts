import { bytesToHex } from '@noble/hashes/utils.js';
import type { KeywayEventType } from '../contract/codes.js';
import { isoTime } from '../contract/time.js';
import type { Storage } from '../storage/contract.js';
import type {
  AuditEventRecord,
  EventWrite,
  JsonObject,
  WebhookDeliveryRecord,
} from '../storage/record-types.js';

/**
 * An event, as the audit log lists it, webhooks receive it and the `onEvent` hook gets it.
 * Never a secret: no token, key, client secret, verifier, state or code.
 *
 * @see [docs/api.md §11](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#11-events-webhooks-audit-log)
 */
export interface KeywayEvent {
  /** `evt_…`: unique; the `webhook-id` of its deliveries. */
  id: string;
  type: KeywayEventType;
  /** ISO 8601 UTC with milliseconds. */
  time: string;
  /** `root`, `token:<name>`, or `system` for what the broker did on its own (callback, refresh). */
  actor: string;
  /** The connection, provider or secret path, or the token's name for `token.*`. */
  resource: string;
  /** What happened beyond the type (granted scopes, an OAuth error code…): JSON. */
  data: Record<string, unknown>;
}

/** What a service says happened; {@link EventLog.of} makes the event of it. */
export interface EventSpec {
  type: KeywayEventType;
  actor: string;
  resource: string;
  data?: JsonObject;
}

/** A webhook endpoint (docs/api.md §11), as configured. */
export interface WebhookEndpoint {
  url: string;
  /** `whsec_` and the base64 signing key (Standard Webhooks). */
  secret: string;
  /** Only these event types; all when absent. */
  types?: KeywayEventType[];
}

/** Runs `work` after the I/O callbacks now due (`setImmediate` where the runtime has it). */
const immediate = (globalThis as { setImmediate?: (work: () => void) => unknown }).setImmediate;
const nextTurn = (work: () => void): void => {
  if (immediate === undefined) setTimeout(work, 0);
  else immediate(work);
};

const DAY = 86_400_000;

/** `expiresAt` of a delivery while it is pending: the purge never takes it. */
export const PENDING_FOREVER = Number.MAX_SAFE_INTEGER;

/** The event as JSON, as the audit log serves it and webhooks receive it. */
export function eventOf(record: AuditEventRecord): KeywayEvent {
  return {
    id: record.id,
    type: record.type as KeywayEventType,
    time: isoTime(record.time),
    actor: record.actor,
    resource: record.resource,
    data: record.data,
  };
}

/**
 * Makes the events of the broker's changes and sees them out: each change passes
 * {@link EventLog.of}'s write to storage with its own (one transaction), then calls
 * {@link EventLog.published}, which runs the `onEvent` hook and wakes the webhook sender.
 * What changes nothing (a secret read, a credential hand-out) goes through
 * {@link EventLog.append}.
 */
export class EventLog {
  readonly #storage: Storage;
  readonly #now: () => number;
  readonly #randomBytes: (length: number) => Uint8Array;
  readonly #retentionMs: number;
  readonly #webhooks: readonly WebhookEndpoint[];
  readonly #onEvent: ((event: KeywayEvent) => void | Promise<void>) | undefined;
  readonly #onError: (error: unknown) => void;
  /** Called after a commit that wrote deliveries: the sender looks for due ones. */
  onDeliveries: () => void = () => {};

  constructor(options: {
    storage: Storage;
    now: () => number;
    randomBytes: (length: number) => Uint8Array;
    retentionDays: number;
    webhooks: readonly WebhookEndpoint[];
    onEvent: ((event: KeywayEvent) => void | Promise<void>) | undefined;
    onError: (error: unknown) => void;
  }) {
    this.#storage = options.storage;
    this.#now = options.now;
    this.#randomBytes = options.randomBytes;
    this.#retentionMs = options.retentionDays * DAY;
    this.#webhooks = options.webhooks;
    this.#onEvent = options.onEvent;
    this.#onError = options.onError;
  }

  /** How long audit rows and ended deliveries are kept, in milliseconds. */
  get retentionMs(): number {
    return this.#retentionMs;
  }

  #lastTime = 0;
  #sequence = 0;

  /**
   * A time-ordered id: the prefix, 12 hex digits of the time, 4 of a sequence within the
   * millisecond, 12 of randomness. Ids made here only grow, even when the clock steps back,
   * so the log lists this instance's events in the order they happened.
   */
  #id(prefix: string, time: number): string {
    if (time > this.#lastTime) {
      this.#lastTime = time;
      this.#sequence = 0;
    } else {
      this.#sequence++;
      if (this.#sequence > 0xffff) {
        this.#lastTime++;
        this.#sequence = 0;
      }
    }
    const stamp = this.#lastTime.toString(16).padStart(12, '0');
    const sequence = this.#sequence.toString(16).padStart(4, '0');
    return `${prefix}_${stamp}${sequence}${bytesToHex(this.#randomBytes(6))}`;
  }

  /** The event of a change and its deliveries: pass it to the storage write of the change. */
  of(...specs: EventSpec[]): EventWrite {
    const write: EventWrite = { events: [], deliveries: [] };
    for (const spec of specs) {
      const time = this.#now();
      const record: AuditEventRecord = {
        id: this.#id('evt', time),
        type: spec.type,
        time,
        actor: spec.actor,
        resourceKind: spec.type.startsWith('token.') ? 'token' : 'path',
        resource: spec.resource,
        data: spec.data ?? {},
        expiresAt: time + this.#retentionMs,
      };
      write.events.push(record);
      // The body is written only for an event some endpoint wants.
      let body: string | undefined;
      for (const endpoint of this.#webhooks) {
        if (endpoint.types !== undefined && !endpoint.types.includes(spec.type)) continue;
        body ??= JSON.stringify(eventOf(record));
        write.deliveries.push(this.#delivery(record, endpoint.url, body, time));
      }
    }
    return write;
  }

  #delivery(
    event: AuditEventRecord,
    url: string,
    body: string,
    time: number,
  ): WebhookDeliveryRecord {
    return {
      id: this.#id('dlv', time),
      eventId: event.id,
      url,
      body,
      status: 'pending',
      attempts: 0,
      nextAttemptAt: time,
      lastAttemptAt: 0,
      lastStatus: 0,
      lastError: '',
      leaseOwner: '',
      leaseExpiresAt: 0,
      createdAt: time,
      expiresAt: PENDING_FOREVER,
    };
  }

  /**
   * After the write that carried `write` has committed: the `onEvent` hook gets each event
   * (its errors go to `onBackgroundError`, never to the request), and the webhook sender
   * wakes up.
   */
  published(write: EventWrite): void {
    if (this.#onEvent !== undefined) {
      for (const record of write.events) {
        try {
          const result = this.#onEvent(eventOf(record));
          if (result instanceof Promise) result.catch(this.#onError);
        } catch (error) {
          this.#onError(error);
        }
      }
    }
    if (write.deliveries.length > 0) this.onDeliveries();
  }

  /**
   * A change and the events that record it, as every write of core makes them: the events
   * are built first (`write` passes them to the storage method, which writes them in the
   * change's own transaction), and published once the change happened (`happened`
   * judges the storage's answer: by default, that it is truthy).
   *
   * @returns what the storage method answered.
   */
  async recorded<T>(
    specs: EventSpec | EventSpec[],
    write: (events: EventWrite) => Promise<T>,
    happened: (result: T) => boolean = Boolean,
  ): Promise<T> {
    const events = this.of(...(Array.isArray(specs) ? specs : [specs]));
    const result = await write(events);
    if (happened(result)) this.published(events);
    return result;
  }

  /** Appends waiting for the next commit, while one is in flight (group commit). */
  #waiting: { write: EventWrite; done: (failure: { error: unknown } | null) => void }[] = [];
  #committing = false;

  /**
   * Appends the events of what changes nothing in storage (a read, a hand-out), and
   * resolves once they are committed: the caller releases its value only then (docs/api.md
   * §11). Appends that arrive while a commit is in flight share the next one (group
   * commit): under concurrent reads, one transaction carries many rows instead of one
   * each. A commit that fails rejects every append it carried, and none is published.
   */
  append(...specs: EventSpec[]): Promise<void> {
    const write = this.of(...specs);
    return new Promise<void>((resolve, reject) => {
      this.#waiting.push({
        write,
        done: (failure) => (failure === null ? resolve() : reject(failure.error)),
      });
      if (!this.#committing) {
        // One turn of the event loop first: the reads whose work is under way (a vault
        // decrypt, a storage read) reach here and share the commit.
        this.#committing = true;
        nextTurn(() => void this.#commitWaiting());
      }
    });
  }

  /** Commits what waits, in batches, until nothing does. */
  async #commitWaiting(): Promise<void> {
    try {
      while (this.#waiting.length > 0) {
        const batch = this.#waiting;
        this.#waiting = [];
        const merged: EventWrite =
          batch.length === 1
            ? (batch[0] as (typeof batch)[number]).write
            : {
                events: batch.flatMap((entry) => entry.write.events),
                deliveries: batch.flatMap((entry) => entry.write.deliveries),
              };
        try {
          await this.#storage.appendEvents(merged);
        } catch (error) {
          for (const entry of batch) entry.done({ error });
          continue;
        }
        this.published(merged);
        for (const entry of batch) entry.done(null);
      }
    } finally {
      this.#committing = false;
    }
  }
}
