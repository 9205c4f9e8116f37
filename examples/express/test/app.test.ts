import type { Server } from 'node:http';
import { baseUrlOf, closeServer, exerciseNotesApp } from '@keyway/test-support/examples';
import { afterAll, describe, it } from 'vitest';
import { createApp } from '../src/app.js';

const ROOT_KEY = 'example-root-key-0123456789abcdefghijkl';

describe('example: Express 5 notes app', () => {
  const server: Server = createApp(ROOT_KEY).app.listen(0, '127.0.0.1');
  afterAll(() => closeServer(server));

  it('mints a token through Keyway, reads it back, and lets it read only its own notes', async () => {
    await exerciseNotesApp(await baseUrlOf(server), ROOT_KEY);
  });
});
