import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

/** One request a {@link startWebhookReceiver} endpoint received. */
export interface ReceivedWebhook {
  /** `webhook-id`. */
  id: string;
  /** `webhook-timestamp`. */
  timestamp: string;
  /** The body, parsed. */
  event: { id: string; type: string; resource: string; [field: string]: unknown };
  /** Whether the standardwebhooks library verified its signature with the secret. */
  verified: boolean;
}

/**
 * A webhook endpoint on loopback that verifies every request with the standardwebhooks
 * library, as a receiver should, and answers `status(id, nth)`: the nth request (from 1)
 * with that `webhook-id`. `port` 0 (the default) takes a free one.
 */
export async function startWebhookReceiver(options: {
  secret: string;
  status: (id: string, nth: number) => number;
  port?: number;
}): Promise<{
  received: ReceivedWebhook[];
  port: number;
  url: string;
  close(): Promise<void>;
}> {
  const received: ReceivedWebhook[] = [];
  const verifier = new Webhook(options.secret);
  const server = createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    const headers = {
      'webhook-id': String(request.headers['webhook-id']),
      'webhook-timestamp': String(request.headers['webhook-timestamp']),
      'webhook-signature': String(request.headers['webhook-signature']),
    };
    let verified = false;
    try {
      verifier.verify(body, headers);
      verified = true;
    } catch {}
    const id = headers['webhook-id'];
    received.push({
      id,
      timestamp: headers['webhook-timestamp'],
      event: JSON.parse(body),
      verified,
    });
    response.statusCode = options.status(id, received.filter((r) => r.id === id).length);
    response.end();
  });
  server.listen(options.port ?? 0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    received,
    port,
    url: `http://127.0.0.1:${port}/hooks`,
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}
