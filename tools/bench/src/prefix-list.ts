import { rootPrincipal } from '@keyway/core';
import { postgresStorage } from '@keyway/store-postgres';
import { sqliteStorage } from '@keyway/store-sqlite';
import { benchBroker, postgresConnections, sqliteConnections, tenantsOf } from './fixtures.js';
import { type Budget, type Compared, compare } from './measure.js';

export interface PrefixListRow extends Compared {
  engine: 'sqlite' | 'postgres';
  size: number;
}

/**
 * A 100-item page of one tenant's connections (`prefix=t<k>`) on a table of `size`
 * connections in tenants of 1,000 each, through `broker.connections.list`, against the adapter's
 * own SQL for that page run straight on the driver (the floor).
 */
export async function benchPrefixList(options: {
  cacheDir: string;
  postgresUrl: string;
  size: number;
  budget: Budget;
  log: (line: string) => void;
}): Promise<PrefixListRow[]> {
  const rows: PrefixListRow[] = [];
  let tenant = 0;
  const nextPrefix = () => `t${tenant++ % tenantsOf(options.size)}`;
  // Each engine's storage, and its driver running a statement of the shared SQL layer.
  const engines = {
    sqlite: async () => {
      const storage = sqliteStorage(await sqliteConnections(options.cacheDir, options.size));
      return {
        storage,
        run: (sql: string, params: unknown[]) => storage.database.prepare(sql).all(...params),
      };
    },
    postgres: async () => {
      const url = await postgresConnections(options.postgresUrl, options.cacheDir, options.size);
      const storage = await postgresStorage({ connectionString: url });
      return { storage, run: (sql: string, params: unknown[]) => storage.pool.query(sql, params) };
    },
  };
  for (const engine of ['sqlite', 'postgres'] as const) {
    const { storage, run } = await engines[engine]();
    const broker = benchBroker(storage);
    const floor = () => {
      const { sql, params } = storage.listConnectionsSql({ within: [nextPrefix()], limit: 101 });
      return run(sql, params);
    };
    try {
      const first = await broker.connections.list(rootPrincipal(), { prefix: 't0', limit: 100 });
      if (first.items.length !== 100) throw new Error(`the page held ${first.items.length} items`);
      // One pass over every tenant's first page first: measured warm, as a serving database.
      for (let k = 0; k < tenantsOf(options.size); k++) await floor();
      const result = await compare(
        () => broker.connections.list(rootPrincipal(), { prefix: nextPrefix(), limit: 100 }),
        floor,
        options.budget,
      );
      rows.push({ engine, size: options.size, ...result });
    } finally {
      await broker.close();
    }
  }
  for (const row of rows) {
    options.log(
      `prefix list ${row.engine} ${row.size}: p50 ${(row.subject.p50 / 1000).toFixed(2)} ms, p99 ${(row.subject.p99 / 1000).toFixed(2)} ms (floor p50 ${(row.floor.p50 / 1000).toFixed(2)} ms)`,
    );
  }
  return rows;
}
