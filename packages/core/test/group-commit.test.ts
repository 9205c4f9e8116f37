import { memoryStorage } from '@keyway/store-memory';
import { describe, expect, it, vi } from 'vitest';
import { EventLog } from '../src/events/log.js';
import type { KeywayEvent } from '../src/index.js';
import type { Storage } from '../src/storage/contract.js';
import type { EventWrite } from '../src/storage/record-types.js';

/**
 * The audit rows of reads (a hand-out, a secret read) must be committed before the value
 * leaves (docs/api.md §11); concurrent reads share one commit.
 */
describe('group commit of the audit rows of reads', () => {
  /** A memory storage whose `appendEvents` waits for `open()` and may fail once. */
  function gatedStorage() {
    const base = memoryStorage();
    const commits: string[][] = [];
    let release: () => void = () => {};
    let gate: Promise<void> | null = null;
    let failure: Error | null = null;
    const storage = new Proxy(base, {
      get(target, property, receiver) {
        if (property === 'appendEvents') {
          return async (write: EventWrite) => {
            commits.push(write.events.map((event) => event.resource));
            if (gate !== null) await gate;
            if (failure !== null) {
              const error = failure;
              failure = null;
              throw error;
            }
            return target.appendEvents(write);
          };
        }
        const value = Reflect.get(target, property, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    }) as Storage;
    return {
      storage,
      commits,
      close() {
        gate = new Promise((resolve) => {
          release = resolve;
        });
      },
      open() {
        gate = null;
        release();
      },
      failNext(error: Error) {
        failure = error;
      },
    };
  }

  function log(storage: Storage, published: KeywayEvent[]) {
    let time = Date.UTC(2026, 10, 24);
    return new EventLog({
      storage,
      now: () => time++,
      randomBytes: (length) => crypto.getRandomValues(new Uint8Array(length)),
      retentionDays: 90,
      webhooks: [],
      onEvent: (event) => {
        published.push(event);
      },
      onError: (error) => {
        throw error;
      },
    });
  }

  const read = (resource: string) => ({
    type: 'secret.read' as const,
    actor: 'root',
    resource,
  });

  it('commits the rows that arrive while a commit is in flight together, in order, and resolves each after its commit', async () => {
    const gated = gatedStorage();
    const published: KeywayEvent[] = [];
    const events = log(gated.storage, published);
    gated.close();
    const settled: string[] = [];
    const first = events.append(read('acme/a')).then(() => settled.push('a'));
    // The first commit is under way (and held) before the others arrive.
    await vi.waitFor(() => expect(gated.commits).toHaveLength(1));
    const rest = ['b', 'c', 'd'].map((name) =>
      events.append(read(`acme/${name}`)).then(() => settled.push(name)),
    );
    // Nothing is released before its row is committed.
    await Promise.resolve();
    expect(settled).toEqual([]);
    gated.open();
    await Promise.all([first, ...rest]);
    expect(gated.commits).toEqual([['acme/a'], ['acme/b', 'acme/c', 'acme/d']]);
    expect(settled).toEqual(['a', 'b', 'c', 'd']);
    expect(published.map((event) => event.resource)).toEqual([
      'acme/a',
      'acme/b',
      'acme/c',
      'acme/d',
    ]);
    const stored = await gated.storage.listAuditEvents({ limit: 10 });
    expect(stored.map((event) => event.resource).sort()).toEqual([
      'acme/a',
      'acme/b',
      'acme/c',
      'acme/d',
    ]);
  });

  it('commits the reads of one turn of the event loop together, and a lone read alone', async () => {
    const gated = gatedStorage();
    const events = log(gated.storage, []);
    await Promise.all([events.append(read('acme/a')), events.append(read('acme/b'))]);
    await events.append(read('acme/c'));
    await events.append(read('acme/d'));
    expect(gated.commits).toEqual([['acme/a', 'acme/b'], ['acme/c'], ['acme/d']]);
  });

  it('fails every read of a failed commit, publishes none of them, and commits the next batch', async () => {
    const gated = gatedStorage();
    const published: KeywayEvent[] = [];
    const events = log(gated.storage, published);
    gated.close();
    const first = events.append(read('acme/a'));
    first.catch(() => {});
    await vi.waitFor(() => expect(gated.commits).toHaveLength(1));
    const second = events.append(read('acme/b'));
    const third = events.append(read('acme/c'));
    gated.failNext(new Error('disk full'));
    gated.open();
    await expect(first).rejects.toThrow('disk full');
    await expect(Promise.all([second, third])).resolves.toEqual([undefined, undefined]);
    expect(gated.commits).toEqual([['acme/a'], ['acme/b', 'acme/c']]);
    expect(published.map((event) => event.resource)).toEqual(['acme/b', 'acme/c']);
  });
});
