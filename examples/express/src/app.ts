import { type Broker, createBroker } from '@keyway/core';
import { createHandler } from '@keyway/http';
import { brokerTokenMiddleware } from '@keyway/http/express';
import { toNodeHandler } from '@keyway/http/node';
import { memoryStorage } from '@keyway/store-memory';
import express, { type Express } from 'express';

/**
 * A notes app on Express 5 that embeds Keyway: the broker's API under /keyway, and the
 * app's own routes (/notes/<path>) guarded by the same broker tokens, each allowed only
 * inside its scopes.
 */
export function createApp(rootKey: string): { broker: Broker; app: Express } {
  const broker = createBroker({ rootKey, storage: memoryStorage() });
  const notes = new Map<string, string>([
    ['notes/alice/todo', 'buy milk'],
    ['notes/bob/todo', 'call alice'],
  ]);
  const app = express();
  // Before any body parser: the handler reads the request body itself.
  app.use('/keyway', toNodeHandler(createHandler(broker, { basePath: '/keyway' })));
  app.get(
    '/notes/*path',
    brokerTokenMiddleware(broker, (req: express.Request<{ path: string[] }>) =>
      ['notes', ...req.params.path].join('/'),
    ),
    (req: express.Request<{ path: string[] }>, res) => {
      const path = ['notes', ...req.params.path].join('/');
      const note = notes.get(path);
      if (note === undefined) res.status(404).json({ error: 'not_found' });
      else res.json({ path, note });
    },
  );
  return { broker, app };
}
