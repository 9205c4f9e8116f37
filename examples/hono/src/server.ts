import { serve } from '@hono/node-server';
import { createApp } from './app.js';

const rootKey = process.env.KEYWAY_ROOT_KEY;
if (rootKey === undefined) {
  console.error('Set KEYWAY_ROOT_KEY (at least 32 characters).');
  process.exit(1);
}
const port = Number(process.env.PORT ?? 3000);
serve({ fetch: createApp(rootKey).app.fetch, port }, () => {
  console.log(`notes app on http://localhost:${port}, Keyway under /keyway`);
});
