import { createBroker, type Storage } from '@keyway/core';
import { createHandler, guardErrorResponse, requireBrokerToken } from '@keyway/http';
import { memoryStorage } from '@keyway/store-memory';

/**
 * A notes app as one fetch function: Keyway's API under /keyway, the app's own
 * /notes/<path> guarded by broker tokens (a token minted for `notes/alice` reads
 * /notes/alice/todo, not /notes/bob/todo). The node:http, Bun and Deno examples serve it,
 * each with its runtime's few lines of glue.
 */
export function createApp(
  rootKey: string,
  storage: Storage = memoryStorage(),
): (request: Request, context?: unknown) => Promise<Response> {
  const broker = createBroker({ rootKey, storage });
  const keyway = createHandler(broker, { basePath: '/keyway' });
  const notes = new Map<string, string>([
    ['notes/alice/todo', 'buy milk'],
    ['notes/bob/todo', 'call alice'],
  ]);
  const pathOf = (request: Request) => decodeURIComponent(new URL(request.url).pathname.slice(1));
  const guard = requireBrokerToken(broker, pathOf);
  return async (request, context) => {
    if (new URL(request.url).pathname.startsWith('/keyway/')) return keyway(request, context);
    try {
      // The runtime's context (Bun's server, Deno's info) carries the client's address.
      await guard(request, context);
    } catch (error) {
      return guardErrorResponse(error, request);
    }
    const path = pathOf(request);
    const note = notes.get(path);
    return note === undefined
      ? Response.json({ error: 'not_found' }, { status: 404 })
      : Response.json({ path, note });
  };
}
