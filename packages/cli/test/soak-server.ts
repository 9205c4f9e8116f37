/*
 * `keyway serve` in a child process that also answers, over IPC, its memory after a full
 * garbage collection: the soak test forks it with `--expose-gc`.
 */
import { serveOptionsFromEnv } from '../src/environment.js';
import { serve } from '../src/serve.js';

const running = await serve({ ...serveOptionsFromEnv(process.env), log: () => {} });
process.send?.({ url: running.url });
process.on('message', async (message) => {
  if (message === 'memory') {
    const gc = (globalThis as { gc?: () => void }).gc;
    gc?.();
    gc?.();
    const { rss, heapUsed } = process.memoryUsage();
    process.send?.({ rss, heapUsed });
  } else if (message === 'stop') {
    await running.close();
    process.exit(0);
  }
});
