// Runs the long form of one reliability harness and writes its figures into
// docs/reliability.md, between the harness's markers:
//   node scripts/reliability.mjs fuzz|crash|race|soak
// (`pnpm fuzz`, `pnpm crash`, `pnpm race`, `pnpm soak`). The short forms run in the test
// suite and write nothing.
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const HARNESSES = {
  fuzz: {
    project: 'http',
    file: 'test/fuzz.test.ts',
    env: { KEYWAY_FUZZ_RUNS: '20000' },
    line: /^fuzz: \d+ endpoints.*$/gm,
  },
  crash: {
    project: 'cli',
    file: 'test/crash.test.ts',
    env: { KEYWAY_CRASH_KILLS: '100' },
    line: /^crash \(.*$/gm,
  },
  race: {
    project: 'cli',
    file: 'test/race.test.ts',
    env: { KEYWAY_RACE_ROUNDS: '50' },
    line: /^race \(.*$/gm,
  },
  soak: {
    project: 'cli',
    file: 'test/soak.test.ts',
    env: { KEYWAY_SOAK_REQUESTS: '1000000' },
    line: /^soak: .*$/gm,
    check: heapHeld,
  },
};

/** What caches may take as they settle after warm-up (statements, counters, JIT metadata). */
const SETTLING_MIB = 4;
/**
 * Bytes a request may leave on the heap after a full GC before the soak calls it a leak:
 * below the smallest thing a leak keeps (a Map entry with its key), so a leak of one object
 * per request crosses the bound, and no amount of load on the machine does (both heaps are
 * read after full collections with no request in flight, the end one the least of three).
 */
const LEAK_BYTES = 64;

/** The soak's heap held: why not, or `null`. */
function heapHeld(line) {
  const requests = /^soak: (\d+) requests measured/.exec(line);
  const heap = /heap after GC ([\d.]+) → ([\d.]+) MiB/.exec(line);
  if (requests === null || heap === null) return 'the soak line has no request count or heap';
  const grown = Number(heap[2]) - Number(heap[1]);
  const bound = SETTLING_MIB + (LEAK_BYTES * Number(requests[1])) / 1024 / 1024;
  return grown < bound
    ? null
    : `the heap grew ${grown.toFixed(1)} MiB after GC, more than ${bound.toFixed(1)} MiB (${SETTLING_MIB} MiB and ${LEAK_BYTES} B a request): a leak`;
}

const name = process.argv[2];
const harness = HARNESSES[name];
if (harness === undefined) {
  console.error(`usage: node scripts/reliability.mjs ${Object.keys(HARNESSES).join('|')}`);
  process.exit(2);
}
const repo = fileURLToPath(new URL('..', import.meta.url));
const env = { ...process.env, ...harness.env };
for (const key of Object.keys(harness.env)) if (process.env[key]) env[key] = process.env[key];
let output = '';
const child = spawn(
  process.execPath,
  [
    'node_modules/vitest/vitest.mjs',
    'run',
    '--project',
    harness.project,
    '--testTimeout',
    '3600000',
    harness.file,
  ],
  { cwd: repo, env, stdio: ['ignore', 'pipe', 'inherit'] },
);
child.stdout.on('data', (chunk) => {
  process.stdout.write(chunk);
  output += chunk.toString();
});
const code = await new Promise((resolve) => child.on('exit', resolve));
// Without colours: the harness's lines as printed.
const plain = output.replaceAll(String.fromCharCode(27), '').replace(/\[[0-9;]*m/g, '');
const lines = plain.match(harness.line) ?? [];
if (code !== 0 || lines.length === 0) {
  console.error(`\n${name}: the harness failed (exit ${code}); docs/reliability.md is unchanged`);
  process.exit(code === 0 ? 1 : code);
}
for (const line of lines) {
  const problem = harness.check?.(line) ?? null;
  if (problem !== null) {
    console.error(`\n${name}: ${problem}; docs/reliability.md is unchanged`);
    process.exit(1);
  }
}
const doc = fileURLToPath(new URL('../docs/reliability.md', import.meta.url));
const text = readFileSync(doc, 'utf8');
const start = `<!-- figures:${name} -->`;
const end = `<!-- /figures:${name} -->`;
const from = text.indexOf(start);
const to = text.indexOf(end);
if (from < 0 || to < from) {
  console.error(`docs/reliability.md has no ${start} … ${end} section`);
  process.exit(1);
}
const day = new Date().toISOString().slice(0, 10);
const figures = `${start}\n\nLast run ${day}, \`pnpm ${name}\`, on ${process.version}:\n\n${lines.map((line) => `- ${line.trim()}`).join('\n')}\n\n`;
writeFileSync(doc, text.slice(0, from) + figures + text.slice(to));
console.log(`\n${name}: figures written to docs/reliability.md`);
