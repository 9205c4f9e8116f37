/*
 * `keyway serve` in a child process that also answers, over IPC, its memory after a full
 * garbage collection: the soak test forks it with `--expose-gc`.
 */
import { serveOptionsFromEnv } from '../src/environment.js';
import { serve } from '../src/serve.js';

// Without a full collection the heap would measure when V8 last collected, which a busy
// machine moves: the soak's bound holds only for the heap after one, so none, no soak.
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('the soak server needs --expose-gc');
const running = await serve({ ...serveOptionsFromEnv(process.env), log: () => {} });
process.send?.({ url: running.url });
process.on('message', async (message) => {
  if (message === 'memory') {
    gc();
    gc();
    const { rss, heapUsed } = process.memoryUsage();
    process.send?.({ rss, heapUsed });
  } else if (message === 'stop') {
    await running.close();
    process.exit(0);
  }
});
