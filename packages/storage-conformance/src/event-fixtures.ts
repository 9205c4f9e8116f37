import type {
  AuditEventRecord,
  EventWrite,
  Storage,
  WebhookDeliveryRecord,
} from '@keyway/core/storage';
import { connectionRecord, providerRecord } from './path-record-cases.js';
import { tokenRecord } from './token-cases.js';

/*
 * The records of the event cases, and every storage write that records events: each is
 * run with its events and without a change to see both land together, or neither.
 */

export const NOW = Date.UTC(2026, 10, 21, 9, 30, 0, 0);
export const MINUTE = 60_000;
export const DAY = 86_400_000;
/** `expiresAt` of a delivery still pending: never purged. */
export const NEVER = Number.MAX_SAFE_INTEGER;

let eventCounter = 0;

/** An event whose id orders by `time`, then by creation within one millisecond. */
export function auditEvent(overrides: Partial<AuditEventRecord> = {}): AuditEventRecord {
  eventCounter++;
  const time = overrides.time ?? NOW;
  return {
    id: `evt_${time.toString(16).padStart(12, '0')}${eventCounter.toString(16).padStart(16, '0')}`,
    type: 'connection.authorized',
    time,
    actor: 'system',
    resourceKind: 'path',
    resource: 'acme/users/alice/linear',
    data: { scopes: ['read', 'wríte'], nested: { n: 1.5, none: null } },
    expiresAt: time + 90 * DAY,
    ...overrides,
  };
}

let deliveryCounter = 0;

export function delivery(overrides: Partial<WebhookDeliveryRecord> = {}): WebhookDeliveryRecord {
  deliveryCounter++;
  return {
    id: `dlv_${deliveryCounter.toString(16).padStart(12, '0')}`,
    eventId: 'evt_1',
    url: 'https://hooks.example/keyway',
    body: '{"id":"evt_1","type":"connection.authorized"}',
    status: 'pending',
    attempts: 0,
    nextAttemptAt: NOW,
    lastAttemptAt: 0,
    lastStatus: 0,
    lastError: '',
    leaseOwner: '',
    leaseExpiresAt: 0,
    createdAt: NOW,
    expiresAt: NEVER,
    ...overrides,
  };
}

/** One event with one delivery. */
export function eventWrite(overrides: Partial<AuditEventRecord> = {}): EventWrite {
  const event = auditEvent(overrides);
  return { events: [event], deliveries: [delivery({ eventId: event.id })] };
}

export async function allEvents(storage: Storage): Promise<AuditEventRecord[]> {
  return storage.listAuditEvents({ limit: 1000 });
}

export async function allDeliveries(storage: Storage): Promise<WebhookDeliveryRecord[]> {
  return storage.listWebhookDeliveries({ limit: 1000 });
}

/** A write whose events must land with it, or not at all, and its effect as it reads back. */
interface RecordedWrite {
  name: string;
  /** Puts in place what the write needs (without events). */
  prepare(storage: Storage): Promise<void>;
  /** The write itself, carrying `events`. */
  write(storage: Storage, events: EventWrite): Promise<unknown>;
  /** What the write answers when it changes something. */
  changed: unknown;
  /** Whether the write's change is visible. */
  applied(storage: Storage): Promise<boolean>;
  /** The same write when it changes nothing (the key taken, another version, no record). */
  noop(storage: Storage, events: EventWrite): Promise<unknown>;
  unchanged: unknown;
}

export const secretWrite = { kind: 'secret', key: 'acme/api-key', ciphertext: 'ct', keyId: 'k1' };

export const WRITES: RecordedWrite[] = [
  {
    name: 'insertToken',
    prepare: async (s) => void (await s.insertToken(tokenRecord('taken'), NOW)),
    write: (s, events) => s.insertToken(tokenRecord('ci'), NOW, events),
    changed: true,
    applied: async (s) => (await s.findLiveTokenByName('ci', NOW)) !== null,
    noop: (s, events) => s.insertToken(tokenRecord('taken'), NOW, events),
    unchanged: false,
  },
  {
    name: 'updateTokenTree',
    prepare: async (s) => void (await s.insertToken(tokenRecord('ci', { scopes: ['a/**'] }), NOW)),
    write: (s, events) =>
      s.updateTokenTree('ci', NOW, (tree) => ({
        update: tree.map((t) => ({ ...t, scopes: ['a/b/**'] })),
        delete: [],
        events,
      })),
    changed: true,
    applied: async (s) => (await s.findLiveTokenByName('ci', NOW))?.scopes[0] === 'a/b/**',
    noop: (s, events) => s.updateTokenTree('gone', NOW, () => ({ update: [], delete: [], events })),
    unchanged: false,
  },
  {
    name: 'deleteTokenTree',
    prepare: async (s) => void (await s.insertToken(tokenRecord('ci'), NOW)),
    write: (s, events) => s.deleteTokenTree('ci', NOW, events),
    changed: true,
    applied: async (s) => (await s.findLiveTokenByName('ci', NOW)) === null,
    noop: (s, events) => s.deleteTokenTree('gone', NOW, events),
    unchanged: false,
  },
  {
    name: 'insertProvider',
    prepare: async (s) => void (await s.insertProvider(providerRecord('taken'))),
    write: (s, events) => s.insertProvider(providerRecord('linear'), undefined, events),
    changed: true,
    applied: async (s) => (await s.getProvider('linear')) !== null,
    noop: (s, events) => s.insertProvider(providerRecord('taken'), undefined, events),
    unchanged: false,
  },
  {
    name: 'compareAndSetProvider',
    prepare: async (s) => void (await s.insertProvider(providerRecord('linear'))),
    write: (s, events) =>
      s.compareAndSetProvider(providerRecord('linear', { version: 2 }), 1, undefined, events),
    changed: true,
    applied: async (s) => (await s.getProvider('linear'))?.version === 2,
    noop: (s, events) =>
      s.compareAndSetProvider(providerRecord('linear', { version: 3 }), 7, undefined, events),
    unchanged: false,
  },
  {
    name: 'deleteProvider',
    prepare: async (s) => {
      await s.insertProvider(providerRecord('linear'));
      await s.insertProvider(providerRecord('used'));
      await s.insertConnection(connectionRecord('acme/c', { providerId: 'used' }));
    },
    write: (s, events) => s.deleteProvider('linear', undefined, events),
    changed: 'deleted',
    applied: async (s) => (await s.getProvider('linear')) === null,
    noop: (s, events) => s.deleteProvider('used', undefined, events),
    unchanged: 'in_use',
  },
  {
    name: 'insertConnection',
    prepare: async (s) => {
      await s.insertProvider(providerRecord('linear'));
      await s.insertConnection(connectionRecord('acme/taken'));
    },
    write: (s, events) => s.insertConnection(connectionRecord('acme/c'), undefined, events),
    changed: true,
    applied: async (s) => (await s.getConnection('acme/c')) !== null,
    noop: (s, events) => s.insertConnection(connectionRecord('acme/taken'), undefined, events),
    unchanged: false,
  },
  {
    name: 'compareAndSetConnection',
    prepare: async (s) => {
      await s.insertProvider(providerRecord('linear'));
      await s.insertConnection(connectionRecord('acme/c'));
    },
    write: (s, events) =>
      s.compareAndSetConnection(
        connectionRecord('acme/c', { version: 2, status: 'active' }),
        1,
        undefined,
        events,
      ),
    changed: true,
    applied: async (s) => (await s.getConnection('acme/c'))?.status === 'active',
    noop: (s, events) =>
      s.compareAndSetConnection(connectionRecord('acme/c', { version: 9 }), 8, undefined, events),
    unchanged: false,
  },
  {
    name: 'deleteConnection',
    prepare: async (s) => {
      await s.insertProvider(providerRecord('linear'));
      await s.insertConnection(connectionRecord('acme/c'));
    },
    write: (s, events) => s.deleteConnection('acme/c', [], events),
    changed: true,
    applied: async (s) => (await s.getConnection('acme/c')) === null,
    noop: (s, events) => s.deleteConnection('acme/none', [], events),
    unchanged: false,
  },
  {
    name: 'putVaultEntry',
    prepare: async () => {},
    write: async (s, events) => (await s.putVaultEntry(secretWrite, NOW, () => events)).created,
    changed: true,
    applied: async (s) => (await s.getVaultEntry('secret', 'acme/api-key')) !== null,
    // A put always writes: there is no put that changes nothing.
    noop: async () => false,
    unchanged: false,
  },
  {
    name: 'deleteVaultEntry',
    prepare: async (s) => void (await s.putVaultEntry(secretWrite, NOW)),
    write: (s, events) => s.deleteVaultEntry('secret', 'acme/api-key', events),
    changed: true,
    applied: async (s) => (await s.getVaultEntry('secret', 'acme/api-key')) === null,
    noop: (s, events) => s.deleteVaultEntry('secret', 'acme/none', events),
    unchanged: false,
  },
];
