import { execFile, spawn } from 'node:child_process';
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { withBuildLock } from '@keyway/test-support/processes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../../../', import.meta.url));

/** Every package the project publishes. */
/** The published packages, as `pnpm tarballs` packs them. */
const PUBLIC = JSON.parse(
  readFileSync(join(root, 'scripts', 'public-packages.json'), 'utf8'),
) as string[];
/** Workspace packages that are never published, so never named by a published manifest. */
const PRIVATE = [
  '@keyway/sql',
  '@keyway/test-support',
  '@keyway/conformance-client',
  '@keyway/packaging',
];

/** The first ```ts block after a heading of a Markdown file. */
function snippet(file: string, heading: string): string {
  const text = readFileSync(join(root, file), 'utf8');
  const at = text.indexOf(heading);
  const start = text.indexOf('```ts\n', at);
  if (at === -1 || start === -1) throw new Error(`no ts block after ${heading} in ${file}`);
  return text.slice(start + 6, text.indexOf('\n```', start));
}

/** Preloaded into the app: any use of the real network throws. */
const NO_NETWORK = `
import dns from 'node:dns';
const refuse = () => { throw new Error('the network was used'); };
globalThis.fetch = refuse;
dns.lookup = refuse;
dns.promises.lookup = refuse;
`;

const work = mkdtempSync(join(tmpdir(), 'keyway-pack-'));
const packs = join(work, 'packs');
const app = join(work, 'app');
afterAll(() => rmSync(work, { recursive: true, force: true }));

beforeAll(async () => {
  // The packages as a user gets them: built with declarations, packed by pnpm (which
  // rewrites workspace versions and applies publishConfig), installed by plain npm.
  mkdirSync(packs);
  // As `pnpm tarballs` does it (scripts/pack.mjs): the README's way to a global install.
  await withBuildLock(() => run(process.execPath, [join(root, 'scripts', 'pack.mjs'), packs]));
  mkdirSync(app);
  // better-sqlite3 compiles from source where no prebuilt binary downloads: the app links
  // the workspace's built copy instead of compiling it again.
  const sqliteDriver = dirname(
    realpathSync(
      createRequire(join(root, 'packages/store-sqlite/package.json')).resolve(
        'better-sqlite3/package.json',
      ),
    ),
  );
  const dependencies: Record<string, string> = {
    'better-sqlite3': `file:${sqliteDriver}`,
    typescript: '5.9.3',
    '@types/node': '20.19.43',
  };
  for (const file of readdirSync(packs)) {
    const name = `@keyway/${file.replace(/^keyway-/, '').replace(/-\d+\.\d+\.\d+\.tgz$/, '')}`;
    dependencies[name] = `file:${join(packs, file)}`;
  }
  writeFileSync(
    join(app, 'package.json'),
    JSON.stringify({ name: 'keyway-user-app', private: true, type: 'module', dependencies }),
  );
  writeFileSync(join(app, 'no-network.mjs'), NO_NETWORK);
  writeFileSync(join(app, 'app.ts'), snippet('README.md', '## Embedding'));
  writeFileSync(join(app, 'world.ts'), snippet('packages/testing/README.md', '# @keyway/testing'));
  writeFileSync(
    join(app, 'start.ts'),
    snippet('docs/getting-started.md', '## 1. In memory, in five minutes'),
  );
  // --ignore-scripts: the linked driver is already built, and must not be rebuilt in place.
  await run('npm', ['install', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd: app,
  });
}, 600_000);

/** Type-checks the app's files with one module resolution (and emits, for NodeNext). */
async function typecheck(resolution: 'NodeNext' | 'Bundler' | 'Node10'): Promise<string> {
  const options =
    resolution === 'NodeNext'
      ? { module: 'NodeNext', moduleResolution: 'NodeNext', outDir: 'out' }
      : resolution === 'Bundler'
        ? { module: 'ESNext', moduleResolution: 'Bundler', noEmit: true }
        : // Node10 finds subpaths through `typesVersions`; zod's declarations need interop.
          { module: 'ESNext', moduleResolution: 'Node10', noEmit: true, esModuleInterop: true };
  const config = {
    compilerOptions: { target: 'ES2022', strict: true, types: ['node'], ...options },
    files: ['app.ts', 'world.ts', 'start.ts'],
  };
  const file = `tsconfig.${resolution}.json`;
  writeFileSync(join(app, file), JSON.stringify(config));
  const result = await run('npx', ['tsc', '-p', file], { cwd: app }).catch(
    (error: { stdout: string }) => ({ stdout: error.stdout, failed: true }),
  );
  return 'failed' in result ? result.stdout : '';
}

/** Runs a compiled file of the app and collects its output until `done` says so. */
function runApp(
  file: string,
  env: Record<string, string>,
  done: (output: string) => boolean,
): Promise<{ output: string; code: number | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', './no-network.mjs', file], {
      cwd: app,
      env: { PATH: process.env.PATH ?? '', ...env },
    });
    let output = '';
    const collect = (chunk: Buffer) => {
      output += chunk.toString();
      if (done(output)) child.kill('SIGTERM');
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    child.on('error', reject);
    child.on('exit', (code) => resolve({ output, code }));
  });
}

describe('the published packages, installed with npm outside the workspace', () => {
  it('each tarball holds its build, README and LICENSE, and a manifest fit to publish', async () => {
    for (const name of PUBLIC) {
      const tarball = readdirSync(packs).find((file) => file.startsWith(`keyway-${name}-`));
      expect(tarball, name).toBeDefined();
      const listing = await run('tar', ['tzf', join(packs, tarball as string)]);
      const files = listing.stdout.split('\n').filter(Boolean);
      expect(files, name).toContain('package/README.md');
      expect(files, name).toContain('package/LICENSE');
      expect(files, name).toContain('package/dist/index.js');
      expect(files, name).toContain('package/dist/index.d.ts');
      expect(
        files.filter((file) => file.startsWith('package/src/')),
        name,
      ).toEqual([]);
      const manifest = JSON.parse(
        readFileSync(join(app, 'node_modules/@keyway', name, 'package.json'), 'utf8'),
      );
      const text = JSON.stringify(manifest);
      expect(text, name).not.toContain('@keyway/source');
      expect(text, name).not.toContain('workspace:');
      for (const hidden of PRIVATE) expect(text, `${name} names ${hidden}`).not.toContain(hidden);
      // .pnpmfile.cjs drops them: a consumer never installs them.
      expect(manifest.devDependencies, name).toBeUndefined();
      expect(manifest, name).toMatchObject({
        version: '0.1.0',
        license: 'MIT',
        type: 'module',
        types: './dist/index.d.ts',
        engines: { node: '>=20.19' },
        repository: { type: 'git', directory: `packages/${name}` },
      });
      expect(Object.keys(manifest.exports['.']), name).toEqual(['types', 'default']);
      for (const [subpath, conditions] of Object.entries(manifest.exports)) {
        expect(Object.keys(conditions as object), `${name} ${subpath}`).toEqual([
          'types',
          'default',
        ]);
      }
    }
  });

  it('type-checks the README embedding snippet and the testing example (NodeNext, Bundler, Node10)', async () => {
    expect(await typecheck('NodeNext')).toBe('');
    expect(await typecheck('Bundler')).toBe('');
    expect(await typecheck('Node10')).toBe('');
  }, 120_000);

  it('runs the README embedding snippet, twice on one SQLite file', async () => {
    const env = {
      KEYWAY_ROOT_KEY: 'pack-test-root-key-0123456789-abcdefghij',
      KEYWAY_VAULT_KEY: 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8',
      PORT: '0',
    };
    for (let round = 1; round <= 2; round++) {
      const { output } = await runApp(
        'out/app.js',
        env,
        (text) =>
          text.includes('keyway listening on') && text.includes('worker may use acme/jobs/42'),
      );
      expect(output, `round ${round}`).toContain('keyway listening on');
      expect(output, `round ${round}`).toContain('worker may use acme/jobs/42');
    }
    const { output, code } = await runApp('out/app.js', { PORT: '0' }, () => false);
    expect(code).toBe(1);
    expect(output).toMatch(/set KEYWAY_ROOT_KEY and KEYWAY_VAULT_KEY \(for example [\w-]{43}\)/);
  }, 60_000);

  it('runs the getting-started example in memory, with the network cut off', async () => {
    const { output, code } = await runApp('out/start.js', {}, () => false);
    expect(output).toBe(
      'authorization server https://auth.example.test\nconnection active\ntool says {"hello":"world"}\n',
    );
    expect(code).toBe(0);
  }, 60_000);

  it('runs the testing example in memory, with the network cut off', async () => {
    const { output, code } = await runApp('out/world.js', {}, () => false);
    expect(output).toBe('active\necho\n');
    expect(code).toBe(0);
  }, 60_000);

  it('puts keyway on the PATH with npm install -g of the tarballs, as the README says', async () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    expect(readme).toContain('pnpm tarballs');
    expect(readme).toContain('npm install -g --install-strategy=hoisted packs/*.tgz');
    const prefix = join(work, 'global');
    const tarballs = readdirSync(packs).map((file) => join(packs, file));
    // --ignore-scripts: the SQLite driver is the workspace's build, copied in below.
    await run(
      'npm',
      [
        'install',
        '-g',
        '--prefix',
        prefix,
        '--install-strategy=hoisted',
        '--ignore-scripts',
        '--no-audit',
        '--no-fund',
        '--loglevel=error',
        ...tarballs,
      ],
      { cwd: work },
    );
    const built = join(
      dirname(
        realpathSync(
          createRequire(join(root, 'packages/store-sqlite/package.json')).resolve(
            'better-sqlite3/package.json',
          ),
        ),
      ),
      'build',
    );
    const installed = await run('find', [prefix, '-type', 'd', '-path', '*/better-sqlite3']);
    for (const driver of installed.stdout.split('\n').filter(Boolean)) {
      cpSync(built, join(driver, 'build'), { recursive: true });
    }
    const keyway = join(prefix, 'bin', 'keyway');
    const env = { PATH: `${join(prefix, 'bin')}:${process.env.PATH ?? ''}` };
    const help = await run('keyway', ['--help'], { env });
    expect(help.stdout).toContain('keyway backup <file>');
    expect(realpathSync(keyway)).toBe(
      join(prefix, 'lib', 'node_modules', '@keyway', 'cli', 'dist', 'bin.js'),
    );
    // The installed broker starts, answers, and stops on SIGTERM with 0.
    const rootKey = 'global-install-root-key-0123456789abcdef';
    const server = spawn('keyway', ['serve'], {
      env: { ...env, PORT: '0', KEYWAY_DATABASE: ':memory:', KEYWAY_ROOT_KEY: rootKey },
    });
    let output = '';
    const url = await new Promise<string>((resolve, reject) => {
      server.stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        const found = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output)?.[1];
        if (found !== undefined) resolve(found);
      });
      server.stderr.on('data', (chunk: Buffer) => {
        output += chunk.toString();
      });
      server.on('exit', (code) => reject(new Error(`keyway serve exited ${code}: ${output}`)));
    });
    const status = await run('keyway', ['status'], {
      env: { ...env, KEYWAY_URL: url, KEYWAY_TOKEN: rootKey },
    });
    expect(status.stdout).toMatch(/^keyway 0\.\d+\.\d+: ready\nstorage: sqlite/);
    const exited = new Promise<number | null>((resolve) => server.once('exit', resolve));
    server.kill('SIGTERM');
    expect(await exited).toBe(0);
  }, 300_000);
});
