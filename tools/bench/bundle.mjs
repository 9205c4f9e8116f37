// How the benchmarks are bundled from their TypeScript sources: the workspace packages
// included, as their builds would be (no source transform at run time); drivers and the
// load generator stay external. `root` is the repository whose sources are bundled (this
// one, or an earlier commit's work tree for `since.mjs`).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';

export async function bundleBench({ root, entryPoints, outdir }) {
  await build({
    entryPoints,
    outdir,
    absWorkingDir: join(root, 'tools', 'bench'),
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    conditions: ['@keyway/source'],
    // As tsup defines it in every package's build.
    define: {
      __KEYWAY_VERSION__: JSON.stringify(
        JSON.parse(readFileSync(join(root, 'packages', 'http', 'package.json'), 'utf8')).version,
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
}
