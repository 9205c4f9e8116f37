import type { HttpBindings } from '@hono/node-server';
import { type Broker, createBroker, type Principal } from '@keyway/core';
import { createHandler } from '@keyway/http';
import { honoBrokerToken } from '@keyway/http/hono';
import { memoryStorage } from '@keyway/store-memory';
import { Hono } from 'hono';

type Env = { Bindings: HttpBindings; Variables: { principal: Principal } };

/**
 * A notes app on Hono (served by @hono/node-server) that embeds Keyway: the broker's API
 * under /keyway, and the app's own routes (/notes/<path>) guarded by the same broker
 * tokens, each allowed only inside its scopes.
 */
export function createApp(rootKey: string): { broker: Broker; app: Hono<Env> } {
  const broker = createBroker({ rootKey, storage: memoryStorage() });
  const keyway = createHandler(broker, { basePath: '/keyway' });
  const notes = new Map<string, string>([
    ['notes/alice/todo', 'buy milk'],
    ['notes/bob/todo', 'call alice'],
  ]);
  const app = new Hono<Env>();
  // The client address, for the limit of failed authentications, is the socket's.
  app.all('/keyway/*', (c) =>
    keyway(c.req.raw, { clientAddress: c.env.incoming.socket.remoteAddress }),
  );
  app.use(
    '/notes/*',
    honoBrokerToken(broker, (c) => decodeURIComponent(new URL(c.req.raw.url).pathname.slice(1))),
  );
  app.get('/notes/*', (c) => {
    const path = decodeURIComponent(c.req.path.slice(1));
    const note = notes.get(path);
    return note === undefined
      ? c.json({ error: 'not_found' }, 404)
      : c.json({ path, note, by: c.get('principal').kind });
  });
  return { broker, app };
}
