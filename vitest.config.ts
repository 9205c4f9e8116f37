import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import workspace from './vitest.workspace.ts';

const root = fileURLToPath(new URL('.', import.meta.url));

/** Expands the one-level globs of vitest.workspace.ts (`packages/*`) to folders. */
function folders(pattern: string): string[] {
  const parent = pattern.replace(/\/\*$/, '');
  if (!existsSync(join(root, parent))) return [];
  return readdirSync(join(root, parent), { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => join(parent, entry.name));
}

const dirs = workspace.flatMap(folders);

// Tests run against the TypeScript sources of the workspace packages, so `pnpm test` needs
// no build: each package's `@keyway/source` export condition names its entry file.
// Subpaths too (`@keyway/core/storage`), each matched exactly.
const alias: { find: RegExp; replacement: string }[] = [];
for (const dir of dirs) {
  const manifest = join(root, dir, 'package.json');
  if (!existsSync(manifest)) continue;
  const pkg = JSON.parse(readFileSync(manifest, 'utf8'));
  for (const [subpath, conditions] of Object.entries<Record<string, string>>(pkg.exports ?? {})) {
    const source = typeof conditions === 'object' ? conditions['@keyway/source'] : undefined;
    if (source === undefined) continue;
    const name = `${pkg.name}${subpath.slice(1)}`.replace(/[/.]/g, (c) => `\\${c}`);
    alias.push({ find: new RegExp(`^${name}$`), replacement: join(root, dir, source) });
  }
}

// Projects whose tests need a real PostgreSQL server: each gets one from its global setup
// (a throwaway server, or TEST_DATABASE_URL when set).
const needsPostgres = new Set([
  'packages/core',
  'packages/store-postgres',
  'packages/http',
  'packages/cli',
]);
const postgresSetup = join(root, 'tools/test-support/src/postgres-global-setup.ts');

const projects = dirs
  .filter((dir) => existsSync(join(root, dir, 'test')))
  .map((dir) => ({
    extends: true as const,
    test: {
      name: dir.split('/').pop() as string,
      root: join(root, dir),
      include: ['test/**/*.test.ts'],
      ...(needsPostgres.has(dir) ? { globalSetup: [postgresSetup] } : {}),
    },
  }));

/** What tsup defines in every build: the packages share one version. */
const { version } = JSON.parse(readFileSync(join(root, 'packages/http/package.json'), 'utf8'));

export default defineConfig({
  define: { __KEYWAY_VERSION__: JSON.stringify(version) },
  resolve: { alias },
  test: {
    projects,
    testTimeout: 20_000,
    hookTimeout: 60_000,
    // Vitest's default worker count: one on the 2-core machines CI runs on. Two workers took
    // 865-1,000 s instead of 1,241-1,280 s, but in three full runs of 28 November each
    // failed a test that waits on processes and loopback servers: a refresh lease of 1.5 s
    // lapsed under a starved process, a notice raced its event stream.
  },
});
