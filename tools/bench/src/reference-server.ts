// A reference server for the loopback benchmark, run in its own process: `bare` (node:http),
// `hono` (Hono on @hono/node-server) or `floor`: node:http doing the least an authenticated
// read can do — the floor of a token check (the bearer's HMAC, its id hash and one prepared
// point read of its row in the SQLite file BENCH_FLOOR_DB, keyed with BENCH_FLOOR_ROOT_KEY),
// then the route's own prepared point read (the token by name, the connection by id), the
// JSON its row holds decoded, and the answer's JSON written. It answers each path of
// BENCH_ROUTES (JSON: path → { status, headers, body }) with exactly those bytes, and prints
// where it listens.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import Database from 'better-sqlite3';
import { Hono } from 'hono';
import { FLOOR_TOKEN_READ, type FloorRow, floorCheck, tagKeyOf } from './floor.js';

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
  const find = db.prepare(FLOOR_TOKEN_READ);
  const check = floorCheck(
    tagKeyOf(process.env.BENCH_FLOOR_ROOT_KEY ?? ''),
    (idHash) => find.get(idHash) as FloorRow | undefined,
  );
  /** Each route's own read: its row, the JSON the row holds decoded; null when absent. */
  const tokenByName = db.prepare(
    'SELECT name, scopes, expires_at, created_at, created_by FROM keyway_tokens WHERE name = ? AND expires_at > ?',
  );
  const connectionById = db.prepare(
    'SELECT id, provider_id, status, state, created_at, updated_at FROM keyway_connections WHERE id = ?',
  );
  const readOf = (path: string): (() => unknown) => {
    const token = /^\/api\/admin\/tokens\/([^/]+)$/.exec(path)?.[1];
    if (token !== undefined) {
      return () => {
        const row = tokenByName.get(token, Date.now()) as { scopes: string } | undefined;
        return row === undefined ? null : JSON.parse(row.scopes);
      };
    }
    const connection = /^\/api\/oauth\/connections\/(.+)$/.exec(path)?.[1];
    if (connection !== undefined) {
      return () => {
        const row = connectionById.get(connection) as { state: string } | undefined;
        return row === undefined ? null : JSON.parse(row.state);
      };
    }
    throw new Error(`the floor has no read for ${path}`);
  };
  const answers = new Map(
    [...routes].map(([path, canned]) => [
      path,
      { canned, read: readOf(path), value: JSON.parse(canned.body) as unknown },
    ]),
  );
  const server = createServer((req, res) => {
    const route = answers.get(req.url ?? '');
    const token = /^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (route === undefined || token === undefined) {
      res.writeHead(404).end();
      return;
    }
    check(token, 'acme').then(
      () => {
        if (route.read() === null) {
          res.writeHead(404).end();
          return;
        }
        // The answer's JSON written anew: the same bytes as Keyway's.
        res.writeHead(route.canned.status, route.canned.headers);
        res.end(JSON.stringify(route.value));
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
