#!/usr/bin/env node
// `pnpm tarballs [destination]`: builds the published packages (with declarations) and packs
// each with pnpm (workspace versions rewritten, publishConfig applied) into `destination`
// (default ./packs). `npm install -g --install-strategy=hoisted packs/*.tgz` then puts
// `keyway` on the PATH (README, "Operating from the command line").
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const destination = resolve(process.argv[2] ?? join(root, 'packs'));
const PNPM = ['-y', 'pnpm@10.34.9'];
/** The packages published to npm (the packaging test reads the same list). */
const PUBLIC = JSON.parse(readFileSync(join(root, 'scripts', 'public-packages.json'), 'utf8'));

mkdirSync(destination, { recursive: true });
execFileSync('npx', [...PNPM, '--filter', './packages/**', 'build'], {
  cwd: root,
  env: { ...process.env, KEYWAY_BUILD_DTS: '1' },
  stdio: ['ignore', 'ignore', 'inherit'],
});
for (const name of PUBLIC) {
  execFileSync('npx', [...PNPM, 'pack', '--pack-destination', destination], {
    cwd: join(root, 'packages', name),
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}
process.stdout.write(`packed ${PUBLIC.length} packages into ${destination}\n`);
