import { fileURLToPath } from 'node:url';
import { describeRuntimeExample } from '@keyway/test-support/examples';

await describeRuntimeExample({
  runtime: 'Deno.serve, run by the deno binary of the npm package',
  sqlite: 'node:sqlite',
  cwd: fileURLToPath(new URL('..', import.meta.url)),
  binary: 'deno',
  args: [
    'run',
    '--conditions=@keyway/source',
    '--allow-net=127.0.0.1',
    '--allow-env',
    '--allow-read',
    '--allow-write',
    'src/server.ts',
  ],
  env: { DENO_NO_UPDATE_CHECK: '1' },
});
