#!/usr/bin/env node
// `pnpm bench:since <commit> [--rounds N]`: credential hand-outs in process on SQLite
// (32 callers), as this tree does them and as the tree of <commit> did, in alternating
// runs on this machine — for a goal set against the throughput of an earlier commit
// (#27: hand-outs at 5× their throughput when it was filed). The earlier tree is checked
// out as a git work tree under the temporary directory and installed once; both are
// bundled from their own sources with the same loop (src/hand-out-loop.ts and
// src/hand-out-world.ts, copied into the earlier tree). `--json` ends with one JSON line
// (`pnpm bench` runs it so for #27's commit).
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleBench } from './bundle.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, '..', '..');
const args = process.argv.slice(2);
const json = args.includes('--json');
const roundsAt = args.indexOf('--rounds');
const rounds = roundsAt === -1 ? 3 : Number(args[roundsAt + 1]);
const commits = args.filter(
  (arg, index) => !arg.startsWith('--') && (roundsAt === -1 || index !== roundsAt + 1),
);
const unknown = args.filter(
  (arg) => arg.startsWith('--') && arg !== '--rounds' && arg !== '--json',
);
const usage = 'usage: pnpm bench:since <commit> [--rounds N] [--json]';
if (unknown.length > 0) {
  console.error(`bench:since: unknown option ${unknown[0]} (${usage})`);
  process.exit(2);
}
if (!Number.isInteger(rounds) || rounds < 1) {
  console.error(
    `bench:since: --rounds ${JSON.stringify(args[roundsAt + 1] ?? '')} is not a whole number of at least 1 (${usage})`,
  );
  process.exit(2);
}
if (commits.length !== 1) {
  console.error(`bench:since: name one earlier commit (${usage})`);
  process.exit(2);
}
const [commit] = commits;

function run(command, commandArgs, cwd) {
  const result = spawnSync(command, commandArgs, { cwd, encoding: 'utf8' });
  if (result.status !== 0) {
    throw new Error(
      `${command} ${commandArgs.join(' ')} failed in ${cwd}:\n${result.stderr || result.stdout}`,
    );
  }
  return result.stdout.trim();
}

const resolved = spawnSync('git', ['rev-parse', '--verify', '--quiet', `${commit}^{commit}`], {
  cwd: repo,
  encoding: 'utf8',
});
if (resolved.status !== 0) {
  console.error(
    `bench:since: "${commit}" is not a commit of this clone (a shallow clone has no history: git fetch --unshallow)`,
  );
  process.exit(2);
}
const sha = resolved.stdout.trim();
const earlier = join(tmpdir(), `keyway-since-${sha.slice(0, 12)}`);
if (!existsSync(join(earlier, 'node_modules'))) {
  console.log(`bench:since: checking out ${sha.slice(0, 12)} in ${earlier} and installing it`);
  if (!existsSync(earlier)) run('git', ['worktree', 'add', '--detach', earlier, sha], repo);
  run('npx', ['-y', 'pnpm@10.34.9', 'install', '--frozen-lockfile', '--prefer-offline'], earlier);
}

const loops = {};
for (const [name, root] of [
  ['this tree', repo],
  [sha.slice(0, 12), earlier],
]) {
  const source = join(root, 'tools', 'bench', 'src', 'hand-out-loop.ts');
  if (root !== repo) {
    for (const file of ['hand-out-loop.ts', 'hand-out-world.ts']) {
      copyFileSync(join(here, 'src', file), join(root, 'tools', 'bench', 'src', file));
    }
  }
  const outdir = join(root, 'tools', 'bench', '.build', 'since');
  await bundleBench({ root, entryPoints: [source], outdir });
  loops[name] = join(outdir, 'hand-out-loop.js');
}

const figures = Object.fromEntries(Object.keys(loops).map((name) => [name, []]));
for (let round = 0; round < rounds; round++) {
  // Alternating, so a change in the machine's load falls on both.
  for (const [name, loop] of Object.entries(loops)) {
    const line = run(process.execPath, [loop], here).split('\n').at(-1);
    figures[name].push(JSON.parse(line));
  }
}
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const summary = Object.entries(figures).map(([name, runs]) => {
  const rates = runs.map((figure) => figure.handOutsPerSecond);
  const cpu = runs.map((figure) => figure.cpuMicrosPerHandOut);
  console.log(
    `${name}: ${rates.map((value) => Math.round(value)).join(', ')} hand-outs/s; ${cpu.map((value) => value.toFixed(1)).join(', ')} µs of CPU each`,
  );
  return { rate: median(rates), cpu: median(cpu) };
});
const [now, then] = summary;
// `--json`: one last line for `pnpm bench` to read (its row of #27 item 3).
if (json) console.log(JSON.stringify({ commit: sha, rounds, now, then }));
else
  console.log(
    `hand-outs in process on SQLite, 32 callers, medians of ${rounds}: ${Math.round(now.rate)}/s now, ${Math.round(then.rate)}/s at ${sha.slice(0, 12)} (${(now.rate / then.rate).toFixed(1)}×); ${now.cpu.toFixed(1)} µs of CPU a hand-out now, ${then.cpu.toFixed(1)} µs then (${(then.cpu / now.cpu).toFixed(1)}×)`,
  );
