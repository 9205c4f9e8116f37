import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ScenarioResult } from './harness.js';
import type { Run } from './scenarios.js';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const interop = join(repo, 'docs', 'interop.md');
const START = '<!-- conformance-results:start -->';
const END = '<!-- conformance-results:end -->';

/** The column of a run: the suite release, and the revision it ran at when one was given. */
const label = (run: Run) =>
  run.specVersion === null
    ? run.suite === '0.1.16'
      ? run.suite
      : `${run.suite} (scenario's own wire)`
    : `${run.suite} @ ${run.specVersion}`;

/**
 * Writes the results of a complete run (scenario × suite release and wire → pass or fail)
 * between the markers of docs/interop.md. Nothing else of the file changes, and an equal
 * result leaves it byte for byte as it was.
 */
export function writeResults(
  runs: readonly Run[],
  results: ReadonlyMap<Run, ScenarioResult>,
  viaGateway: ReadonlyMap<Run, ScenarioResult>,
): void {
  if (!existsSync(interop)) return;
  const columns = [...new Set(runs.map((run) => label(run)))];
  const scenarios = [...new Set(runs.map((run) => run.scenario))];
  const cell = new Map<string, string>();
  const passes = (result: ScenarioResult | undefined) =>
    result !== undefined && result.failing.length === 0 && result.exitCode === 0;
  for (const run of runs) {
    const gateway = passes(viaGateway.get(run));
    // A DPoP-bound token is never handed out: those runs are the gateway's only.
    const direct = run.gatewayOnly === true ? gateway : passes(results.get(run));
    cell.set(
      `${run.scenario}|${label(run)}`,
      direct && gateway
        ? run.gatewayOnly === true
          ? 'pass (gateway)'
          : 'pass'
        : direct
          ? 'pass (gateway **FAIL**)'
          : '**FAIL**',
    );
  }
  const lines = [
    `| Scenario | ${columns.join(' | ')} |`,
    `| --- | ${columns.map(() => ':---:').join(' | ')} |`,
    ...scenarios.map(
      (scenario) =>
        `| \`${scenario}\` | ${columns.map((column) => cell.get(`${scenario}|${column}`) ?? '—').join(' | ')} |`,
    ),
  ];
  const passed = [...cell.values()].filter(
    (value) => value.startsWith('pass') && !value.includes('FAIL'),
  ).length;
  const block = [
    START,
    '',
    `${passed} of ${cell.size} runs pass, each twice: the client holding the token Keyway hands out, and the client talking to Keyway's MCP gateway, holding none; "pass (gateway)": the DPoP scenarios, whose token is never handed out (— : the scenario does not exist in that release or revision).`,
    '',
    ...lines,
    '',
    END,
  ].join('\n');
  const text = readFileSync(interop, 'utf8');
  const start = text.indexOf(START);
  const end = text.indexOf(END);
  if (start < 0 || end < start) return;
  // Laid out as the repository's formatter lays out Markdown, so a run with the same
  // results leaves the file as it was.
  const biome = createRequire(join(repo, 'package.json')).resolve('@biomejs/biome/bin/biome');
  const formatted = spawnSync(process.execPath, [biome, 'format', `--stdin-file-path=${interop}`], {
    input: `${text.slice(0, start)}${block}${text.slice(end + END.length)}`,
    encoding: 'utf8',
  });
  if (formatted.status !== 0) throw new Error(`biome format failed: ${formatted.stderr}`);
  if (formatted.stdout !== text) writeFileSync(interop, formatted.stdout);
}
