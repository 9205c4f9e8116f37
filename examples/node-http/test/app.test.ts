import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../src/app.js';

const ROOT_KEY = 'example-root-key-0123456789abcdefghijkl';

describe('example: node-http notes app', () => {
  let server: Server;
  let base: string;

  beforeAll(async () => {
    server = createServer(createApp(ROOT_KEY).listener).listen(0, '127.0.0.1');
    await once(server, 'listening');
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    server.closeAllConnections();
    server.close();
    await once(server, 'close');
  });

  it('lets a token minted for notes/alice read her notes and nobody else’s', async () => {
    const minted = await fetch(`${base}/keyway/api/admin/tokens`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ROOT_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'alice', scopes: ['notes/alice'] }),
    });
    expect(minted.status).toBe(201);
    const { access_token } = (await minted.json()) as { access_token: string };
    const auth = { authorization: `Bearer ${access_token}` };

    const own = await fetch(`${base}/notes/alice/todo`, { headers: auth });
    expect(own.status).toBe(200);
    expect(await own.json()).toEqual({ path: 'notes/alice/todo', note: 'buy milk' });

    const other = await fetch(`${base}/notes/bob/todo`, { headers: auth });
    expect(other.status).toBe(403);
    expect(((await other.json()) as { error: string }).error).toBe('insufficient_scope');

    const anonymous = await fetch(`${base}/notes/alice/todo`);
    expect(anonymous.status).toBe(401);
  });
});
