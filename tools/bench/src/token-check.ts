import { randomBytes } from 'node:crypto';
import type { Broker } from '@keyway/core';
import { memoryStorage } from '@keyway/store-memory';
import { postgresStorage } from '@keyway/store-postgres';
import { sqliteStorage } from '@keyway/store-sqlite';
import Database from 'better-sqlite3';
import pg from 'pg';
import { benchBroker, postgresTokens, ROOT_KEY, SAMPLE_TOKENS, sqliteTokens } from './fixtures.js';
import { FLOOR_TOKEN_READ, type FloorRow, floorCheck, idHashOf, tagKeyOf } from './floor.js';
import {
  type Budget,
  type Compared,
  type ComparedInFlight,
  compare,
  compareInFlight,
} from './measure.js';

export type Engine = 'memory' | 'sqlite' | 'postgres';

/** One token-check figure: an engine at a table size, Keyway against its floor. */
export interface TokenCheckRow extends Compared {
  engine: Engine;
  size: number;
  /**
   * PostgreSQL: the same checks {@link IN_FLIGHT} at a time, Keyway's pool against a floor
   * pool of the same size. One at a time, a check is a round trip to another process, and
   * how soon each side is woken decides most of it (rounds of one run differ by a third).
   */
  inFlight?: ComparedInFlight;
}

/** How many PostgreSQL checks are kept in flight (a server's concurrent requests). */
export const IN_FLIGHT = 8;

const TAG_KEY = tagKeyOf(ROOT_KEY);

/** Checks `tokens` in turn: each call authenticates one and authorizes a path under its scope. */
function subjects(broker: Broker, floor: ReturnType<typeof floorCheck>, tokens: string[]) {
  let a = 0;
  let b = 0;
  return {
    keyway: async () => {
      const i = a++ % tokens.length;
      broker.authorize(await broker.authenticate(tokens[i] as string), `acme/t${i}/x`);
    },
    floor: () => {
      const i = b++ % tokens.length;
      return floor(tokens[i] as string, `acme/t${i}/x`);
    },
  };
}

/** Token check on memory storage at `size` live tokens (built in this process). */
async function onMemory(size: number, budget: Budget): Promise<Compared> {
  const storage = memoryStorage();
  const broker = benchBroker(storage);
  const floorRows = new Map<string, FloorRow>();
  const tokens: string[] = [];
  const far = Date.UTC(2099, 0, 1);
  for (let i = 0; i < Math.min(SAMPLE_TOKENS, size); i++) {
    const issued = await broker.tokens.mint(
      { kind: 'root' },
      { name: `sample${i}`, scopes: [`acme/t${i}`], expires_in: 2_592_000 },
    );
    tokens.push(issued.access_token);
    floorRows.set(idHashOf(issued.access_token), {
      name: issued.name,
      scopes: JSON.stringify(issued.scopes),
      expires_at: Date.parse(issued.expires_at),
      audience: '',
      tools: '',
    });
  }
  for (let i = tokens.length; i < size; i++) {
    const idHash = randomBytes(32).toString('hex');
    const record = {
      idHash,
      name: `filler${i}`,
      scopes: ['filler/**'],
      expiresAt: far,
      createdAt: 0,
      createdBy: 'root',
    };
    await storage.insertToken(record, 0);
    floorRows.set(idHash, {
      name: record.name,
      scopes: '["filler/**"]',
      expires_at: far,
      audience: '',
      tools: '',
    });
  }
  const run = subjects(
    broker,
    floorCheck(TAG_KEY, (idHash) => floorRows.get(idHash)),
    tokens,
  );
  try {
    return await compare(run.keyway, run.floor, budget);
  } finally {
    await broker.close();
  }
}

async function onSqlite(dir: string, size: number, budget: Budget): Promise<Compared> {
  const { file, tokens } = await sqliteTokens(dir, size);
  const broker = benchBroker(sqliteStorage(file));
  const bare = new Database(file);
  bare.pragma('journal_mode = WAL');
  const find = bare.prepare(FLOOR_TOKEN_READ);
  const run = subjects(
    broker,
    floorCheck(TAG_KEY, (idHash) => find.get(idHash) as FloorRow | undefined),
    tokens,
  );
  try {
    return await compare(run.keyway, run.floor, budget);
  } finally {
    await broker.close();
    bare.close();
  }
}

async function onPostgres(
  serverUrl: string,
  dir: string,
  size: number,
  budget: Budget,
): Promise<Compared & { inFlight: ComparedInFlight }> {
  const { url, tokens } = await postgresTokens(serverUrl, dir, size);
  // The floor's pool is Keyway's: node-postgres, as many connections (the adapter's default).
  const broker = benchBroker(await postgresStorage({ connectionString: url, maxConnections: 10 }));
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  // An idle connection the server ends as it stops (57P01) is no failure of the benchmark.
  pool.on('error', (error: Error & { code?: string }) => {
    if (error.code !== '57P01') throw error;
  });
  const run = subjects(
    broker,
    floorCheck(
      TAG_KEY,
      async (idHash) =>
        (
          await pool.query<FloorRow>({
            name: 'floor-token',
            text: FLOOR_TOKEN_READ.replace('?', '$1'),
            values: [idHash],
          })
        ).rows[0],
    ),
    tokens,
  );
  try {
    const alone = await compare(run.keyway, run.floor, budget);
    const inFlight = await compareInFlight(run.keyway, run.floor, IN_FLIGHT, budget);
    return { ...alone, inFlight };
  } finally {
    await broker.close();
    await pool.end();
  }
}

/** Token check against its floor, per engine and table size. */
export async function benchTokenCheck(options: {
  sizes: number[];
  cacheDir: string;
  postgresUrl: string;
  budget: Budget;
  log: (line: string) => void;
}): Promise<TokenCheckRow[]> {
  const rows: TokenCheckRow[] = [];
  for (const engine of ['memory', 'sqlite', 'postgres'] as const) {
    for (const size of options.sizes) {
      const result: Compared & { inFlight?: ComparedInFlight } =
        engine === 'memory'
          ? await onMemory(size, options.budget)
          : engine === 'sqlite'
            ? await onSqlite(options.cacheDir, size, options.budget)
            : await onPostgres(options.postgresUrl, options.cacheDir, size, options.budget);
      rows.push({ engine, size, ...result });
      options.log(
        `token check ${engine} ${size}: ${Math.round(result.subject.opsPerSecond)}/s vs floor ${Math.round(result.floor.opsPerSecond)}/s = ${(result.ratio * 100).toFixed(0)}%, p99 ${result.subject.p99.toFixed(1)} µs (floor ${result.floor.p99.toFixed(1)} µs)`,
      );
      const { inFlight } = result;
      if (inFlight !== undefined) {
        options.log(
          `  ${inFlight.inFlight} in flight: ${Math.round(inFlight.subject)}/s vs floor ${Math.round(inFlight.floor)}/s = ${(inFlight.ratio * 100).toFixed(0)}% (rounds ${inFlight.rounds.map((r) => (r * 100).toFixed(0)).join(', ')})`,
        );
      }
    }
  }
  return rows;
}
