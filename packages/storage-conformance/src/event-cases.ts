import type { AuditEventRecord, EventWrite, Storage } from '@keyway/core/storage';
import { describe, expect, it } from 'vitest';
import type { CaseContext } from './conformance.js';
import {
  allDeliveries,
  allEvents,
  auditEvent,
  DAY,
  delivery,
  eventWrite,
  MINUTE,
  NEVER,
  NOW,
  secretWrite,
  WRITES,
} from './event-fixtures.js';

export function eventStorageCases({ open, connectAgain, readBehind }: CaseContext): void {
  describe('events: written with the change they record', () => {
    for (const recorded of WRITES) {
      it(`${recorded.name} writes its events with its change, and none when it changes nothing`, async () => {
        const storage = await open();
        await recorded.prepare(storage);
        const events = eventWrite();
        expect(await recorded.write(storage, events)).toEqual(recorded.changed);
        expect(await recorded.applied(storage)).toBe(true);
        expect(await allEvents(storage)).toEqual(events.events);
        expect(await allDeliveries(storage)).toEqual(events.deliveries);

        expect(await recorded.noop(storage, eventWrite())).toEqual(recorded.unchanged);
        expect(await allEvents(storage)).toEqual(events.events);
        expect(await allDeliveries(storage)).toEqual(events.deliveries);
      });

      it(`${recorded.name} writes nothing when its events cannot be written`, async () => {
        const storage = await open();
        await recorded.prepare(storage);
        const existing = eventWrite();
        await storage.appendEvents(existing);
        // The event's id exists: appending fails, and the change with it.
        const clash: EventWrite = {
          events: [{ ...auditEvent(), id: existing.events[0]?.id ?? '' }],
          deliveries: [],
        };
        await expect(recorded.write(storage, clash)).rejects.toThrow();
        expect(await recorded.applied(storage)).toBe(false);
        expect(await allEvents(storage)).toEqual(existing.events);

        const deliveryClash: EventWrite = {
          events: [auditEvent()],
          deliveries: [delivery({ id: existing.deliveries[0]?.id ?? '' })],
        };
        await expect(recorded.write(storage, deliveryClash)).rejects.toThrow();
        expect(await recorded.applied(storage)).toBe(false);
        expect(await allEvents(storage)).toEqual(existing.events);
        expect(await allDeliveries(storage)).toEqual(existing.deliveries);
      });
    }

    it('putVaultEntry asks the events of a creation, then of a replacement', async () => {
      const storage = await open();
      const seen: boolean[] = [];
      const events = (created: boolean) => {
        seen.push(created);
        return eventWrite({ type: created ? 'secret.created' : 'secret.updated' });
      };
      await storage.putVaultEntry(secretWrite, NOW, events);
      await storage.putVaultEntry({ ...secretWrite, ciphertext: 'ct2' }, NOW + 1, events);
      expect(seen).toEqual([true, false]);
      expect((await allEvents(storage)).map((event) => event.type)).toEqual([
        'secret.updated',
        'secret.created',
      ]);
    });

    it('appendEvents writes events and deliveries as given, and refuses an id that exists', async () => {
      const storage = await open();
      const write = eventWrite({ data: { scopes: ['é', '\u{1F600}'], quote: '"\\\u0000' } });
      await storage.appendEvents(write);
      expect(await allEvents(storage)).toEqual(write.events);
      expect(await allDeliveries(storage)).toEqual(write.deliveries);
      await expect(
        storage.appendEvents({ events: [auditEvent(), ...write.events], deliveries: [] }),
      ).rejects.toThrow();
      expect(await allEvents(storage)).toEqual(write.events);
    });
  });

  describe('listAuditEvents()', () => {
    async function seeded() {
      const storage = await open();
      const events = [
        auditEvent({ time: NOW, type: 'provider.created', resource: 'linear' }),
        auditEvent({ time: NOW + 1, resource: 'acme/users/alice/linear' }),
        auditEvent({ time: NOW + 2, resource: 'acme/users/bob/linear' }),
        auditEvent({ time: NOW + 3, resource: 'acme-x/one' }),
        auditEvent({ time: NOW + 4, type: 'token.created', resourceKind: 'token', resource: 'ci' }),
        auditEvent({
          time: NOW + 5,
          type: 'token.created',
          resourceKind: 'token',
          resource: 'ci.a',
        }),
        auditEvent({
          time: NOW + 6,
          type: 'token.deleted',
          resourceKind: 'token',
          resource: 'cix',
        }),
        auditEvent({ time: NOW + 7, type: 'secret.read', resource: 'acme' }),
      ];
      for (const event of events) await storage.appendEvents({ events: [event], deliveries: [] });
      return { storage, events };
    }

    const indexes = (all: AuditEventRecord[], list: AuditEventRecord[]) =>
      list.map((event) => all.findIndex((e) => e.id === event.id));

    it('lists newest first and pages with before', async () => {
      const { storage, events } = await seeded();
      const first = await storage.listAuditEvents({ limit: 3 });
      expect(indexes(events, first)).toEqual([7, 6, 5]);
      const next = await storage.listAuditEvents({ limit: 3, before: first[2]?.id as string });
      expect(indexes(events, next)).toEqual([4, 3, 2]);
    });

    it('filters by type and since', async () => {
      const { storage, events } = await seeded();
      expect(
        indexes(events, await storage.listAuditEvents({ limit: 10, type: 'token.created' })),
      ).toEqual([5, 4]);
      expect(indexes(events, await storage.listAuditEvents({ limit: 10, since: NOW + 6 }))).toEqual(
        [7, 6],
      );
    });

    it('shows path events within the subtrees, never a sibling sharing a prefix', async () => {
      const { storage, events } = await seeded();
      const acme = await storage.listAuditEvents({
        limit: 10,
        within: ['acme'],
        tokensBelow: null,
      });
      expect(indexes(events, acme)).toEqual([7, 2, 1]);
      const alice = await storage.listAuditEvents({
        limit: 10,
        within: ['acme/users/alice', 'linear'],
        tokensBelow: null,
      });
      expect(indexes(events, alice)).toEqual([1, 0]);
      expect(await storage.listAuditEvents({ limit: 10, within: [], tokensBelow: null })).toEqual(
        [],
      );
    });

    it("shows token events only of a token's descendants", async () => {
      const { storage, events } = await seeded();
      const below = await storage.listAuditEvents({ limit: 10, within: [], tokensBelow: 'ci' });
      expect(indexes(events, below)).toEqual([5]);
      const both = await storage.listAuditEvents({
        limit: 10,
        within: ['acme-x'],
        tokensBelow: 'ci',
      });
      expect(indexes(events, both)).toEqual([5, 3]);
    });

    it('pages a scoped listing across overlapping subtrees with every filter, each event once', async () => {
      const { storage, events } = await seeded();
      // `acme` covers `acme/users`: the events of both are listed once, newest first.
      const scoped = (extra: Partial<Parameters<typeof storage.listAuditEvents>[0]>) =>
        storage.listAuditEvents({
          limit: 2,
          within: ['acme/users', 'acme', 'linear'],
          tokensBelow: 'ci',
          ...extra,
        });
      const first = await scoped({});
      expect(indexes(events, first)).toEqual([7, 5]);
      const second = await scoped({ before: first[1]?.id as string });
      expect(indexes(events, second)).toEqual([2, 1]);
      const third = await scoped({ before: second[1]?.id as string });
      expect(indexes(events, third)).toEqual([0]);
      expect(indexes(events, await scoped({ limit: 10, type: 'token.created' }))).toEqual([5]);
      expect(indexes(events, await scoped({ limit: 10, since: NOW + 2 }))).toEqual([7, 5, 2]);
      expect(
        indexes(events, await scoped({ limit: 10, since: NOW + 1, before: events[7]?.id })),
      ).toEqual([5, 2, 1]);
    });

    it('finds a deep event under each of its ancestors, and a token event under each ancestor token', async () => {
      const storage = await open();
      const deep = auditEvent({ time: NOW, resource: 'a/b/c/d' });
      const token = auditEvent({
        time: NOW + 1,
        type: 'token.created',
        resourceKind: 'token',
        resource: 'x.y.z',
      });
      await storage.appendEvents({ events: [deep, token], deliveries: [] });
      for (const root of ['a', 'a/b', 'a/b/c', 'a/b/c/d']) {
        const seen = await storage.listAuditEvents({ limit: 5, within: [root], tokensBelow: null });
        expect(seen.map((e) => e.id)).toEqual([deep.id]);
      }
      for (const root of ['a/b/c/d/e', 'a/b/cc', 'b']) {
        expect(
          await storage.listAuditEvents({ limit: 5, within: [root], tokensBelow: null }),
        ).toEqual([]);
      }
      for (const name of ['x', 'x.y']) {
        const seen = await storage.listAuditEvents({ limit: 5, within: [], tokensBelow: name });
        expect(seen.map((e) => e.id)).toEqual([token.id]);
      }
      // A token's own events are its ancestors' to read, not its own.
      for (const name of ['x.y.z', 'x.yy', 'y']) {
        expect(await storage.listAuditEvents({ limit: 5, within: [], tokensBelow: name })).toEqual(
          [],
        );
      }
    });
  });

  describe('webhook deliveries', () => {
    async function seeded() {
      const storage = await open();
      const due = [
        delivery({ nextAttemptAt: NOW - 2 }),
        delivery({ nextAttemptAt: NOW - 1 }),
        delivery({ nextAttemptAt: NOW }),
      ];
      const later = delivery({ nextAttemptAt: NOW + MINUTE });
      const done = delivery({ status: 'delivered', nextAttemptAt: NOW - 5 });
      await storage.appendEvents({ events: [], deliveries: [...due, later, done] });
      return { storage, due, later, done };
    }

    it('leases due pending deliveries, earliest first, to one owner until the lease ends', async () => {
      const { storage, due, later } = await seeded();
      const claimed = await storage.claimWebhookDeliveries('a', NOW + MINUTE, NOW, 2);
      expect(claimed).toEqual(
        due.slice(0, 2).map((d) => ({ ...d, leaseOwner: 'a', leaseExpiresAt: NOW + MINUTE })),
      );
      const rest = await storage.claimWebhookDeliveries('b', NOW + MINUTE, NOW, 10);
      expect(rest.map((d) => d.id)).toEqual([due[2]?.id]);
      expect(await storage.claimWebhookDeliveries('c', NOW + MINUTE, NOW, 10)).toEqual([]);
      // When the lease ends (its holder died mid-attempt), another instance takes it.
      const retaken = await storage.claimWebhookDeliveries('c', NOW + 2 * MINUTE, NOW + MINUTE, 10);
      expect(retaken.map((d) => [d.id, d.leaseOwner])).toEqual([
        [due[0]?.id, 'c'],
        [due[1]?.id, 'c'],
        [due[2]?.id, 'c'],
        [later.id, 'c'],
      ]);
    });

    it('records an outcome only for the lease holder, and ends the lease', async () => {
      const { storage, due } = await seeded();
      const [first] = await storage.claimWebhookDeliveries('a', NOW + MINUTE, NOW, 1);
      const outcome = {
        status: 'pending' as const,
        attempts: 1,
        nextAttemptAt: NOW + 5_000,
        lastAttemptAt: NOW,
        lastStatus: 503,
        lastError: 'HTTP 503',
        expiresAt: NEVER,
      };
      expect(await storage.finishWebhookAttempt(first?.id as string, 'b', outcome)).toBe(false);
      expect(await storage.finishWebhookAttempt(first?.id as string, 'a', outcome)).toBe(true);
      expect(await storage.finishWebhookAttempt(first?.id as string, 'a', outcome)).toBe(false);
      const [stored] = await storage.listWebhookDeliveries({ limit: 1 });
      expect(stored).toEqual({ ...due[0], ...outcome, leaseOwner: '', leaseExpiresAt: 0 });
      // Not due again before its next attempt.
      const claimed = await storage.claimWebhookDeliveries('a', NOW + MINUTE, NOW + 4_999, 10);
      expect(claimed.map((d) => d.id)).toEqual([due[1]?.id, due[2]?.id]);
    });

    it('lists by status, in id order, with after', async () => {
      const { storage, due, later, done } = await seeded();
      expect(
        (await storage.listWebhookDeliveries({ limit: 10, status: 'pending' })).map((d) => d.id),
      ).toEqual([...due, later].map((d) => d.id));
      expect(await storage.listWebhookDeliveries({ limit: 10, status: 'delivered' })).toEqual([
        done,
      ]);
      expect(await storage.listWebhookDeliveries({ limit: 10, status: 'failed' })).toEqual([]);
      const page = await storage.listWebhookDeliveries({ limit: 2, after: due[0]?.id as string });
      expect(page.map((d) => d.id)).toEqual([due[1]?.id, due[2]?.id]);
    });

    it('gives each due delivery to exactly one of many concurrent claimers', async () => {
      const storage = await open();
      const many = Array.from({ length: 40 }, () => delivery({ nextAttemptAt: NOW - 1 }));
      await storage.appendEvents({ events: [], deliveries: many });
      const handles = [storage, await connectAgain(storage), await connectAgain(storage)];
      const rounds = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          (handles[i % handles.length] as Storage).claimWebhookDeliveries(
            `w${i}`,
            NOW + MINUTE,
            NOW,
            5,
          ),
        ),
      );
      const claimed = rounds.flat().map((d) => d.id);
      expect(claimed.length).toBe(40);
      expect(new Set(claimed).size).toBe(40);
    });
  });

  describe('purgeExpired(): the audit log and the outbox', () => {
    it('deletes events past their retention and ended deliveries past theirs, never a pending one', async () => {
      const storage = await open();
      const old = auditEvent({ time: NOW - 91 * DAY });
      const kept = auditEvent({ time: NOW - DAY });
      const ended = delivery({ status: 'delivered', expiresAt: NOW - 1 });
      const pending = delivery();
      await storage.appendEvents({ events: [old, kept], deliveries: [ended, pending] });
      expect(await storage.purgeExpired(NOW, 100)).toBe(2);
      expect(await allEvents(storage)).toEqual([kept]);
      expect(await allDeliveries(storage)).toEqual([pending]);
      const raw = readBehind(storage);
      if (raw !== null) {
        expect((await raw.rows('audit_events')).map((row) => row.id)).toEqual([kept.id]);
        expect((await raw.rows('webhook_deliveries')).map((row) => row.id)).toEqual([pending.id]);
      }
    });
  });
}
