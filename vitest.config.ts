import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
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

/**
 * The slowest test files, as measured on the 2-core machines CI runs on (seconds of one file
 * with two at once: pack-install 227, the conformance suite 208, the fuzzer 117, crash 105,
 * the portal's server scenarios 84, soak 73), started first. Vitest's own order runs the
 * projects one after another, by name: the packaging project's install came last and ran
 * alone for minutes while the other worker had nothing left.
 */
const SLOWEST = [
  'packaging/test/pack-install.test.ts',
  'conformance-client/test/conformance.test.ts',
  'http/test/fuzz.test.ts',
  'cli/test/crash.test.ts',
  'conformance-client/test/portal-server.test.ts',
  'cli/test/soak.test.ts',
];

/** Vitest's order, with the {@link SLOWEST} files first. */
class SlowestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (file: TestSpecification) => {
      const at = SLOWEST.findIndex((path) => file.moduleId.endsWith(`/${path}`));
      return at === -1 ? SLOWEST.length : at;
    };
    return sorted
      .map((file, order) => ({ file, order, rank: rank(file) }))
      .sort((a, b) => a.rank - b.rank || a.order - b.order)
      .map(({ file }) => file);
  }
}

/** What tsup defines in every build: the packages share one version. */
const { version } = JSON.parse(readFileSync(join(root, 'packages/http/package.json'), 'utf8'));

export default defineConfig({
  define: { __KEYWAY_VERSION__: JSON.stringify(version) },
  resolve: { alias },
  test: {
    projects,
    testTimeout: 20_000,
    hookTimeout: 60_000,
    // One test file per core. Vitest's default is one fewer: a single worker on the 2-core
    // machines CI runs on, where most test files wait on processes, browsers and loopback
    // servers rather than compute. Measured on such a machine: 1,241-1,314 s of Vitest with
    // one worker, 865-1,000 s with two (405 s on a faster machine of the same kind). A test
    // that waits on another process allows for a starved one: the multi-process refresh
    // tests hold a 5 s lease (1.5 s lapsed).
    maxWorkers: availableParallelism(),
    sequence: { sequencer: SlowestFirst },
  },
});
