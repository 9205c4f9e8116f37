import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { exerciseNotesApp, startServerProcess } from '@keyway/test-support/examples';
import { afterAll, beforeAll, describe, it } from 'vitest';

const ROOT_KEY = 'example-root-key-0123456789abcdefghijkl';
const here = fileURLToPath(new URL('..', import.meta.url));

describe.each([
  { storage: 'memory', database: null },
  { storage: 'bun:sqlite', database: 'notes.sqlite' },
])(
  'example: notes app ($storage) on Bun.serve, run by the bun binary of the npm package',
  ({ database }) => {
    const dir = mkdtempSync(join(tmpdir(), 'keyway-example-'));
    let app: Awaited<ReturnType<typeof startServerProcess>>;
    beforeAll(async () => {
      app = await startServerProcess(
        `${here}node_modules/.bin/bun`,
        ['--conditions=@keyway/source', 'run', 'src/server.ts'],
        {
          cwd: here,
          env: {
            KEYWAY_ROOT_KEY: ROOT_KEY,
            PORT: '0',
            ...(database === null ? {} : { KEYWAY_DATABASE: join(dir, database) }),
          },
        },
      );
    }, 60_000);
    afterAll(async () => {
      await app?.stop();
      rmSync(dir, { recursive: true, force: true });
    });

    it('mints a token through Keyway, reads it back, and lets it read only its own notes', async () => {
      await exerciseNotesApp(app.base, ROOT_KEY);
    });
  },
);
