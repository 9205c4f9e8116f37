#!/usr/bin/env node
// `pnpm keyway <command>` from a checkout: builds the CLI (and the packages it uses) when
// its build is missing or older than a source file, then runs it with the arguments given.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const bin = join(root, 'packages', 'cli', 'dist', 'bin.js');
const PACKAGES = ['core', 'http', 'cli', 'store-memory', 'store-sqlite', 'store-postgres', 'sql'];

/** The newest modification time of the files under a folder, in ms. */
function newest(folder) {
  let latest = 0;
  for (const entry of readdirSync(folder, { withFileTypes: true })) {
    const path = join(folder, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return latest;
}

const sources = Math.max(...PACKAGES.map((name) => newest(join(root, 'packages', name, 'src'))));
if (!existsSync(bin) || statSync(bin).mtimeMs < sources) {
  process.stderr.write('keyway: building the CLI from this checkout…\n');
  const built = spawnSync('npx', ['-y', 'pnpm@10.34.9', '--filter', '@keyway/cli...', 'build'], {
    cwd: root,
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, KEYWAY_BUILD_DTS: '0' },
  });
  if (built.status !== 0) process.exit(built.status ?? 1);
}
const child = spawn(process.execPath, [bin, ...process.argv.slice(2)], { stdio: 'inherit' });
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => process.exit(code ?? (signal === null ? 1 : 128)));
