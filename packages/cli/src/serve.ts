import { once } from 'node:events';
import { linkSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  type Broker,
  type BrokerConfig,
  createBroker,
  generateVaultKey,
  type RateLimitsConfig,
  type Storage,
} from '@keyway/core';
import { parseDuration, parseRateLimits } from '@keyway/core/config';
import { createHandler } from '@keyway/http';
import { toNodeHandler } from '@keyway/http/node';
import { postgresStorage } from '@keyway/store-postgres';
import { sqliteStorage } from '@keyway/store-sqlite';

/** Default database of `keyway serve`: a SQLite file in the working directory. */
export const DEFAULT_DATABASE = 'keyway.sqlite';

const isPostgres = (database: string) => /^postgres(ql)?:\/\//i.test(database);

/**
 * Opens the storage a `KEYWAY_DATABASE` value names: a `postgres://` (or `postgresql://`)
 * URL, or else a SQLite file path (`:memory:` for a throwaway in-memory database).
 */
export async function openStorage(database: string): Promise<Storage> {
  if (isPostgres(database)) return postgresStorage({ connectionString: database });
  return sqliteStorage(database);
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
  writeFileSync(temporary, `${generateVaultKey()}\n`, { mode: 0o600 });
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
  /** Where the client-ID metadata document is hosted, when not at its default URL. */
  clientMetadataUrl?: string;
  /** Origins `redirect_to` may point to. */
  allowedRedirects?: string[];
  /**
   * Webhook endpoints (docs/api.md §11): `KEYWAY_WEBHOOK_URL`, `KEYWAY_WEBHOOK_SECRET` and
   * optionally `KEYWAY_WEBHOOK_TYPES` (comma-separated event types) give one.
   */
  webhooks?: { url: string; secret: string; types?: string[] }[];
  /** Days audit events are kept (`KEYWAY_AUDIT_RETENTION_DAYS`). Default 90. */
  auditRetentionDays?: number;
  /**
   * Refresh connections no refresh has touched for this long (`KEYWAY_REFRESH_IDLE_AFTER`,
   * a duration such as `7d`). Default off.
   */
  refreshIdleAfter?: string | number;
  /** Where lines for the operator go; default `console.log`. */
  log?: (line: string) => void;
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
}

export const DEFAULT_SERVER_LIMITS: ServerLimits = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  maxConnections: 1_000,
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
  close(): Promise<void>;
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
  const vaultKeys = options.vaultKeys ?? defaultVaultKeys(database, log);
  const storage = await openStorage(database);
  // The broker is built once the port is known: the default base URL contains it.
  let handle: ReturnType<typeof toNodeHandler> | null = null;
  const limits = { ...DEFAULT_SERVER_LIMITS, ...options.limits };
  const server = createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      // How often the two timeouts above are checked (Node's default is every 30 s).
      connectionsCheckingInterval: Math.min(1_000, limits.headersTimeoutMs),
    },
    (req, res) => {
      if (handle === null) res.writeHead(503).end();
      else handle(req, res);
    },
  );
  server.maxConnections = limits.maxConnections;
  const host = options.host ?? DEFAULT_HOST;
  server.listen(options.port ?? 8787, host);
  try {
    await Promise.race([
      once(server, 'listening'),
      once(server, 'error').then(([error]) => Promise.reject(error)),
    ]);
  } catch (error) {
    await storage.close();
    throw error;
  }
  const listening = (server.address() as AddressInfo).port;
  let broker: Broker;
  const baseUrl = options.baseUrl ?? `http://localhost:${listening}`;
  try {
    const allowedHosts = options.allowedHosts ?? [];
    broker = createBroker({
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
      ...(options.refreshIdleAfter === undefined
        ? {}
        : { refreshIdleAfter: options.refreshIdleAfter }),
      rateLimits:
        options.rateLimits === false
          ? false
          : { shared: isPostgres(database), ...options.rateLimits },
      ...(options.clientMetadataUrl === undefined
        ? {}
        : { clientMetadataUrl: options.clientMetadataUrl }),
    });
  } catch (error) {
    server.close();
    await storage.close();
    throw error;
  }
  handle = toNodeHandler(createHandler(broker, { inspector: options.inspector ?? true }), {
    trustProxy: options.trustProxy === true,
  });
  const url = `http://${urlHost(host)}:${listening}`;
  log(`Keyway broker listening on ${url} (storage: ${describeDatabase(database)})`);
  const base = baseUrl.replace(/\/+$/, '');
  log(`Base URL ${base}: the inspector is ${base}/inspector, OAuth callbacks return to ${base}`);
  const mismatch = baseUrlMismatch(baseUrl, listening);
  if (mismatch !== null) log(`Warning: ${mismatch}`);
  if (generatedRootKey) {
    log('No KEYWAY_ROOT_KEY was set, so a root key was generated. It is shown only this once:');
    log(`  KEYWAY_ROOT_KEY=${rootKey}`);
    log('Broker tokens minted with it stop working when the broker restarts with another key;');
    log('set KEYWAY_ROOT_KEY to keep them.');
  }
  return {
    server,
    broker,
    url,
    generatedRootKey,
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
      await broker.close();
    },
  };
}

/** The host of a URL that reaches a listening address (a wildcard is reached on loopback). */
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
  return `KEYWAY_BASE_URL is ${url.origin}, but the broker listens on port ${port}: a browser sent back to ${url.origin} never reaches it (set KEYWAY_BASE_URL=http://localhost:${port}, or PORT=${basePort})`;
}

function urlHost(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}

function booleanVariable(
  env: Record<string, string | undefined>,
  name: string,
): boolean | undefined {
  const text = env[name];
  if (text === undefined || text === '') return undefined;
  const value = text.toLowerCase();
  if (value !== 'true' && value !== 'false')
    throw new TypeError(`${name} must be "true" or "false"`);
  return value === 'true';
}

function integerVariable(
  env: Record<string, string | undefined>,
  name: string,
  min: number,
  max: number,
): number | undefined {
  const text = env[name];
  if (text === undefined || text === '') return undefined;
  const value = Number(text);
  if (!/^[0-9]+$/.test(text) || value < min || value > max) {
    throw new TypeError(
      `${name} must be an integer from ${min} to ${max}, not ${JSON.stringify(text)}`,
    );
  }
  return value;
}

const LIMIT_VARIABLES: [keyof ServerLimits, string, number, number][] = [
  ['headersTimeoutMs', 'KEYWAY_HEADERS_TIMEOUT_MS', 1_000, 600_000],
  ['requestTimeoutMs', 'KEYWAY_REQUEST_TIMEOUT_MS', 1_000, 3_600_000],
  ['keepAliveTimeoutMs', 'KEYWAY_KEEP_ALIVE_TIMEOUT_MS', 1, 600_000],
  ['maxConnections', 'KEYWAY_MAX_CONNECTIONS', 1, 1_000_000],
];

/** Reads {@link ServeOptions} from environment variables (docs/api.md §0). */
export function serveOptionsFromEnv(env: Record<string, string | undefined>): ServeOptions {
  const options: ServeOptions = {};
  const port = integerVariable(env, 'PORT', 0, 65535);
  if (port !== undefined) options.port = port;
  if (env.HOST) options.host = env.HOST;
  if (env.KEYWAY_ROOT_KEY) options.rootKey = env.KEYWAY_ROOT_KEY;
  if (env.KEYWAY_DATABASE) options.database = env.KEYWAY_DATABASE;
  if (env.KEYWAY_ALLOWED_HOSTS) {
    options.allowedHosts = env.KEYWAY_ALLOWED_HOSTS.split(',')
      .map((host) => host.trim())
      .filter((host) => host !== '');
  }
  if (env.KEYWAY_BASE_URL) options.baseUrl = env.KEYWAY_BASE_URL;
  if (env.KEYWAY_ALLOWED_REDIRECTS) {
    options.allowedRedirects = env.KEYWAY_ALLOWED_REDIRECTS.split(',')
      .map((origin) => origin.trim())
      .filter((origin) => origin !== '');
  }
  if (env.KEYWAY_CLIENT_METADATA_URL) options.clientMetadataUrl = env.KEYWAY_CLIENT_METADATA_URL;
  const management = booleanVariable(env, 'KEYWAY_PROVIDER_MANAGEMENT');
  if (management !== undefined) options.providerManagement = management;
  const inspector = booleanVariable(env, 'KEYWAY_INSPECTOR');
  if (inspector !== undefined) options.inspector = inspector;
  const trustProxy = booleanVariable(env, 'KEYWAY_TRUST_PROXY');
  if (trustProxy !== undefined) options.trustProxy = trustProxy;
  if (env.KEYWAY_RATE_LIMITS) options.rateLimits = parseRateLimits(env.KEYWAY_RATE_LIMITS);
  const limits: Partial<ServerLimits> = {};
  for (const [key, name, min, max] of LIMIT_VARIABLES) {
    const value = integerVariable(env, name, min, max);
    if (value !== undefined) limits[key] = value;
  }
  if (Object.keys(limits).length > 0) options.limits = limits;
  if (env.KEYWAY_VAULT_KEYS) {
    options.vaultKeys = env.KEYWAY_VAULT_KEYS.split(',').map((key) => key.trim());
  }
  const webhook = webhookFromEnv(env);
  if (webhook !== undefined) options.webhooks = [webhook];
  const retention = integerVariable(env, 'KEYWAY_AUDIT_RETENTION_DAYS', 1, 3650);
  if (retention !== undefined) options.auditRetentionDays = retention;
  if (env.KEYWAY_REFRESH_IDLE_AFTER) {
    let idle: number;
    try {
      idle = parseDuration(env.KEYWAY_REFRESH_IDLE_AFTER);
    } catch (error) {
      throw new Error(`KEYWAY_REFRESH_IDLE_AFTER: ${(error as Error).message}`);
    }
    if (idle < 1000) throw new Error('KEYWAY_REFRESH_IDLE_AFTER must be at least 1s');
    options.refreshIdleAfter = idle;
  }
  return options;
}

/** The webhook endpoint of `KEYWAY_WEBHOOK_URL`, `_SECRET` and `_TYPES`: both or neither. */
function webhookFromEnv(
  env: Record<string, string | undefined>,
): { url: string; secret: string; types?: string[] } | undefined {
  const url = env.KEYWAY_WEBHOOK_URL;
  const secret = env.KEYWAY_WEBHOOK_SECRET;
  if (!url && !secret) return undefined;
  if (!url || !secret) {
    throw new Error(
      'KEYWAY_WEBHOOK_URL and KEYWAY_WEBHOOK_SECRET go together: set both (the secret is "whsec_" and a base64 key) or neither',
    );
  }
  const types = env.KEYWAY_WEBHOOK_TYPES?.split(',')
    .map((type) => type.trim())
    .filter((type) => type !== '');
  return { url, secret, ...(types === undefined || types.length === 0 ? {} : { types }) };
}
