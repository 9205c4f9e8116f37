import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rootPrincipal, type Storage } from '@keyway/core';
import type { EventWrite } from '@keyway/core/storage';
import { HAND_OUT_CONNECTION, handOutWorld } from './hand-out-world.js';
import { median } from './measure.js';

/** Hand-outs a second, with the audit rows grouped, and with one commit per row. */
export interface HandOutResult {
  callers: number;
  grouped: number;
  perRow: number;
  /** Commits per 1,000 hand-outs, grouped. */
  commitsPerThousand: number;
}

/**
 * A storage that counts `appendEvents` calls, and with `split` commits each event of a call
 * in a transaction of its own: the audit of reads as it was before group commit.
 */
function counting(storage: Storage, split: boolean): { storage: Storage; commits: () => number } {
  let commits = 0;
  const wrapped = new Proxy(storage, {
    get(target, property, receiver) {
      if (property === 'appendEvents') {
        return async (write: EventWrite) => {
          if (!split) {
            commits++;
            return target.appendEvents(write);
          }
          for (const event of write.events) {
            commits++;
            await target.appendEvents({
              events: [event],
              deliveries: write.deliveries.filter((delivery) => delivery.eventId === event.id),
            });
          }
        };
      }
      const value = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  }) as Storage;
  return { storage: wrapped, commits: () => commits };
}

/**
 * Credential hand-outs in process on SQLite: `callers` concurrent callers,
 * each hand-out's audit row committed before its token is returned; the rows of concurrent
 * hand-outs share a commit, against one commit per row.
 */
export async function benchHandOuts(options: {
  callers: number;
  perCaller: number;
  rounds: number;
}): Promise<HandOutResult> {
  const dir = mkdtempSync(join(tmpdir(), 'keyway-bench-handouts-'));
  try {
    const world = await handOutWorld(dir);
    const run = async (split: boolean) => {
      let counted: ReturnType<typeof counting> | undefined;
      const broker = world.broker((storage) => {
        counted = counting(storage, split);
        return counted.storage;
      });
      const root = rootPrincipal();
      const started = performance.now();
      await Promise.all(
        Array.from({ length: options.callers }, async () => {
          for (let call = 0; call < options.perCaller; call++) {
            await broker.connections.credentials(root, HAND_OUT_CONNECTION);
          }
        }),
      );
      const seconds = (performance.now() - started) / 1000;
      const handOuts = options.callers * options.perCaller;
      const commits = (counted as ReturnType<typeof counting>).commits();
      await broker.close();
      return { rate: handOuts / seconds, commitsPerThousand: (commits / handOuts) * 1000 };
    };
    await run(false);
    await run(true);
    const grouped: number[] = [];
    const perRow: number[] = [];
    const commits: number[] = [];
    for (let round = 0; round < options.rounds; round++) {
      const a = await run(false);
      grouped.push(a.rate);
      commits.push(a.commitsPerThousand);
      perRow.push((await run(true)).rate);
    }
    return {
      callers: options.callers,
      grouped: median(grouped),
      perRow: median(perRow),
      commitsPerThousand: median(commits),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
