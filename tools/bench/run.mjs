#!/usr/bin/env node
// `pnpm bench [--smoke] [--out file]`: bundles the benchmarks from their TypeScript sources
// (the workspace packages included, as their builds would be: no source transform at run
// time) and runs them. Drivers and the load generator stay external.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
const outdir = join(here, '.build');
await build({
  entryPoints: [
    join(here, 'src', 'main.ts'),
    join(here, 'src', 'reference-server.ts'),
    join(here, 'src', 'mcp-upstream.ts'),
  ],
  outdir,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  conditions: ['@keyway/source'],
  // As tsup defines it in every package's build.
  define: {
    __KEYWAY_VERSION__: JSON.stringify(
      JSON.parse(readFileSync(join(here, '../../packages/http/package.json'), 'utf8')).version,
    ),
  },
  external: [
    'better-sqlite3',
    'pg',
    'autocannon',
    'tinybench',
    'hono',
    '@hono/node-server',
    'esbuild',
  ],
  // CommonJS dependencies bundled into an ES module still call require().
  banner: {
    js: "import { createRequire as __keywayRequire } from 'node:module'; const require = __keywayRequire(import.meta.url);",
  },
  logLevel: 'warning',
});
const result = spawnSync(
  process.execPath,
  ['--expose-gc', join(outdir, 'main.js'), ...process.argv.slice(2)],
  {
    stdio: 'inherit',
  },
);
process.exit(result.status ?? 1);
