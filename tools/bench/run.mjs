#!/usr/bin/env node
// `pnpm bench [--smoke] [--out file]`: bundles the benchmarks from their TypeScript sources
// (see bundle.mjs) and runs them.
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleBench } from './bundle.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const outdir = join(here, '.build');
await bundleBench({
  root: join(here, '..', '..'),
  entryPoints: [
    join(here, 'src', 'main.ts'),
    join(here, 'src', 'reference-server.ts'),
    join(here, 'src', 'mcp-upstream.ts'),
    join(here, 'src', 'proxy-hop.ts'),
    join(here, 'src', 'sdk-relay.ts'),
  ],
  outdir,
});
const result = spawnSync(
  process.execPath,
  ['--expose-gc', join(outdir, 'main.js'), ...process.argv.slice(2)],
  {
    stdio: 'inherit',
  },
);
process.exit(result.status ?? 1);
