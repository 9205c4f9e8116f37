import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const here = fileURLToPath(new URL('..', import.meta.url));

describe('the storage conformance suite under Bun, on bun:sqlite', () => {
  it('passes every case, as on better-sqlite3 under Node', async () => {
    // bun test runs the same file (conformance.test.ts); its vitest imports are Bun's.
    const result = await run(
      `${here}node_modules/.bin/bun`,
      ['test', '--conditions=@keyway/source', 'test/conformance.test.ts'],
      { cwd: here, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' } },
    ).catch((error: { stdout: string; stderr: string }) => error);
    const output = `${result.stdout}\n${result.stderr}`;
    expect(output).toContain('(bun:sqlite)');
    expect(output).toMatch(/^ 0 fail$/m);
    // The number of cases of runStorageConformance: the same on every engine.
    expect(output).toMatch(/^ 106 pass$/m);
  }, 60_000);
});
