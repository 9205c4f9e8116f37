import { rootPrincipal } from '@keyway/core';
import { createHandler } from '@keyway/http';
import { sqliteStorage } from '@keyway/store-sqlite';
import Database from 'better-sqlite3';
import { benchBroker, ROOT_KEY, sqliteTokens } from './fixtures.js';
import { FLOOR_TOKEN_READ, type FloorRow, floorCheck, tagKeyOf } from './floor.js';
import { type Budget, type Compared, compare } from './measure.js';

/** The handler against a bare function, and the floor of the same work against it too. */
export interface HandlerResult extends Compared {
  /**
   * A function doing the least the read can do, in process, against the same bare function:
   * the bearer from the `Request`'s headers, the token check's floor (floor.ts), the route's
   * own prepared point read of the token by name, its scopes decoded, the answer's JSON
   * written into the same `Response`.
   */
  sameWork: Compared;
}

/**
 * The handler in process, `Request` → `Response`, for an authenticated read
 * (`GET /api/admin/tokens/<name>` with a broker token, on SQLite), against a bare function
 * that returns the same `Response`. Both build the same `Request` and read the whole body.
 */
export async function benchHandler(options: {
  cacheDir: string;
  size: number;
  budget: Budget;
}): Promise<HandlerResult> {
  const { file } = await sqliteTokens(options.cacheDir, options.size);
  const broker = benchBroker(sqliteStorage(file));
  const db = new Database(file);
  try {
    const issued = await broker.tokens.mint(rootPrincipal(), {
      name: `handler${Date.now()}`,
      scopes: ['acme'],
      expires_in: 3600,
    });
    const handler = createHandler(broker);
    const url = `http://127.0.0.1/api/admin/tokens/${issued.name}`;
    const headers = { authorization: `Bearer ${issued.access_token}` };
    const context = { clientAddress: '127.0.0.1' };
    const sample = await handler(new Request(url, { headers }), context);
    if (sample.status !== 200) throw new Error(`the handler answered ${sample.status}`);
    const body = await sample.text();
    const responseHeaders = Object.fromEntries(sample.headers);
    const bare = async (_request: Request, _context: unknown) =>
      new Response(body, { status: 200, headers: responseHeaders });

    const find = db.prepare(FLOOR_TOKEN_READ);
    const check = floorCheck(tagKeyOf(ROOT_KEY), (idHash) => find.get(idHash) as FloorRow);
    const byName = db.prepare(
      'SELECT name, scopes, expires_at, created_at, created_by FROM keyway_tokens WHERE name = ? AND expires_at > ?',
    );
    const value = JSON.parse(body) as unknown;
    const sameWork = async (request: Request, _context: unknown) => {
      const token = /^Bearer (\S+)$/.exec(request.headers.get('authorization') ?? '')?.[1];
      if (token === undefined) return new Response(null, { status: 401 });
      await check(token, 'acme');
      const row = byName.get(issued.name, Date.now()) as { scopes: string } | undefined;
      if (row === undefined) return new Response(null, { status: 404 });
      JSON.parse(row.scopes);
      return new Response(JSON.stringify(value), { status: 200, headers: responseHeaders });
    };
    const floorAnswer = await sameWork(new Request(url, { headers }), context);
    if (floorAnswer.status !== 200 || (await floorAnswer.text()) !== body) {
      throw new Error('the floor of the handler does not answer as the handler does');
    }

    const bareCall = async () => {
      await (await bare(new Request(url, { headers }), context)).text();
    };
    const compared = await compare(
      async () => {
        await (await handler(new Request(url, { headers }), context)).text();
      },
      bareCall,
      options.budget,
    );
    const floored = await compare(
      async () => {
        await (await sameWork(new Request(url, { headers }), context)).text();
      },
      bareCall,
      options.budget,
    );
    return { ...compared, sameWork: floored };
  } finally {
    db.close();
    await broker.close();
  }
}
