import type { IncomingMessage, ServerResponse } from 'node:http';
import { type Broker, createBroker } from '@keyway/core';
import {
  createHandler,
  guardErrorResponse,
  requireBrokerToken,
  toNodeHandler,
  toWebRequest,
  writeWebResponse,
} from '@keyway/http';
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
  const pathOf = (request: Request) => decodeURIComponent(new URL(request.url).pathname.slice(1));
  // The same check core runs for its own resources: scope coverage by whole segments.
  const guard = requireBrokerToken(broker, pathOf);

  async function readNote(request: Request, clientAddress: string | null): Promise<Response> {
    try {
      await guard(request, { clientAddress });
    } catch (error) {
      return guardErrorResponse(error, request);
    }
    const path = pathOf(request);
    const note = notes.get(path);
    return note === undefined
      ? Response.json({ error: 'not_found' }, { status: 404 })
      : Response.json({ path, note });
  }

  return {
    broker,
    listener(req, res) {
      if (req.url?.startsWith('/keyway/')) {
        keyway(req, res);
        return;
      }
      readNote(toWebRequest(req), req.socket.remoteAddress ?? null)
        .then((response) => writeWebResponse(res, response))
        .catch(() => {
          res.writeHead(500).end();
        });
    },
  };
}
