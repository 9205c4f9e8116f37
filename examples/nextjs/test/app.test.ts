import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { exerciseNotesApp, freePort, startServerProcess } from '@keyway/test-support/examples';
import { buildWorkspacePackages, withBuildLock } from '@keyway/test-support/processes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const ROOT_KEY = 'example-root-key-0123456789abcdefghijkl';
const here = fileURLToPath(new URL('..', import.meta.url));
const env = { NEXT_TELEMETRY_DISABLED: '1' };

describe('example: Next.js 16 App Router, built with next build and served by next start', () => {
  let app: Awaited<ReturnType<typeof startServerProcess>>;
  let build: string;

  beforeAll(async () => {
    // The app consumes the workspace packages as they are published: their builds.
    const built = await withBuildLock(async () => {
      await buildWorkspacePackages(['@keyway/http...', '@keyway/store-memory']);
      // No root key while building: the broker is made at the first request, not when the
      // route module is evaluated to collect it.
      return run(`${here}node_modules/.bin/next`, ['build'], {
        cwd: here,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
        maxBuffer: 64 * 1024 * 1024,
      });
    });
    build = built.stdout;
    const port = await freePort();
    app = await startServerProcess(
      `${here}node_modules/.bin/next`,
      ['start', '--hostname', '127.0.0.1', '--port', String(port)],
      {
        cwd: here,
        env: { ...env, KEYWAY_ROOT_KEY: ROOT_KEY },
        listening: new RegExp(
          `(?:Local|ready)[^\\n]*?(http://(?:127\\.0\\.0\\.1|localhost):${port})`,
        ),
      },
    );
  }, 300_000);
  afterAll(() => app?.stop());

  it('builds without the root key, with the API and the notes as dynamic routes', () => {
    expect(build).toMatch(/ƒ \/api\/keyway\/\[\.\.\.path\]/);
    expect(build).toMatch(/ƒ \/notes\/\[\.\.\.path\]/);
  });

  it('mints a token through Keyway, reads it back, and lets it read only its own notes', async () => {
    await exerciseNotesApp(app.base.replace('localhost', '127.0.0.1'), ROOT_KEY, '/api/keyway');
  });
});
