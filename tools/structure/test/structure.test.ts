import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The structure of core: modules by concept, and no module that needs itself
// through others. A cycle is what makes a change in one folder break another's load order,
// and what `codes.ts` (importing nothing) exists to prevent.

const src = fileURLToPath(new URL('../../../packages/core/src', import.meta.url));

/** Every TypeScript file under a folder, relative to it. */
function sources(folder: string, prefix = ''): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? sources(join(folder, entry.name), join(prefix, entry.name))
      : entry.name.endsWith('.ts')
        ? [join(prefix, entry.name)]
        : [],
  );
}

/** The modules a file imports or re-exports from core, types included. */
function importsOf(file: string): string[] {
  const text = readFileSync(join(src, file), 'utf8');
  const found: string[] = [];
  for (const match of text.matchAll(/(?:from|import)\s*\(?\s*['"](\.{1,2}\/[^'"]+)\.js['"]/g)) {
    found.push(normalize(join(dirname(file), `${match[1]}.ts`)));
  }
  return found;
}

/** The cycles of a graph: its strongly connected components of more than one module. */
function cycles(graph: Map<string, string[]>): string[][] {
  let index = 0;
  const indices = new Map<string, number>();
  const lowlinks = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string) => {
    indices.set(node, index);
    lowlinks.set(node, index);
    index++;
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!indices.has(next)) {
        visit(next);
        lowlinks.set(node, Math.min(lowlinks.get(node) as number, lowlinks.get(next) as number));
      } else if (onStack.has(next)) {
        lowlinks.set(node, Math.min(lowlinks.get(node) as number, indices.get(next) as number));
      }
    }
    if (lowlinks.get(node) === indices.get(node)) {
      const component: string[] = [];
      for (let member = stack.pop(); member !== undefined; member = stack.pop()) {
        onStack.delete(member);
        component.push(member);
        if (member === node) break;
      }
      if (component.length > 1 || (graph.get(node) ?? []).includes(node)) {
        found.push(component.sort());
      }
    }
  };
  for (const node of graph.keys()) if (!indices.has(node)) visit(node);
  return found;
}

/**
 * Core's folders from the bottom up (docs/ARCHITECTURE.md): a module imports only from its
 * own folder and the folders before it. The root `index.ts` is the top.
 */
const LAYERS = [
  'platform',
  'contract',
  'telemetry',
  'auth',
  'storage',
  'outbound',
  'events',
  'tokens',
  'vault',
  'discovery',
  'catalog',
  'providers',
  'grants',
  'connections',
  'upstream',
  'sign-in',
  'portal',
  'connect',
  'broker',
  'config',
];

/** The top-level folder of a module (`auth/scope.ts` → `auth`); the root's files are `.`. */
const folderOf = (file: string) => (file.includes('/') ? (file.split('/')[0] as string) : '.');

/** Each import that points up the layers, or sideways between folders of one rank. */
function layerViolations(graph: Map<string, string[]>): string[] {
  const rank = (file: string) => {
    const folder = folderOf(file);
    return folder === '.' ? LAYERS.length : LAYERS.indexOf(folder);
  };
  return [...graph].flatMap(([file, targets]) =>
    targets
      .filter((target) => folderOf(target) !== folderOf(file) && rank(target) >= rank(file))
      .map((target) => `${file} → ${target}`),
  );
}

describe('the structure of packages/core/src', () => {
  const files = sources(src);
  const graph = new Map(files.map((file) => [file, importsOf(file)]));

  it('resolves every relative import to a module of core', () => {
    const missing = [...graph].flatMap(([file, targets]) =>
      targets.filter((target) => !graph.has(target)).map((target) => `${file} → ${target}`),
    );
    expect(missing).toEqual([]);
  });

  it('has no import cycle, type imports included', () => {
    expect(cycles(graph)).toEqual([]);
  });

  it('finds a cycle when there is one (the check itself)', () => {
    const looped = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts']],
      ['c.ts', ['a.ts']],
      ['d.ts', ['a.ts']],
    ]);
    expect(cycles(looped)).toEqual([['a.ts', 'b.ts', 'c.ts']]);
  });

  it('imports only downward between its folders, in the order docs/ARCHITECTURE.md draws', () => {
    expect(layerViolations(graph)).toEqual([]);
  });

  it('finds a folder imported upward (the check itself)', () => {
    const upward = new Map([
      ['auth/scope.ts', ['contract/codes.ts']],
      ['contract/codes.ts', ['auth/scope.ts']],
      ['index.ts', ['broker/broker.ts']],
    ]);
    expect(layerViolations(upward)).toEqual(['contract/codes.ts → auth/scope.ts']);
  });

  it('places every folder of core in the order, and keeps each folder scannable', () => {
    const folders = new Set(files.filter((file) => file.includes('/')).map(folderOf));
    expect([...folders].filter((folder) => !LAYERS.includes(folder))).toEqual([]);
    const crowded = [...folders]
      .map((folder) => ({
        folder,
        count: files.filter(
          (file) => file.startsWith(`${folder}/`) && !file.slice(folder.length + 1).includes('/'),
        ).length,
      }))
      .filter(({ count }) => count > 14)
      .map(({ folder, count }) => `${folder}: ${count} files`);
    expect(crowded).toEqual([]);
  });

  it('names each file once: only the roles docs/ARCHITECTURE.md names repeat (index, service, deps)', () => {
    const roles = new Set(['index.ts', 'service.ts', 'deps.ts']);
    const byName = new Map<string, string[]>();
    for (const file of files) {
      const name = file.split('/').pop() as string;
      byName.set(name, [...(byName.get(name) ?? []), file]);
    }
    const repeated = [...byName]
      .filter(([name, paths]) => paths.length > 1 && !roles.has(name))
      .map(([, paths]) => paths.sort().join(' and '));
    expect(repeated).toEqual([]);
  });

  it('keeps the codes and enums in a module that imports nothing', () => {
    expect(graph.get('contract/codes.ts')).toEqual([]);
    expect(relative(src, join(src, 'contract/codes.ts'))).toBe('contract/codes.ts');
  });
});

const packages = fileURLToPath(new URL('../../../packages', import.meta.url));

/** The source files of every package, `packages/<name>/src/**`, generated files aside. */
function packageSources(): { file: string; text: string }[] {
  return readdirSync(packages, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .flatMap((entry) => {
      const folder = join(packages, entry.name, 'src');
      let files: string[];
      try {
        files = sources(folder);
      } catch {
        return [];
      }
      return files
        .filter((file) => !file.endsWith('.generated.ts'))
        .map((file) => ({
          file: join(entry.name, 'src', file),
          text: readFileSync(join(folder, file), 'utf8'),
        }));
    });
}

describe('the structure of packages/*/src', () => {
  const files = packageSources();

  it('reads every package (the check itself)', () => {
    const names = new Set(files.map(({ file }) => file.split('/')[0]));
    expect([...names].sort()).toEqual([
      'cli',
      'connect',
      'core',
      'http',
      'sql',
      'storage-conformance',
      'store-memory',
      'store-postgres',
      'store-sqlite',
      'testing',
    ]);
  });

  it('has no file over 600 lines', () => {
    const long = files
      .map(({ file, text }) => ({ file, lines: text.split('\n').length - 1 }))
      .filter(({ lines }) => lines > 600)
      .map(({ file, lines }) => `${file}: ${lines} lines`);
    expect(long).toEqual([]);
  });

  it('has no line of code over 120 characters (a link, in a comment or a string, is as long as it is)', () => {
    const long = files.flatMap(({ file, text }) =>
      text
        .split('\n')
        .map((line, index) => ({ line, index }))
        .filter(
          ({ line }) =>
            line.length > 120 &&
            !/^\s*(\/\/|\/?\*)/.test(line) &&
            !/^\s*'https?:\/\/[^\s']+',?$/.test(line),
        )
        .map(({ index }) => `${file}:${index + 1}`),
    );
    expect(long).toEqual([]);
  });

  it('silences the type checker nowhere (no `as unknown as`, no `as never`)', () => {
    const casts = files.flatMap(({ file, text }) =>
      text
        .split('\n')
        .map((line, index) => ({ line, index }))
        .filter(({ line }) => /\bas unknown as\b|\bas never\b/.test(line))
        .map(({ index }) => `${file}:${index + 1}`),
    );
    expect(casts).toEqual([]);
  });

  it('imports Node modules in core and in the root of @keyway/http through nothing static', () => {
    // Core reaches node:crypto and node:dns through process.getBuiltinModule, and only
    // @keyway/http/node reads Node streams: both roots load on any runtime.
    const nodeImports = files
      .filter(
        ({ file }) =>
          file.startsWith('core/') ||
          (file.startsWith('http/') && !file.startsWith('http/src/node/')),
      )
      .filter(({ text }) => /from ['"]node:|import\(['"]node:|require\(['"]node:/.test(text))
      .map(({ file }) => file);
    expect(nodeImports).toEqual([]);
  });
});

describe('the public root of @keyway/core', () => {
  it('exports at most 40 values', async () => {
    const root = await import('@keyway/core');
    const values = Object.keys(root);
    expect(values.length).toBeGreaterThan(0);
    expect(values.length).toBeLessThanOrEqual(40);
  });
});

describe('the routes of @keyway/http', () => {
  it('declares each operation once, and the OpenAPI document is written from that list', async () => {
    const { OPERATIONS, openApiDocument } = await import('@keyway/http');
    const keys = OPERATIONS.map((operation) => `${operation.method} ${operation.path}`);
    expect(new Set(keys).size).toBe(keys.length);
    const ids = OPERATIONS.map((operation) => operation.id);
    expect(new Set(ids).size).toBe(ids.length);
    const documented = Object.entries(
      openApiDocument().paths as Record<string, Record<string, unknown>>,
    ).flatMap(([path, methods]) =>
      Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`),
    );
    const listed = OPERATIONS.filter((operation) => operation.undocumented !== true).map(
      (operation) => `${operation.method} ${operation.path}`,
    );
    expect(documented.sort()).toEqual(listed.sort());
  });
});

describe('the examples built with the shared tsup config', () => {
  /**
   * Builds an example's server as its `build` script does, into a throwaway folder, and
   * returns the bundle. Keyway's packages must stay imports: a bundled copy of core beside
   * the one @keyway/http imports makes two `KeywayError` classes, and a guard's refusal
   * then answers no status at all.
   */
  function bundleOf(example: string): string {
    const root = fileURLToPath(new URL('../../..', import.meta.url));
    const cwd = join(root, 'examples', example);
    const outDir = mkdtempSync(join(tmpdir(), `keyway-${example}-`));
    try {
      const tsup = join(root, 'node_modules/tsup/dist/cli-default.js');
      const built = spawnSync(
        process.execPath,
        [tsup, '--config', '../../tsup.config.ts', 'src/server.ts', '--out-dir', outDir],
        { cwd, encoding: 'utf8' },
      );
      expect(built.status, `${example}: ${built.stderr}`).toBe(0);
      return readFileSync(join(outDir, 'server.js'), 'utf8');
    } finally {
      rmSync(outDir, { recursive: true, force: true });
    }
  }

  it.each([
    [
      'express',
      [
        '@keyway/core',
        '@keyway/http',
        '@keyway/http/express',
        '@keyway/http/node',
        '@keyway/store-memory',
      ],
    ],
    ['hono', ['@keyway/core', '@keyway/http', '@keyway/http/hono', '@keyway/store-memory']],
    ['node-http', ['@keyway/core', '@keyway/http', '@keyway/http/node', '@keyway/store-memory']],
  ])('%s: builds, with every package of Keyway left an import', (example, packages) => {
    const bundle = bundleOf(example);
    const imported = [...bundle.matchAll(/^import .* from "(@keyway\/[^"]+)";$/gm)]
      .map((match) => match[1])
      .sort();
    expect(imported).toEqual(packages);
    // esbuild writes a bundled class as `var KeywayError = class extends Error`.
    expect(bundle).not.toMatch(/\bKeywayError = class\b|\bclass KeywayError\b/);
    expect(bundle).not.toContain('@keyway/example-notes-app');
  });
});
