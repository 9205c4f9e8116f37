import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The structure of core (issue 24): modules by concept, and no module that needs itself
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

  it('keeps the codes and enums in a module that imports nothing', () => {
    expect(graph.get('contract/codes.ts')).toEqual([]);
    expect(relative(src, join(src, 'contract/codes.ts'))).toBe('contract/codes.ts');
  });
});
