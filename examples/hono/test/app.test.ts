import type { Server } from 'node:http';
import { serve } from '@hono/node-server';
import { baseUrlOf, closeServer, exerciseNotesApp } from '@keyway/test-support/examples';
import { afterAll, describe, it } from 'vitest';
import { createApp } from '../src/app.js';

const ROOT_KEY = 'example-root-key-0123456789abcdefghijkl';

describe('example: Hono notes app on @hono/node-server', () => {
  const server = serve({
    fetch: createApp(ROOT_KEY).app.fetch,
    port: 0,
    hostname: '127.0.0.1',
  }) as Server;
  afterAll(() => closeServer(server));

  it('mints a token through Keyway, reads it back, and lets it read only its own notes', async () => {
    await exerciseNotesApp(await baseUrlOf(server), ROOT_KEY);
  });
});
