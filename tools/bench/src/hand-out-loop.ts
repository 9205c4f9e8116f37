// The hand-out loop of `since.mjs`: callers hand out one connection's token in process on
// SQLite, as the code of the tree it is bundled in does it (one commit per audit row before
// group commit, grouped since), with hand-out-world.ts, so one file measures both trees.
// Prints one JSON line: the medians of the rounds, in hand-outs a second and in the process's
// CPU time a hand-out (which the machine's other load moves less than the wall clock).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rootPrincipal } from '@keyway/core';
import { HAND_OUT_CONNECTION, handOutWorld } from './hand-out-world.js';

const [callers = 32, perCaller = 500, rounds = 5] = process.argv.slice(2).map(Number);
const dir = mkdtempSync(join(tmpdir(), 'keyway-hand-out-loop-'));
try {
  const broker = (await handOutWorld(dir)).broker();
  const root = rootPrincipal();
  const rates: number[] = [];
  const cpu: number[] = [];
  // One round unmeasured: the code warms up and the file's pages are read once.
  for (let round = 0; round <= rounds; round++) {
    const started = performance.now();
    const cpuStarted = process.cpuUsage();
    await Promise.all(
      Array.from({ length: callers }, async () => {
        for (let call = 0; call < perCaller; call++) {
          await broker.connections.credentials(root, HAND_OUT_CONNECTION);
        }
      }),
    );
    if (round > 0) {
      const used = process.cpuUsage(cpuStarted);
      rates.push((callers * perCaller) / ((performance.now() - started) / 1000));
      cpu.push((used.user + used.system) / (callers * perCaller));
    }
  }
  await broker.close();
  const median = (values: number[]) =>
    [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  console.log(
    JSON.stringify({ handOutsPerSecond: median(rates), cpuMicrosPerHandOut: median(cpu) }),
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
