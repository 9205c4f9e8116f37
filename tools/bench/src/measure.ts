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

/** Throughput of `fn` kept `inFlight` calls deep for `timeMs` (a warm-up of the same length first). */
async function throughputInFlight(
  fn: () => Promise<unknown>,
  inFlight: number,
  timeMs: number,
): Promise<number> {
  const run = async (ms: number): Promise<number> => {
    const end = performance.now() + ms;
    let calls = 0;
    const lane = async () => {
      while (performance.now() < end) {
        await fn();
        calls += 1;
      }
    };
    const started = performance.now();
    await Promise.all(Array.from({ length: inFlight }, lane));
    return calls / ((performance.now() - started) / 1000);
  };
  collect();
  await run(Math.min(200, timeMs));
  return run(timeMs);
}

/** A subject against its floor, each kept `inFlight` calls deep. */
export interface ComparedInFlight {
  inFlight: number;
  /** Median calls per second over the rounds. */
  subject: number;
  floor: number;
  /** Median over the rounds of each round's subject / floor. */
  ratio: number;
  /** Each round's subject / floor, in order: how much one round says. */
  rounds: number[];
}

/**
 * {@link compare} for a subject that waits on a server (a database): `inFlight` calls at a
 * time, as a server's concurrent requests make them, in alternating rounds.
 */
export async function compareInFlight(
  subject: () => Promise<unknown>,
  floor: () => Promise<unknown>,
  inFlight: number,
  budget: Budget,
): Promise<ComparedInFlight> {
  const subjects: number[] = [];
  const floors: number[] = [];
  for (let round = 0; round < budget.rounds; round++) {
    floors.push(await throughputInFlight(floor, inFlight, budget.timeMs));
    subjects.push(await throughputInFlight(subject, inFlight, budget.timeMs));
  }
  const rounds = subjects.map((rate, round) => rate / (floors[round] as number));
  return {
    inFlight,
    subject: median(subjects),
    floor: median(floors),
    ratio: median(rounds),
    rounds,
  };
}

export { median };
