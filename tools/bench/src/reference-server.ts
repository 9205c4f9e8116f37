// A reference server for the loopback benchmark, run in its own process: `bare` (node:http)
// or `hono` (Hono on @hono/node-server). It answers each path of BENCH_ROUTES (JSON:
// path → { status, headers, body }) with exactly those bytes, whatever the request says,
// and prints where it listens.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';

export interface CannedResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

const kind = process.argv[2];
const routes = new Map(
  Object.entries(JSON.parse(process.env.BENCH_ROUTES ?? '{}') as Record<string, CannedResponse>),
);

if (kind === 'bare') {
  const server = createServer((req, res) => {
    const canned = routes.get(req.url ?? '');
    if (canned === undefined) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(canned.status, canned.headers);
    res.end(canned.body);
  });
  server.listen(0, '127.0.0.1', () => {
    console.log(`listening on http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  });
} else if (kind === 'hono') {
  const app = new Hono();
  for (const [path, canned] of routes) {
    app.get(path, (c) => c.body(canned.body, canned.status as 200, canned.headers));
  }
  serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => {
    console.log(`listening on http://127.0.0.1:${info.port}`);
  });
} else {
  throw new Error(`unknown reference server ${kind}`);
}
