import { listScope } from '../auth/listing.js';
import type { Principal } from '../auth/principal.js';
import { KeywayError } from '../contract/errors.js';
import { listPage, type Page } from '../contract/pagination.js';
import {
  AuditListQuery,
  type AuditListQueryInput,
  DeliveryListQuery,
  type DeliveryListQueryInput,
} from '../contract/schemas.js';
import { isoTime } from '../contract/time.js';
import { parseQuery } from '../contract/validation.js';
import type { Storage, WebhookDeliveryStatus } from '../storage/contract.js';
import type { ListAuditQuery, WebhookDeliveryRecord } from '../storage/record-types.js';
import { eventOf, type KeywayEvent } from './log.js';
import type { WebhookSender } from './webhooks.js';

/**
 * A webhook delivery as `GET /api/admin/webhooks/deliveries` lists it.
 *
 * @see [docs/api.md §11](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#11-events-webhooks-audit-log)
 */
export interface DeliveryView {
  id: string;
  /** The event, as every attempt sent it; its `id` is the `webhook-id`. */
  event: KeywayEvent;
  url: string;
  status: WebhookDeliveryStatus;
  attempts: number;
  /** When the next attempt is due; `null` once the delivery has ended. */
  next_attempt_at: string | null;
  last_attempt_at: string | null;
  /** The HTTP status of the last answer; `null` when there was none (timeout, refused…). */
  last_status: number | null;
  /** Why the last attempt failed; `null` when it did not, or before the first. */
  last_error: string | null;
  created_at: string;
}

function deliveryView(record: WebhookDeliveryRecord): DeliveryView {
  return {
    id: record.id,
    event: JSON.parse(record.body) as KeywayEvent,
    url: record.url,
    status: record.status,
    attempts: record.attempts,
    next_attempt_at: record.status === 'pending' ? isoTime(record.nextAttemptAt) : null,
    last_attempt_at: record.lastAttemptAt === 0 ? null : isoTime(record.lastAttemptAt),
    last_status: record.lastStatus === 0 ? null : record.lastStatus,
    last_error: record.lastError === '' ? null : record.lastError,
    created_at: isoTime(record.createdAt),
  };
}

/**
 * The audit log and the webhook outbox (docs/api.md §11), reached as `broker.events`.
 */
export class EventService {
  readonly #storage: Storage;
  readonly #sender: WebhookSender | null;

  constructor(storage: Storage, sender: WebhookSender | null) {
    this.#storage = storage;
    this.#sender = sender;
  }

  /**
   * The audit log, newest first: the events whose resource the caller's scopes cover, and
   * token events of its descendants (all of them for the root key). With `prefix`, only
   * events of resources in that subtree (no token events: a token's name is not a path).
   *
   * @param query `{ prefix?, type?, since?, limit?, cursor? }`, checked here.
   * @throws {KeywayError} `invalid_request`, `invalid_path`.
   */
  async list(principal: Principal, query?: AuditListQueryInput): Promise<Page<KeywayEvent>> {
    const options = parseQuery(AuditListQuery, query);
    const scope = listScope(principal, options.prefix);
    const tokensBelow =
      options.prefix !== undefined ? null : principal.kind === 'root' ? undefined : principal.name;
    return listPage(
      options,
      // Newest first: the cursor is the last id seen, and the next page is before it.
      ({ limit, after }) => {
        // Set field by field, not spread: see pathsQuery.
        const listed: ListAuditQuery = { limit };
        if (scope.within !== undefined) listed.within = scope.within;
        if (tokensBelow !== undefined) listed.tokensBelow = tokensBelow;
        if (options.type !== undefined) listed.type = options.type;
        if (options.since !== undefined) listed.since = Date.parse(options.since);
        if (after !== undefined) listed.before = after;
        return this.#storage.listAuditEvents(listed);
      },
      (record) => record.id,
      eventOf,
    );
  }

  /**
   * Webhook deliveries in id order, optionally of one status; the root key only.
   *
   * @param query `{ status?, limit?, cursor? }`, checked here.
   * @throws {KeywayError} `invalid_request`, `insufficient_scope`.
   */
  async deliveries(
    principal: Principal,
    query?: DeliveryListQueryInput,
  ): Promise<Page<DeliveryView>> {
    const options = parseQuery(DeliveryListQuery, query);
    if (principal.kind !== 'root') {
      throw new KeywayError('insufficient_scope', 'webhook deliveries are for the root key only');
    }
    return listPage(
      options,
      (window) =>
        this.#storage.listWebhookDeliveries({
          ...(options.status === undefined ? {} : { status: options.status }),
          ...window,
        }),
      (record) => record.id,
      deliveryView,
    );
  }

  /**
   * Attempts every webhook delivery due now, and waits for them. The broker does this on
   * its own (after each event, and every `webhookPollIntervalMs`); call it when that is
   * off, or in tests.
   *
   * @returns how many attempts were made.
   */
  async deliverDue(): Promise<number> {
    return this.#sender === null ? 0 : this.#sender.deliverDue();
  }
}
