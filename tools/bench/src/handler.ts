import { rootPrincipal } from '@keyway/core';
import { createHandler } from '@keyway/http';
import { sqliteStorage } from '@keyway/store-sqlite';
import { benchBroker, sqliteTokens } from './fixtures.js';
import { type Budget, type Compared, compare } from './measure.js';

/**
 * The handler in process, `Request` → `Response`, for an authenticated read
 * (`GET /api/admin/tokens/<name>` with a broker token, on SQLite), against a bare function
 * that returns the same `Response`. Both build the same `Request` and read the whole body.
 */
export async function benchHandler(options: {
  cacheDir: string;
  size: number;
  budget: Budget;
}): Promise<Compared> {
  const { file } = await sqliteTokens(options.cacheDir, options.size);
  const broker = benchBroker(sqliteStorage(file));
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
    return await compare(
      async () => {
        await (await handler(new Request(url, { headers }), context)).text();
      },
      async () => {
        await (await bare(new Request(url, { headers }), context)).text();
      },
      options.budget,
    );
  } finally {
    await broker.close();
  }
}
