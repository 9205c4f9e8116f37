import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const here = fileURLToPath(new URL('..', import.meta.url));

/*
 * `@keyway/http/node` says it works on Bun: `toNodeHandler` and `continueOnRead` on Bun's
 * own `node:http`, run by the Bun binary of the `bun` npm package.
 */
describe('toNodeHandler on Bun', () => {
  it('answers a mint, refuses bodies past the limit with 413, and a head that expects 100 with no 100 before its 413', async () => {
    const { stdout } = await run(
      `${here}node_modules/.bin/bun`,
      ['--conditions=@keyway/source', 'run', 'test/bun/node-server.ts'],
      { cwd: here, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' } },
    );
    expect(JSON.parse(stdout.trim().split('\n').at(-1) ?? '')).toEqual({
      mint: 201,
      past: 413,
      farPast: 413,
      expecting: ['HTTP/1.1 413 Payload Too Large'],
    });
  }, 60_000);
});
