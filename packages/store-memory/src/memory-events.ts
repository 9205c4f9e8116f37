import {
  type AuditEventRecord,
  compareCodePoints,
  type EventWrite,
  isInSubtree,
  type Storage,
  type WebhookDeliveryRecord,
} from '@keyway/core/storage';

/** A deep copy: records are copied in and out, so no caller holds a reference into the store. */
export const copy = <T>(value: T): T => structuredClone(value);

/** The operations of the audit log and the webhook outbox. */
type EventMethods = Pick<
  Storage,
  | 'appendEvents'
  | 'listAuditEvents'
  | 'claimWebhookDeliveries'
  | 'finishWebhookAttempt'
  | 'listWebhookDeliveries'
>;

/**
 * The audit log and the webhook outbox of a memory storage: their maps, the checked write
 * every recorded change makes, and the storage methods that read and lease them.
 */
export function memoryEventLog() {
  const auditEvents = new Map<string, AuditEventRecord>();
  const deliveries = new Map<string, WebhookDeliveryRecord>();

  /** Throws, before anything is written, when an event or delivery id is taken. */
  function check(write: EventWrite | undefined): void {
    if (write === undefined) return;
    const ids = new Set<string>();
    for (const { id } of [...write.events, ...write.deliveries]) {
      if (ids.has(id) || auditEvents.has(id) || deliveries.has(id)) {
        throw new Error(`event or delivery id "${id}" exists already`);
      }
      ids.add(id);
    }
  }

  /** Writes the events and deliveries of a change (checked first by {@link check}). */
  function write(batch: EventWrite | undefined): void {
    for (const event of batch?.events ?? []) auditEvents.set(event.id, copy(event));
    for (const delivery of batch?.deliveries ?? []) deliveries.set(delivery.id, copy(delivery));
  }

  const methods: EventMethods = {
    async appendEvents(events) {
      check(events);
      write(events);
    },

    async listAuditEvents({ within, tokensBelow, type, since, before, limit }) {
      const result: AuditEventRecord[] = [];
      const ids = [...auditEvents.keys()].sort((a, b) => compareCodePoints(b, a));
      for (const id of ids) {
        if (before !== undefined && compareCodePoints(id, before) >= 0) continue;
        const event = auditEvents.get(id) as AuditEventRecord;
        if (type !== undefined && event.type !== type) continue;
        if (since !== undefined && event.time < since) continue;
        const visible =
          event.resourceKind === 'path'
            ? within === undefined || within.some((root) => isInSubtree(root, event.resource))
            : tokensBelow === undefined ||
              (tokensBelow !== null && event.resource.startsWith(`${tokensBelow}.`));
        if (!visible) continue;
        result.push(copy(event));
        if (result.length >= limit) break;
      }
      return result;
    },

    async claimWebhookDeliveries(owner, leaseExpiresAt, now, limit) {
      const due = [...deliveries.values()]
        .filter((d) => d.status === 'pending' && d.nextAttemptAt <= now && d.leaseExpiresAt <= now)
        .sort((a, b) => a.nextAttemptAt - b.nextAttemptAt || compareCodePoints(a.id, b.id))
        .slice(0, limit);
      for (const delivery of due) {
        delivery.leaseOwner = owner;
        delivery.leaseExpiresAt = leaseExpiresAt;
      }
      return due.map(copy);
    },

    async finishWebhookAttempt(id, owner, outcome) {
      const delivery = deliveries.get(id);
      if (delivery === undefined || delivery.leaseOwner !== owner) return false;
      deliveries.set(id, { ...delivery, ...outcome, leaseOwner: '', leaseExpiresAt: 0 });
      return true;
    },

    async listWebhookDeliveries({ status, after, limit }) {
      return [...deliveries.values()]
        .filter((d) => status === undefined || d.status === status)
        .filter((d) => after === undefined || compareCodePoints(d.id, after) > 0)
        .sort((a, b) => compareCodePoints(a.id, b.id))
        .slice(0, limit)
        .map(copy);
    },
  };
  return { auditEvents, deliveries, check, write, methods };
}
