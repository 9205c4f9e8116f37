import { createApp } from '@keyway/example-notes-app';
import { sqliteStorage } from '@keyway/store-sqlite';

/** The part of Deno's API this server uses. */
declare const Deno: {
  env: { get(name: string): string | undefined };
  exit(code: number): never;
  serve(
    options: { port: number; hostname: string; onListen(address: { port: number }): void },
    handler: (request: Request, info: unknown) => Promise<Response>,
  ): unknown;
};

const rootKey = Deno.env.get('KEYWAY_ROOT_KEY');
if (rootKey === undefined) {
  console.error('Set KEYWAY_ROOT_KEY (at least 32 characters).');
  Deno.exit(1);
}
// KEYWAY_DATABASE: a SQLite file, opened with node:sqlite; else everything stays in memory.
const database = Deno.env.get('KEYWAY_DATABASE');
const app = createApp(rootKey, database === undefined ? undefined : sqliteStorage(database));
// Deno hands `info` beside the request: the handler reads `info.remoteAddr` there.
Deno.serve(
  {
    port: Number(Deno.env.get('PORT') ?? 3000),
    hostname: Deno.env.get('HOST') ?? '127.0.0.1',
    onListen: ({ port }) => {
      console.log(`notes app on http://127.0.0.1:${port}, Keyway under /keyway`);
    },
  },
  (request, info) => app(request, info),
);
