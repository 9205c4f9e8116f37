import { once } from 'node:events';
import { createServer } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { createBroker, generateVaultKey } from '@keyway/core';
import { memoryStorage } from '@keyway/store-memory';
import { createHandler } from '../../src/index.js';
import { continueOnRead, toNodeHandler } from '../../src/node/index.js';

/*
 * Run by Bun (node-on-bun.test.ts): `toNodeHandler` and `continueOnRead` on Bun's
 * `node:http`. Prints one JSON line: what each request got.
 */

const rootKey = 'bun-node-root-key-0123456789abcdefghijklmnop';
const broker = createBroker({ rootKey, storage: memoryStorage(), vaultKeys: [generateVaultKey()] });
const handle = toNodeHandler(createHandler(broker));
const server = createServer(handle);
server.on('checkContinue', continueOnRead(handle));
server.listen(0, '127.0.0.1');
await once(server, 'listening');
const { port } = server.address() as AddressInfo;
const url = `http://127.0.0.1:${port}/api/admin/tokens`;
const headers = { authorization: `Bearer ${rootKey}`, 'content-type': 'application/json' };

/** The status of a mint with `body`, or the failure's message. */
async function mint(body: BodyInit): Promise<number | string> {
  try {
    const response = await fetch(url, { method: 'POST', headers, body });
    await response.text();
    return response.status;
  } catch (error) {
    return (error as Error).message;
  }
}

/** The status lines of the answer to a head that declares `length` and expects 100. */
async function expecting(length: number): Promise<string[]> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  let answer = '';
  socket.setEncoding('utf8').on('data', (chunk: string) => {
    answer += chunk;
  });
  socket.write(
    `POST /api/admin/tokens HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${rootKey}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${length}\r\nExpect: 100-continue\r\n\r\n`,
  );
  while (!answer.endsWith('0\r\n\r\n')) await new Promise((resolve) => setTimeout(resolve, 10));
  socket.destroy();
  return answer.split('\r\n').filter((line) => line.startsWith('HTTP/1.1 '));
}

const result = {
  mint: await mint(JSON.stringify({ name: 'bun', scopes: ['acme'] })),
  past: await mint(new Uint8Array(2 * 1024 * 1024).fill(0x20)),
  farPast: await mint(new Uint8Array(20 * 1024 * 1024).fill(0x20)),
  expecting: await expecting(2 * 1024 * 1024),
};
console.log(JSON.stringify(result));
server.close();
process.exit(0);
