import { generateVaultKey, rootPrincipal } from '@keyway/core';
import { postgresStorage } from '@keyway/store-postgres';
import { createTestDatabase } from '@keyway/test-support/postgres';
import { type BrokerProcess, startBrokerProcess } from '@keyway/test-support/processes';
import { ROOT_KEY, upstreamConnection } from './fixtures.js';
import { CALL, CONNECTION, MCP_HEADERS } from './gateway.js';
import { median } from './measure.js';
import { failedOf, load, startMcpUpstream } from './processes.js';

/** The sizes of a scale-out run. */
export interface ScaleOutOptions {
  /** Autocannon connections in all, shared among the processes loaded. */
  connections: number;
  seconds: number;
  rounds: number;
}

/** Requests per second with 1, 2 and 3 processes (medians of the rounds), per request kind. */
export interface ScaleOutResult {
  processes: number[];
  /** `GET /api/admin/tokens/<name>` with a broker token. */
  read: number[];
  /** `tools/call` through the gateway (`POST /mcp/<path>`). */
  call: number[];
  /**
   * Answers that were not 2xx, errors and timeouts over every run, by request kind, then by
   * failure kind (`502`, `errors`, `timeouts`).
   */
  failed: { read: Record<string, number>; call: Record<string, number> };
}

/**
 * Scale-out on PostgreSQL: three `keyway serve` processes on one database, in front of the
 * SDK's MCP server; the authenticated read and a `tools/call` through the gateway loaded on
 * one, two and three of them at once (the connections split among them, one autocannon per
 * process, all in this process: the load generator shares the machine's cores with them).
 */
export async function benchScaleOut(
  postgresUrl: string,
  options: ScaleOutOptions,
): Promise<ScaleOutResult> {
  const database = await createTestDatabase(postgresUrl);
  const stops: (() => Promise<void>)[] = [];
  try {
    const upstream = await startMcpUpstream();
    stops.push(() => upstream.stop());
    const vaultKey = generateVaultKey();
    const storage = await postgresStorage({ connectionString: database.url });
    const seeding = await upstreamConnection(storage, upstream.base, vaultKey, CONNECTION);
    const issued = await seeding.tokens.mint(rootPrincipal(), {
      name: 'scale',
      scopes: ['acme'],
      expires_in: 86_400,
    });
    await seeding.close();

    const cluster: BrokerProcess[] = [];
    for (let i = 0; i < 3; i++) {
      const started = await startBrokerProcess({
        KEYWAY_ROOT_KEY: ROOT_KEY,
        KEYWAY_DATABASE: database.url,
        KEYWAY_VAULT_KEYS: vaultKey,
        KEYWAY_LOG_LEVEL: 'silent',
        KEYWAY_ALLOWED_HOSTS: '127.0.0.1',
      });
      stops.push(() => started.stop());
      cluster.push(started);
    }
    const authorization = `Bearer ${issued.access_token}`;
    let failed = { read: {} as Record<string, number>, call: {} as Record<string, number> };
    /** Requests per second of `count` processes loaded at once. */
    const rate = async (count: number, kind: 'read' | 'call') => {
      const each = Math.max(1, Math.floor(options.connections / count));
      const loads = await Promise.all(
        cluster.slice(0, count).map((broker) =>
          kind === 'read'
            ? load({
                url: `${broker.url}/api/admin/tokens/scale`,
                connections: each,
                seconds: options.seconds,
                headers: { authorization },
              })
            : load({
                url: `${broker.url}/mcp/${CONNECTION}`,
                connections: each,
                seconds: options.seconds,
                method: 'POST',
                headers: { ...MCP_HEADERS, authorization },
                body: () => CALL,
              }),
        ),
      );
      failed[kind] = failedOf([failed[kind], ...loads.map((one) => one.failed)]);
      return loads.reduce((sum, one) => sum + one.requestsPerSecond, 0);
    };
    // Warm every process on both paths, then alternate the sizes round by round.
    await rate(3, 'read');
    await rate(3, 'call');
    failed = { read: {}, call: {} };
    const processes = [1, 2, 3];
    const runs = {
      read: processes.map(() => [] as number[]),
      call: processes.map(() => [] as number[]),
    };
    for (let round = 0; round < options.rounds; round++) {
      for (const [at, count] of processes.entries()) {
        runs.read[at]?.push(await rate(count, 'read'));
        runs.call[at]?.push(await rate(count, 'call'));
      }
    }
    return {
      processes,
      read: runs.read.map(median),
      call: runs.call.map(median),
      failed,
    };
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => {});
    await database.drop();
  }
}
