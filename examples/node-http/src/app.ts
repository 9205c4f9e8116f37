import type { IncomingMessage, ServerResponse } from 'node:http';
import { type Broker, createBroker, isKeywayError } from '@keyway/core';
import { createHandler, toNodeHandler, toWebRequest } from '@keyway/http';
import { memoryStorage } from '@keyway/store-memory';

/**
 * A notes app that embeds Keyway: the broker's API is mounted under /keyway, and the app's
 * own routes (/notes/<path>) accept the same broker tokens, each allowed only inside its
 * scopes. A token minted for `notes/alice` reads /notes/alice/todo but not /notes/bob.
 */
export function createApp(rootKey: string): {
  broker: Broker;
  listener: (req: IncomingMessage, res: ServerResponse) => void;
} {
  const broker = createBroker({ rootKey, storage: memoryStorage() });
  const keyway = toNodeHandler(createHandler(broker, { basePath: '/keyway' }));
  const notes = new Map<string, string>([
    ['notes/alice/todo', 'buy milk'],
    ['notes/bob/todo', 'call alice'],
  ]);

  async function readNote(req: IncomingMessage): Promise<{ status: number; body: unknown }> {
    const request = toWebRequest(req);
    const header = request.headers.get('authorization') ?? '';
    const credential = header.replace(/^bearer +/i, '');
    try {
      const principal = await broker.authenticate(credential);
      // The same check core runs for its own resources: scope coverage by whole segments.
      const path = broker.authorize(
        principal,
        decodeURIComponent(new URL(request.url).pathname.slice(1)),
      );
      const note = notes.get(path);
      return note === undefined
        ? { status: 404, body: { error: 'not_found' } }
        : { status: 200, body: { path, note } };
    } catch (error) {
      if (isKeywayError(error)) return { status: error.status, body: error.toJSON() };
      throw error;
    }
  }

  return {
    broker,
    listener(req, res) {
      if (req.url?.startsWith('/keyway/')) {
        keyway(req, res);
        return;
      }
      readNote(req).then(
        ({ status, body }) => {
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(JSON.stringify(body));
        },
        () => {
          res.writeHead(500).end();
        },
      );
    },
  };
}
