import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

/**
 * The commit the hand-out goal was set against: main when the goal was set (see
 * docs/benchmarks.md, "Audited reads"). `KEYWAY_BENCH_SINCE` names another.
 */
export const HAND_OUT_GOAL_COMMIT = '3bf617c';

/** Medians of `pnpm bench:since`: hand-outs a second and CPU µs a hand-out. */
interface SinceFigures {
  rate: number;
  cpu: number;
}

/** This tree's hand-outs against an earlier commit's, or why they were not measured. */
export type SinceResult =
  | { commit: string; rounds: number; now: SinceFigures; then: SinceFigures }
  | { commit: string; skipped: string };

/**
 * The hand-out goal as it was set: credential hand-outs on SQLite under 32 callers
 * against the throughput of the code it was filed against, that code run on this machine
 * in turns with this tree's (`since.mjs --json`). Not measured in a smoke run, nor where
 * the commit is not in the clone (a shallow one).
 */
export function benchSince(options: {
  repo: string;
  commit: string;
  rounds: number;
  smoke: boolean;
}): SinceResult {
  const { repo, commit, rounds } = options;
  if (options.smoke) return { commit, skipped: 'not measured in a smoke run' };
  const script = join(repo, 'tools', 'bench', 'since.mjs');
  const run = spawnSync(process.execPath, [script, commit, '--rounds', String(rounds), '--json'], {
    cwd: repo,
    encoding: 'utf8',
  });
  const last = run.stdout.trim().split('\n').at(-1) ?? '';
  if (run.status !== 0 || !last.startsWith('{')) {
    const why = `${run.stderr}\n${run.stdout}`.trim().split('\n').at(0) ?? '';
    return { commit, skipped: `not measured: ${why || `exit ${run.status}`}` };
  }
  return JSON.parse(last) as SinceResult;
}
