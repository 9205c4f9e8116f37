import type { IncomingMessage, ServerResponse } from 'node:http';
import { createApp as createNotesApp } from '@keyway/example-notes-app';
import { toNodeHandler } from '@keyway/http/node';

/**
 * The notes app (examples/notes-app) on Node's own http server: `toNodeHandler` turns each
 * request into a Web `Request`, with the socket's address beside it for the limit of
 * failed authentications, and writes the `Response` back.
 */
export function createApp(rootKey: string): {
  listener: (req: IncomingMessage, res: ServerResponse) => void;
} {
  return { listener: toNodeHandler(createNotesApp(rootKey)) };
}
