import { readFileSync } from 'node:fs';
import { defineConfig } from 'tsup';

/**
 * The version of the package being built (tsup runs in its folder). The examples are private
 * and carry none: they import Keyway's packages, which state their own.
 */
const { version } = JSON.parse(readFileSync('package.json', 'utf8')) as { version?: string };

// Shared by every package's `build` script (`tsup --config ../../tsup.config.ts <entries>`),
// which builds the JavaScript; `scripts/declarations.mjs` then writes the declarations with
// tsc, one per source file (tsup's bundled declarations could not parse the subpath entries).
export default defineConfig({
  format: ['esm'],
  target: 'node20',
  clean: true,
  dts: false,
  tsconfig: '../../tsconfig.build.json',
  // The private SQL layer is part of each adapter's bundle: never a published dependency;
  // likewise the examples' shared notes app, which exists only as TypeScript source.
  noExternal: ['@keyway/sql', '@keyway/example-notes-app'],
  // …bundled from its TypeScript source, so it needs no build of its own.
  esbuildOptions(options) {
    options.conditions = ['@keyway/source'];
  },
  // Where a package states its own version (the OpenAPI document's `info.version`).
  define: version === undefined ? {} : { __KEYWAY_VERSION__: JSON.stringify(version) },
});
