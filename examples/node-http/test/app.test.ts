import { createServer } from 'node:http';
import { baseUrlOf, closeServer, exerciseNotesApp } from '@keyway/test-support/examples';
import { afterAll, describe, it } from 'vitest';
import { createApp } from '../src/app.js';

const ROOT_KEY = 'example-root-key-0123456789abcdefghijkl';

describe('example: node-http notes app', () => {
  const server = createServer(createApp(ROOT_KEY).listener).listen(0, '127.0.0.1');
  afterAll(() => closeServer(server));

  it('mints a token through Keyway, reads it back, and lets it read only its own notes', async () => {
    await exerciseNotesApp(await baseUrlOf(server), ROOT_KEY);
  });
});
