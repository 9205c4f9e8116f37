import { readFileSync } from 'node:fs';
import { defineConfig } from 'tsup';

/** The version of the package being built (tsup runs in its folder). */
const { version } = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };

// Shared by every package's `build` script (`tsup --config ../../tsup.config.ts <entries>`),
// which builds the JavaScript; `scripts/declarations.mjs` then writes the declarations with
// tsc, one per source file (tsup's bundled declarations could not parse the subpath entries).
export default defineConfig({
  format: ['esm'],
  target: 'node20',
  clean: true,
  dts: false,
  tsconfig: '../../tsconfig.build.json',
  // The private SQL layer is part of each adapter's bundle: never a published dependency.
  noExternal: ['@keyway/sql'],
  // …bundled from its TypeScript source, so it needs no build of its own.
  esbuildOptions(options) {
    options.conditions = ['@keyway/source'];
  },
  // Where a package states its own version (the OpenAPI document's `info.version`).
  define: { __KEYWAY_VERSION__: JSON.stringify(version) },
});
