import { fileURLToPath } from 'node:url';
import { describeRuntimeExample } from '@keyway/test-support/examples';

await describeRuntimeExample({
  runtime: 'Bun.serve, run by the bun binary of the npm package',
  sqlite: 'bun:sqlite',
  cwd: fileURLToPath(new URL('..', import.meta.url)),
  binary: 'bun',
  args: ['--conditions=@keyway/source', 'run', 'src/server.ts'],
});
