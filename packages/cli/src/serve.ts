import { once } from 'node:events';
import { linkSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import {
  createServer,
  get as httpGet,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { get as httpsGet } from 'node:https';
import type { AddressInfo } from 'node:net';
import {
  type Broker,
  type BrokerConfig,
  createBroker,
  generateVaultKey,
  type RateLimitsConfig,
  type Storage,
} from '@keyway/core';
import { createHandler } from '@keyway/http';
import { createMetrics, type KeywayMetrics } from '@keyway/http/metrics';
import { continueOnRead, toNodeHandler } from '@keyway/http/node';
import { memoryStorage } from '@keyway/store-memory';
import { postgresStorage } from '@keyway/store-postgres';
import { sqliteStorage } from '@keyway/store-sqlite';
import type { DestinationStream } from 'pino';
import { type LogLevel, type MetricsServer, serveMetrics, serverLog } from './observability.js';
import { foreignKeysMessage, listenFailure } from './start-failures.js';

/** Default database of `keyway serve`: a SQLite file in the working directory. */
export const DEFAULT_DATABASE = 'keyway.sqlite';

export const isPostgres = (database: string) => /^postgres(ql)?:\/\//i.test(database);

/**
 * Opens the storage a `KEYWAY_DATABASE` value names: a `postgres://` (or `postgresql://`)
 * URL, or else a SQLite file path (`:memory:` for a throwaway in-memory database). On
 * PostgreSQL, `onIdleError` is told when the server ends an idle connection (a restart, a
 * failover); the pool opens another at the next query.
 */
export async function openStorage(
  database: string,
  onIdleError?: (error: Error) => void,
): Promise<Storage> {
  try {
    if (isPostgres(database)) {
      return await postgresStorage({
        connectionString: database,
        ...(onIdleError === undefined ? {} : { onIdleError }),
      });
    }
    if (process.versions.bun !== undefined || 'Deno' in globalThis)
      return await sqliteStorage(database);
    // On Node, the CLI's own better-sqlite3 (its dependency, wherever npm put it: a global
    // install leaves @keyway/store-sqlite unable to see it).
    const { default: Database } = await import('better-sqlite3');
    return await sqliteStorage(database, { driver: Database });
  } catch (cause) {
    // Which database, in the operator's words (its password never): the driver's message
    // alone names no variable, and a host and port may be all it says.
    const reason = cause instanceof Error ? cause.message : String(cause);
    throw new Error(`KEYWAY_DATABASE (${describeDatabase(database)}) cannot be opened: ${reason}`, {
      cause,
    });
  }
}

/**
 * The vault keys to use when `KEYWAY_VAULT_KEYS` is not set: for a SQLite file, the keys
 * kept beside it in `<file>.vault-keys` (created with one new key, readable by its owner
 * only); for `:memory:`, a throwaway key. PostgreSQL deployments must set the keys, since
 * every instance sharing the database must share them too.
 */
export function defaultVaultKeys(database: string, log: (line: string) => void): string[] {
  if (isPostgres(database)) {
    throw new Error(
      'KEYWAY_VAULT_KEYS must be set with PostgreSQL: every instance sharing the database needs the same keys',
    );
  }
  if (database === ':memory:') return [generateVaultKey()];
  const file = `${database}.vault-keys`;
  const temporary = `${file}.${process.pid}.tmp`;
  try {
    writeFileSync(temporary, `${generateVaultKey()}\n`, { mode: 0o600 });
  } catch (cause) {
    const { code } = cause as NodeJS.ErrnoException;
    throw new Error(
      `KEYWAY_DATABASE (${describeDatabase(database)}): its vault key file ${file} cannot be written ` +
        `(${code ?? (cause as Error).message}): create the directory, let this user write there, ` +
        'or set KEYWAY_VAULT_KEYS',
      { cause },
    );
  }
  try {
    // link() fails if the file exists: of two processes starting together, one creates it
    // whole and the other reads it, never a half-written file.
    linkSync(temporary, file);
    log(`Generated a vault key and kept it in ${file}: back it up with the database.`);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  } finally {
    rmSync(temporary, { force: true });
  }
  return readFileSync(file, 'utf8')
    .split(/[\s,]+/)
    .filter((key) => key !== '');
}

/** What a log line may say about the database: a URL without its password. */
function describeDatabase(database: string): string {
  if (!isPostgres(database)) return `sqlite ${database}`;
  try {
    const url = new URL(database);
    if (url.password) url.password = '***';
    return `postgres ${url.toString()}`;
  } catch {
    return 'postgres';
  }
}

/** Options of {@link serve}, read from the environment by `keyway serve` (docs/api.md §0). */
export interface ServeOptions {
  /** Listening port; `0` picks a free one. Default 8787. */
  port?: number;
  /** Listening address; default `127.0.0.1` (`0.0.0.0` or `::` listens publicly). */
  host?: string;
  /**
   * Behind a proxy you run: take the client address from the last `X-Forwarded-For` entry
   * and the scheme and host from `X-Forwarded-Proto`/`-Host`. Default `false`.
   */
  trustProxy?: boolean;
  /**
   * Rate limits (docs/api.md §12); default on. With PostgreSQL the counters are kept in the
   * database, shared by every instance, unless `shared` says otherwise.
   */
  rateLimits?: RateLimitsConfig | false;
  /** Node server limits: see {@link DEFAULT_SERVER_LIMITS}. */
  limits?: Partial<ServerLimits>;
  /** The root key; generated when absent. */
  rootKey?: string;
  /** A SQLite file path or a `postgres://` URL. Default `keyway.sqlite`. */
  database?: string;
  /** Vault keys, the first encrypting; default {@link defaultVaultKeys}. */
  vaultKeys?: string[];
  /** Hosts outbound requests may reach over http and on private addresses (development). */
  allowedHosts?: string[];
  /** Public base URL; the OAuth callback is `{baseUrl}/api/oauth/callback`. Default `http://localhost:<port>`. */
  baseUrl?: string;
  /** Provider endpoints on or off. Default on for the standalone server. */
  providerManagement?: boolean;
  /** Serves the inspector at `/inspector` (docs/api.md §9). Default true. */
  inspector?: boolean;
  /**
   * Origins that may frame the hosted connect page (docs/api.md §19,
   * `KEYWAY_CONNECT_FRAME_ANCESTORS`). Default none.
   */
  connectFrameAncestors?: string[];
  /** Where the client-ID metadata document is hosted, when not at its default URL. */
  clientMetadataUrl?: string;
  /** Origins `redirect_to` may point to. */
  allowedRedirects?: string[];
  /**
   * Webhook endpoints (docs/api.md §11): `KEYWAY_WEBHOOK_URL`, `KEYWAY_WEBHOOK_SECRET` and
   * optionally `KEYWAY_WEBHOOK_TYPES` (comma-separated event types) give one.
   */
  webhooks?: { url: string; secret: string; types?: string[] }[];
  /**
   * Where `jwt_bearer` providers read their assertions (`KEYWAY_ASSERTION_SOURCES`,
   * docs/api.md §14). Default none.
   */
  assertionSources?: BrokerConfig['assertionSources'];
  /**
   * Sign-in for MCP clients (docs/api.md §17): `KEYWAY_SIGN_IN` and the `KEYWAY_SIGN_IN_*`
   * variables. Default off.
   */
  signIn?: BrokerConfig['signIn'];
  /**
   * The portal (docs/api.md §18): `KEYWAY_AUDIT_TOOL_CALLS`, `KEYWAY_PORTAL_LIST_DEADLINE_MS`,
   * `KEYWAY_PORTAL_MAX_SESSIONS`. Default: its defaults, calls not recorded.
   */
  portal?: BrokerConfig['portal'];
  /** Days audit events are kept (`KEYWAY_AUDIT_RETENTION_DAYS`). Default 90. */
  auditRetentionDays?: number;
  /**
   * Refresh connections no refresh has touched for this long (`KEYWAY_REFRESH_IDLE_AFTER`,
   * a duration such as `7d`). Default off.
   */
  refreshIdleAfter?: string | number;
  /**
   * Refresh a token this long before it expires, at most half its lifetime (docs/api.md §5,
   * `KEYWAY_REFRESH_MARGIN_MS`). Default 60000. Every instance sharing the storage sets the same.
   */
  refreshMarginMs?: number;
  /**
   * How long one instance holds a connection's refresh before another may take it over
   * (`KEYWAY_REFRESH_LEASE_MS`). Default 30000. Every instance sharing the storage sets the same.
   */
  refreshLeaseMs?: number;
  /** Refresh ahead (`KEYWAY_REFRESH_AHEAD`): `rotating`, `all`, or `false` (the default). */
  refreshAhead?: false | 'rotating' | 'all';
  /** `connection.expiring` this long before a refresh token's known end, ms. Default 7 days. */
  expiringNotice?: number;
  /** The MCP gateway's limits (`createBroker({ gateway })`, docs/api.md §13). */
  gateway?: BrokerConfig['gateway'];
  /** Where lines for the operator go; default `console.log`. */
  log?: (line: string) => void;
  /** The request log's level (`KEYWAY_LOG_LEVEL`): `info` (default) logs every request. */
  logLevel?: LogLevel;
  /** Where request log lines go (JSON, one per line); default standard output. */
  logDestination?: DestinationStream;
  /** Fields added to every request log line (a worker's `pid`). */
  logFields?: Record<string, string | number>;
  /** Serves Prometheus metrics at `/metrics` on this port (`KEYWAY_METRICS_PORT`). Default off. */
  metricsPort?: number;
  /** The metrics listener's address (`KEYWAY_METRICS_HOST`). Default `127.0.0.1`. */
  metricsHost?: string;
  /**
   * Collects the metrics without serving them (a worker of `keyway serve` with
   * `KEYWAY_WORKERS`: its primary serves every worker's at `KEYWAY_METRICS_PORT`).
   */
  collectMetrics?: boolean;
}

/** Limits of the Node HTTP server against slow or too many clients. */
export interface ServerLimits {
  /** Time to receive a request's headers, ms (`KEYWAY_HEADERS_TIMEOUT_MS`). */
  headersTimeoutMs: number;
  /** Time to receive a whole request, ms (`KEYWAY_REQUEST_TIMEOUT_MS`). */
  requestTimeoutMs: number;
  /** Idle time of a keep-alive connection, ms (`KEYWAY_KEEP_ALIVE_TIMEOUT_MS`). */
  keepAliveTimeoutMs: number;
  /** Open connections at once; more are refused (`KEYWAY_MAX_CONNECTIONS`). */
  maxConnections: number;
  /**
   * How long `close()` lets requests in flight finish before it cuts them, ms
   * (`KEYWAY_SHUTDOWN_TIMEOUT_MS`).
   */
  shutdownTimeoutMs: number;
}

export const DEFAULT_SERVER_LIMITS: ServerLimits = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  maxConnections: 1_000,
  shutdownTimeoutMs: 10_000,
};

/** Default listening address: this machine only. */
export const DEFAULT_HOST = '127.0.0.1';

/** A running broker server. */
export interface RunningServer {
  readonly server: Server;
  readonly broker: Broker;
  /** Where the server is reached: `http://127.0.0.1:<port>` by default. */
  readonly url: string;
  /** Whether the root key was generated (and printed) at start. */
  readonly generatedRootKey: boolean;
  /** Where the metrics are served, or `null` when they are off or served by a primary. */
  readonly metricsUrl: string | null;
  /** The metrics collected, or `null` when they are off. */
  readonly metrics: KeywayMetrics | null;
  close(): Promise<void>;
}

/** What `keyway serve` says, once, of a root key it generated. */
export function generatedRootKeyLines(rootKey: string): string[] {
  return [
    'No KEYWAY_ROOT_KEY was set, so a root key was generated. It is shown only this once:',
    `  KEYWAY_ROOT_KEY=${rootKey}`,
    'Broker tokens minted with it stop working when the broker restarts with another key;',
    'set KEYWAY_ROOT_KEY to keep them.',
  ];
}

/** A fresh root key: 32 random bytes, base64url (43 characters). */
export function generateRootKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return Buffer.from(bytes).toString('base64url');
}

/**
 * Starts the standalone broker on Node `http`, on SQLite (`keyway.sqlite`) unless told
 * otherwise.
 *
 * @example
 * const running = await serve({ port: 0, rootKey });
 * await fetch(`${running.url}/api/admin/tokens`, { headers: { authorization: `Bearer ${rootKey}` } });
 * await running.close();
 */
export async function serve(options: ServeOptions = {}): Promise<RunningServer> {
  const log = options.log ?? ((line: string) => console.log(line));
  const generatedRootKey = options.rootKey === undefined;
  const rootKey = options.rootKey ?? generateRootKey();
  const database = options.database ?? DEFAULT_DATABASE;
  await checkServeOptions(options, rootKey);
  const vaultKeys = options.vaultKeys ?? defaultVaultKeys(database, log);
  const serverLogger = serverLog(
    options.logLevel ?? 'info',
    options.logDestination,
    options.logFields ?? null,
  );
  const metrics =
    options.metricsPort === undefined && options.collectMetrics !== true ? null : createMetrics();
  const storage = await openStorage(database, (error) =>
    serverLogger.failure(
      'the database ended an idle connection (a restart or a failover?); the next query opens another',
      error,
    ),
  );
  // The broker is built once the port is known: the default base URL contains it.
  let handle: ReturnType<typeof toNodeHandler> | null = null;
  const limits = { ...DEFAULT_SERVER_LIMITS, ...options.limits };
  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    if (handle === null) {
      res.writeHead(503, { connection: 'close' }).end();
      return;
    }
    inFlight.add(res);
    res.on('close', settled);
    handle(req, res);
  };
  const server = createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      // How often the two timeouts above are checked (Node's default is every 30 s).
      connectionsCheckingInterval: Math.min(1_000, limits.headersTimeoutMs),
    },
    onRequest,
  );
  // `100 Continue` only for a body that is read: a 413 or a 401 goes before it is sent.
  server.on('checkContinue', continueOnRead(onRequest));
  // The answers not yet finished: what the shutdown deadline answers 503 (docs/operations.md).
  // One listener shared by every answer, added with `on` (a response closes once): no
  // closure and no `once` wrapper made per request.
  const inFlight = new Set<ServerResponse>();
  function settled(this: ServerResponse): void {
    inFlight.delete(this);
  }
  server.maxConnections = limits.maxConnections;
  const host = options.host ?? DEFAULT_HOST;
  const port = options.port ?? 8787;
  server.listen(port, host);
  try {
    await Promise.race([
      once(server, 'listening'),
      once(server, 'error').then(([error]) => Promise.reject(error)),
    ]);
  } catch (error) {
    await storage.close();
    throw listenFailure(error, host, port);
  }
  const listening = (server.address() as AddressInfo).port;
  let broker: Broker;
  const baseUrl = options.baseUrl ?? `http://localhost:${listening}`;
  try {
    broker = createBroker({
      ...brokerConfig(options, { rootKey, storage, vaultKeys, baseUrl, database }),
      onBackgroundError: (error) => serverLogger.failure('background work failed', error),
      ...(metrics === null ? {} : { observe: metrics.observe }),
    });
  } catch (error) {
    server.close();
    await storage.close();
    throw error;
  }
  // Keys that sealed entries and that this ring lacks: every read of those would answer 500.
  try {
    const foreign = await broker.vault.foreignKeys(storage);
    if (foreign.size > 0) {
      throw new Error(
        foreignKeysMessage(foreign, options.vaultKeys === undefined ? database : null),
      );
    }
  } catch (error) {
    server.close();
    await broker.close();
    throw error;
  }
  let metricsServer: MetricsServer | null = null;
  if (metrics !== null && options.metricsPort !== undefined) {
    try {
      metricsServer = await serveMetrics(
        metrics,
        options.metricsHost ?? DEFAULT_HOST,
        options.metricsPort as number,
      );
    } catch (error) {
      server.close();
      await broker.close();
      throw error;
    }
  }
  const handler = createHandler(broker, {
    inspector: options.inspector ?? true,
    ...(options.connectFrameAncestors === undefined
      ? {}
      : { connectFrameAncestors: options.connectFrameAncestors }),
    onRequest: (record) => {
      serverLogger.request(record);
      metrics?.onRequest(record);
    },
    onInternalError: (error) => serverLogger.failure('internal error', error),
  });
  handle = toNodeHandler(handler, { trustProxy: options.trustProxy === true });
  const url = `http://${urlHost(host)}:${listening}`;
  log(`Keyway broker listening on ${url} (storage: ${describeDatabase(database)})`);
  const base = baseUrl.replace(/\/+$/, '');
  log(`Base URL ${base}: the inspector is ${base}/inspector, OAuth callbacks return to ${base}`);
  const mismatch = baseUrlMismatch(baseUrl, listening);
  if (mismatch !== null) {
    // Instances behind one shared URL (a load balancer, a proxy) are not a mistake: the
    // warning is for a base URL where nothing answers.
    if (await answersAt(base))
      log(
        `Base URL ${base} is served by another listener (a proxy, or the instances' shared address): callbacks ` +
          `return through it`,
      );
    else log(`Warning: ${mismatch}`);
  }
  if (metricsServer !== null) log(`Metrics at ${metricsServer.url}`);
  if (generatedRootKey) for (const line of generatedRootKeyLines(rootKey)) log(line);
  return {
    server,
    broker,
    url,
    generatedRootKey,
    metricsUrl: metricsServer?.url ?? null,
    metrics,
    async close() {
      // Stops accepting, lets requests in flight finish (each connection is closed once
      // idle), and cuts what is left after the shutdown timeout; then background work
      // (a webhook attempt) finishes and the storage closes.
      const closed = once(server, 'close');
      server.close();
      const idle = setInterval(() => server.closeIdleConnections(), 50);
      const cut = setTimeout(() => {
        unavailable(inFlight);
        server.closeAllConnections();
      }, limits.shutdownTimeoutMs);
      server.closeIdleConnections();
      try {
        await closed;
      } finally {
        clearInterval(idle);
        clearTimeout(cut);
      }
      await broker.close();
      await metricsServer?.close();
      serverLogger.flush();
    },
  };
}

/**
 * At the shutdown deadline, what is still in flight: an answer not begun is `503` with
 * `Retry-After` (another instance, or this one restarted, can take the request), its
 * connection closed after it; one already streaming can only be cut.
 */
function unavailable(answers: Set<ServerResponse>): void {
  const body = JSON.stringify({
    error: 'unavailable',
    error_description: 'this Keyway instance is shutting down: retry the request',
  });
  for (const res of answers) {
    if (res.headersSent) continue;
    res.shouldKeepAlive = false;
    res
      .writeHead(503, {
        'content-type': 'application/json',
        'cache-control': 'no-store',
        'retry-after': '1',
        connection: 'close',
      })
      .end(body);
  }
}

/**
 * Checks `options` in full before anything is written (the database, a `.vault-keys` file):
 * the broker's configuration on throwaway storage, with no background work.
 *
 * @throws {TypeError} naming the option that is wrong.
 */
export async function checkServeOptions(options: ServeOptions, rootKey: string): Promise<void> {
  await createBroker(
    brokerConfig(options, {
      rootKey,
      storage: memoryStorage(),
      vaultKeys: options.vaultKeys ?? [generateVaultKey()],
      baseUrl: options.baseUrl ?? `http://localhost:${options.port || 8787}`,
      database: options.database ?? DEFAULT_DATABASE,
      dryRun: true,
    }),
  ).close();
}

const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * Why a browser would miss the OAuth callback: a loopback base URL on another port than
 * the one the broker listens on (a base URL elsewhere is a proxy's, and is left alone).
 */
export function baseUrlMismatch(baseUrl: string, port: number): string | null {
  const url = new URL(baseUrl);
  if (!LOOPBACK_NAMES.has(url.hostname)) return null;
  const basePort = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
  if (basePort === port) return null;
  return (
    `KEYWAY_BASE_URL is ${url.origin}, but the broker listens on port ${port}: a browser sent back to ` +
    `${url.origin} never reaches it (set KEYWAY_BASE_URL=http://localhost:${port}, or PORT=${basePort})`
  );
}

/**
 * Whether anything answers HTTP at a loopback base URL (its `/healthz`) within a second: a
 * startup check of the operator's own configuration, never a request a caller chose.
 */
function answersAt(base: string): Promise<boolean> {
  return new Promise((resolve) => {
    const url = `${base}/healthz`;
    const answered = (res: { resume(): void }) => {
      res.resume();
      resolve(true);
    };
    // Loopback only, where a self-signed certificate is the rule: what matters is an answer.
    const req = url.startsWith('https:')
      ? httpsGet(url, { timeout: 1_000, rejectUnauthorized: false }, answered)
      : httpGet(url, { timeout: 1_000 }, answered);
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
  });
}

/** The host of a URL that reaches a listening address (a wildcard is reached on loopback). */
function urlHost(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}

/** The broker's configuration of {@link serve}: `dryRun` checks it without background work. */
function brokerConfig(
  options: ServeOptions,
  given: {
    rootKey: string;
    storage: Storage;
    vaultKeys: string[];
    baseUrl: string;
    database: string;
    dryRun?: boolean;
  },
): BrokerConfig {
  const { rootKey, storage, vaultKeys, baseUrl, database } = given;
  const allowedHosts = options.allowedHosts ?? [];
  return {
    rootKey,
    storage,
    vaultKeys,
    allowedHosts,
    baseUrl,
    providerManagement: options.providerManagement ?? true,
    allowedRedirects: options.allowedRedirects ?? [],
    ...(options.webhooks === undefined
      ? {}
      : { webhooks: options.webhooks as BrokerConfig['webhooks'] }),
    ...(options.auditRetentionDays === undefined
      ? {}
      : { auditRetentionDays: options.auditRetentionDays }),
    ...(options.gateway === undefined ? {} : { gateway: options.gateway }),
    ...(options.signIn === undefined ? {} : { signIn: options.signIn }),
    ...(options.portal === undefined ? {} : { portal: options.portal }),
    ...(options.assertionSources === undefined
      ? {}
      : { assertionSources: options.assertionSources }),
    ...(options.refreshIdleAfter === undefined
      ? {}
      : { refreshIdleAfter: options.refreshIdleAfter }),
    ...(options.refreshMarginMs === undefined ? {} : { refreshMarginMs: options.refreshMarginMs }),
    ...(options.refreshLeaseMs === undefined ? {} : { refreshLeaseMs: options.refreshLeaseMs }),
    ...(options.refreshAhead === undefined ? {} : { refreshAhead: options.refreshAhead }),
    ...(options.expiringNotice === undefined ? {} : { expiringNotice: options.expiringNotice }),
    rateLimits:
      options.rateLimits === false
        ? false
        : { shared: isPostgres(database), ...options.rateLimits },
    ...(options.clientMetadataUrl === undefined
      ? {}
      : { clientMetadataUrl: options.clientMetadataUrl }),
    ...(given.dryRun === true
      ? { purgeIntervalMs: false, webhookPollIntervalMs: false, onBackgroundError: () => {} }
      : {}),
  };
}
