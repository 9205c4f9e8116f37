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
  /** Subject throughput over floor throughput, median of the rounds' ratios. */
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

/** Measures one function with tinybench: one sample per call. */
export async function measure(fn: () => unknown, timeMs: number): Promise<Measured> {
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
 * both alike) and reports the medians: the ratio is the median of the rounds' ratios.
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
  return {
    subject: pick(subjects),
    floor: pick(floors),
    ratio: median(subjects.map((m, i) => m.opsPerSecond / (floors[i] as Measured).opsPerSecond)),
  };
}

export { median };
