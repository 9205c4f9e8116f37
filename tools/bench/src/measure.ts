import { Bench } from 'tinybench';

/** What one measured function did: throughput and per-call latency. */
export interface Measured {
  /** Calls per second (mean over the samples). */
  opsPerSecond: number;
  /** Median and 99th percentile of one call, microseconds. */
  p50: number;
  p99: number;
}

/** A subject measured against its floor: the medians of the rounds, and their ratio. */
export interface Compared {
  subject: Measured;
  floor: Measured;
  /** The subject's median throughput over the floor's (medians over the rounds). */
  ratio: number;
}

/** How long each function runs per round, and how many rounds. */
export interface Budget {
  timeMs: number;
  rounds: number;
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
};

/** Collects garbage now, when the runner allows it (`--expose-gc`), so that the garbage of
 * what ran before is not collected during the next measurement. */
const collect = (globalThis as { gc?: () => void }).gc ?? (() => {});

/** Measures one function with tinybench: one sample per call. */
export async function measure(fn: () => unknown, timeMs: number): Promise<Measured> {
  collect();
  const bench = new Bench({ time: timeMs, warmupTime: Math.min(200, timeMs), throws: true });
  bench.add('subject', fn as () => Promise<void>);
  await bench.run();
  const result = bench.tasks[0]?.result;
  if (result?.state !== 'completed') throw new Error(`benchmark ended as ${result?.state}`);
  return {
    opsPerSecond: result.throughput.mean,
    p50: result.latency.p50 * 1000,
    p99: result.latency.p99 * 1000,
  };
}

/**
 * Measures a subject and its floor in alternating rounds (so drift of the machine hits
 * both alike) and reports the medians of the rounds, and the ratio of those medians.
 */
export async function compare(
  subject: () => unknown,
  floor: () => unknown,
  budget: Budget,
): Promise<Compared> {
  const subjects: Measured[] = [];
  const floors: Measured[] = [];
  for (let round = 0; round < budget.rounds; round++) {
    floors.push(await measure(floor, budget.timeMs));
    subjects.push(await measure(subject, budget.timeMs));
  }
  const pick = (all: Measured[]): Measured => ({
    opsPerSecond: median(all.map((m) => m.opsPerSecond)),
    p50: median(all.map((m) => m.p50)),
    p99: median(all.map((m) => m.p99)),
  });
  const measured = pick(subjects);
  const floored = pick(floors);
  // Medians first: a burst of noise on this machine hits one measurement, not the ratio.
  return { subject: measured, floor: floored, ratio: measured.opsPerSecond / floored.opsPerSecond };
}

export { median };
