#!/usr/bin/env node
// Runs the whole Vitest suite and ends with the plain line "N passed, N failed", read from
// Vitest's JSON report, so a run that executed no test is visible. Extra arguments go to
// Vitest (e.g. `pnpm test --project core`).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);
const vitest = join(dirname(require.resolve('vitest/package.json')), 'vitest.mjs');
const report = join('.test-results', 'vitest.json');
mkdirSync('.test-results', { recursive: true });
rmSync(report, { force: true });

const run = spawnSync(
  process.execPath,
  [
    vitest,
    'run',
    '--reporter=default',
    '--reporter=json',
    `--outputFile.json=${report}`,
    ...process.argv.slice(2),
  ],
  { stdio: 'inherit' },
);

if (!existsSync(report)) {
  console.log('0 passed, 0 failed');
  console.error('test: Vitest wrote no report');
  process.exit(run.status || 1);
}
const result = JSON.parse(readFileSync(report, 'utf8'));
// The tests as Vitest counts them ("Tests  1 failed | 1549 passed"). A file that failed
// outside any test (an import error, a failing hook) is not a test: it is named on its
// own line, and the exit status still says the run failed.
const passed = result.numPassedTests ?? 0;
const failed = result.numFailedTests ?? 0;
const skipped = (result.numPendingTests ?? 0) + (result.numTodoTests ?? 0);
const brokenFiles = (result.testResults ?? []).filter(
  (file) =>
    file.status === 'failed' &&
    (file.assertionResults ?? []).every((test) => test.status !== 'failed'),
);
for (const file of brokenFiles) {
  console.error(
    `test: ${file.name} failed outside its tests: ${String(file.message).split('\n')[0]}`,
  );
}
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
if (passed === 0) {
  console.error('test: no test ran');
  process.exit(1);
}
process.exit(run.status ?? 1);
