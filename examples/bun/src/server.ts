import { createApp } from '@keyway/example-notes-app';
import { sqliteStorage } from '@keyway/store-sqlite';

/** The part of Bun's API this server uses (the project does not depend on bun-types). */
declare const Bun: {
  serve(options: {
    port: number;
    hostname: string;
    fetch: (request: Request, server: unknown) => Promise<Response>;
  }): { port: number };
};

const rootKey = process.env.KEYWAY_ROOT_KEY;
if (rootKey === undefined) {
  console.error('Set KEYWAY_ROOT_KEY (at least 32 characters).');
  process.exit(1);
}
// KEYWAY_DATABASE: a SQLite file, opened with bun:sqlite; else everything stays in memory.
const database = process.env.KEYWAY_DATABASE;
const app = createApp(rootKey, database === undefined ? undefined : sqliteStorage(database));
// Bun hands the server beside the request: the handler reads the client's address there.
const server = Bun.serve({
  port: Number(process.env.PORT ?? 3000),
  hostname: process.env.HOST ?? '127.0.0.1',
  fetch: (request, bunServer) => app(request, bunServer),
});
console.log(`notes app on http://127.0.0.1:${server.port}, Keyway under /keyway`);
