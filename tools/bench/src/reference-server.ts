// A reference server for the loopback benchmark, run in its own process: `bare` (node:http),
// `hono` (Hono on @hono/node-server) or `floor` (node:http doing the floor of a token check
// first: the bearer's HMAC, its id hash and one prepared point read of its row in the SQLite
// file BENCH_FLOOR_DB, keyed with BENCH_FLOOR_ROOT_KEY). It answers each path of BENCH_ROUTES
// (JSON: path → { status, headers, body }) with exactly those bytes, and prints where it
// listens.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import Database from 'better-sqlite3';
import { Hono } from 'hono';
import { type FloorRow, floorCheck, tagKeyOf } from './floor.js';

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
} else if (kind === 'floor') {
  const db = new Database(process.env.BENCH_FLOOR_DB ?? '');
  db.pragma('journal_mode = WAL');
  const find = db.prepare('SELECT scopes, expires_at FROM keyway_tokens WHERE id_hash = ?');
  const check = floorCheck(
    tagKeyOf(process.env.BENCH_FLOOR_ROOT_KEY ?? ''),
    (idHash) => find.get(idHash) as FloorRow | undefined,
  );
  const server = createServer((req, res) => {
    const canned = routes.get(req.url ?? '');
    const token = /^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (canned === undefined || token === undefined) {
      res.writeHead(404).end();
      return;
    }
    check(token, 'acme').then(
      () => {
        res.writeHead(canned.status, canned.headers);
        res.end(canned.body);
      },
      () => res.writeHead(401).end(),
    );
  });
  server.listen(0, '127.0.0.1', () => {
    console.log(`listening on http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  });
} else {
  throw new Error(`unknown reference server ${kind}`);
}
