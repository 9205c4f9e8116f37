import { defineConfig } from 'tsup';

// Shared by every package's `build` script (`tsup --config ../../tsup.config.ts <entries>`).
// KEYWAY_BUILD_DTS=0 skips the declaration step (seconds instead of tens of seconds), which
// `pnpm start` uses: running the broker needs no .d.ts.
export default defineConfig({
  format: ['esm'],
  target: 'node20',
  clean: true,
  dts: process.env.KEYWAY_BUILD_DTS !== '0',
  tsconfig: '../../tsconfig.build.json',
  // The private SQL layer is part of each adapter's bundle: never a published dependency.
  noExternal: ['@keyway/sql'],
});
