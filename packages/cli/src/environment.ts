import { parseDuration, parseRateLimits } from '@keyway/core/config';
import { closest, distance } from 'fastest-levenshtein';
import { LOG_LEVELS, type LogLevel } from './observability.js';
import type { ServeOptions, ServerLimits } from './serve.js';

/*
 * `keyway serve`'s configuration, read from its environment (docs/api.md §0): every
 * message names the variable the operator set, and a variable nothing reads is refused.
 */

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
  ['shutdownTimeoutMs', 'KEYWAY_SHUTDOWN_TIMEOUT_MS', 0, 600_000],
];

/** The gateway's limits (docs/api.md §13): option, variable, range. */
const GATEWAY_VARIABLES: [string, string, number, number][] = [
  ['maxBodyBytes', 'KEYWAY_GATEWAY_MAX_BODY_BYTES', 1024, 64 * 1024 * 1024],
  ['idleTimeoutMs', 'KEYWAY_GATEWAY_IDLE_TIMEOUT_MS', 1000, 3_600_000],
  ['maxStreamsPerConnection', 'KEYWAY_GATEWAY_MAX_STREAMS_PER_CONNECTION', 1, 100_000],
  ['maxStreamsPerCaller', 'KEYWAY_GATEWAY_MAX_STREAMS_PER_CALLER', 1, 100_000],
  ['maxBufferedBytes', 'KEYWAY_GATEWAY_MAX_BUFFERED_BYTES', 1024 * 1024, 16 * 1024 * 1024 * 1024],
];

/** Every `KEYWAY_*` variable `keyway serve` reads (`keyway serve --help` explains each). */
export const SERVE_VARIABLES: readonly string[] = [
  'KEYWAY_ROOT_KEY',
  'KEYWAY_DATABASE',
  'KEYWAY_WORKERS',
  'KEYWAY_VAULT_KEYS',
  'KEYWAY_BASE_URL',
  'KEYWAY_ALLOWED_HOSTS',
  'KEYWAY_ALLOWED_REDIRECTS',
  'KEYWAY_CLIENT_METADATA_URL',
  'KEYWAY_PROVIDER_MANAGEMENT',
  'KEYWAY_INSPECTOR',
  'KEYWAY_CONNECT_FRAME_ANCESTORS',
  'KEYWAY_TRUST_PROXY',
  'KEYWAY_RATE_LIMITS',
  'KEYWAY_WEBHOOK_URL',
  'KEYWAY_WEBHOOK_SECRET',
  'KEYWAY_WEBHOOK_TYPES',
  'KEYWAY_AUDIT_RETENTION_DAYS',
  'KEYWAY_REFRESH_IDLE_AFTER',
  'KEYWAY_REFRESH_MARGIN_MS',
  'KEYWAY_REFRESH_LEASE_MS',
  'KEYWAY_REFRESH_AHEAD',
  'KEYWAY_EXPIRING_NOTICE',
  'KEYWAY_ASSERTION_SOURCES',
  'KEYWAY_SIGN_IN',
  'KEYWAY_SIGN_IN_ISSUER',
  'KEYWAY_SIGN_IN_CLIENT_ID',
  'KEYWAY_SIGN_IN_CLIENT_SECRET',
  'KEYWAY_SIGN_IN_SCOPES',
  'KEYWAY_SIGN_IN_NAMESPACE',
  'KEYWAY_SIGN_IN_ACCESS_TTL',
  'KEYWAY_SIGN_IN_GRANT_TTL',
  'KEYWAY_AUDIT_TOOL_CALLS',
  'KEYWAY_PORTAL_LIST_DEADLINE_MS',
  'KEYWAY_PORTAL_LIST_CACHE_MS',
  'KEYWAY_PORTAL_MAX_SESSIONS',
  'KEYWAY_LOG_LEVEL',
  'KEYWAY_METRICS_PORT',
  'KEYWAY_METRICS_HOST',
  ...LIMIT_VARIABLES.map(([, name]) => name),
  ...GATEWAY_VARIABLES.map(([, name]) => name),
];

/**
 * The other `KEYWAY_*` variables a shell may hold: the admin commands' (`KEYWAY_URL`,
 * `KEYWAY_TOKEN`), and the switches of this repository's tests, benchmarks and build.
 */
const OTHER_VARIABLES = [
  'KEYWAY_URL',
  'KEYWAY_TOKEN',
  'KEYWAY_BUILD_DTS',
  'KEYWAY_UPDATE_OPENAPI',
  'KEYWAY_FUZZ_RUNS',
  'KEYWAY_FUZZ_SEED',
  'KEYWAY_CRASH_KILLS',
  'KEYWAY_RACE_ROUNDS',
  'KEYWAY_SOAK_REQUESTS',
  'KEYWAY_BENCH_CACHE',
];
const KNOWN_VARIABLES = new Set([...SERVE_VARIABLES, ...OTHER_VARIABLES]);

/**
 * Refuses a `KEYWAY_*` variable that nothing reads: a misspelled one would otherwise be
 * ignored in silence (`KEYWAY_VAULT_KEY` for `KEYWAY_VAULT_KEYS`). Names the nearest
 * known variable when one is close.
 */
function checkVariableNames(env: Record<string, string | undefined>): void {
  for (const name of Object.keys(env).sort()) {
    if (!name.startsWith('KEYWAY_') || KNOWN_VARIABLES.has(name)) continue;
    const nearest = closest(name, SERVE_VARIABLES);
    const close = distance(name, nearest) <= Math.max(2, Math.floor(nearest.length / 4));
    const hint = close ? ` (did you mean ${nearest}?)` : '';
    throw new TypeError(
      `unknown variable ${name}${hint}: keyway serve --help lists every variable it reads`,
    );
  }
}

/** A comma-separated list of a variable, each entry trimmed, empty ones dropped. */
const listVariable = (text: string) =>
  text
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');

/** Reads {@link ServeOptions} from environment variables (docs/api.md §0). */
export function serveOptionsFromEnv(env: Record<string, string | undefined>): ServeOptions {
  checkVariableNames(env);
  const options: ServeOptions = {};
  const port = integerVariable(env, 'PORT', 0, 65535);
  if (port !== undefined) options.port = port;
  if (env.HOST) options.host = env.HOST;
  if (env.KEYWAY_ROOT_KEY) options.rootKey = env.KEYWAY_ROOT_KEY;
  if (env.KEYWAY_DATABASE) options.database = env.KEYWAY_DATABASE;
  if (env.KEYWAY_ALLOWED_HOSTS) {
    options.allowedHosts = listVariable(env.KEYWAY_ALLOWED_HOSTS);
    const pattern = options.allowedHosts.find((host) => host.includes('*'));
    if (pattern !== undefined) {
      throw new TypeError(
        `KEYWAY_ALLOWED_HOSTS takes host names, not patterns: ${JSON.stringify(pattern.slice(0, 64))} would allow ` +
          `nothing. Name each host that may be reached over plain http and on private addresses (development and ` +
          `tests only)`,
      );
    }
  }
  if (env.KEYWAY_BASE_URL) options.baseUrl = env.KEYWAY_BASE_URL;
  if (env.KEYWAY_ALLOWED_REDIRECTS) {
    options.allowedRedirects = listVariable(env.KEYWAY_ALLOWED_REDIRECTS);
  }
  if (env.KEYWAY_CLIENT_METADATA_URL) options.clientMetadataUrl = env.KEYWAY_CLIENT_METADATA_URL;
  const management = booleanVariable(env, 'KEYWAY_PROVIDER_MANAGEMENT');
  if (management !== undefined) options.providerManagement = management;
  const inspector = booleanVariable(env, 'KEYWAY_INSPECTOR');
  if (inspector !== undefined) options.inspector = inspector;
  if (env.KEYWAY_CONNECT_FRAME_ANCESTORS) {
    options.connectFrameAncestors = listVariable(env.KEYWAY_CONNECT_FRAME_ANCESTORS);
  }
  const trustProxy = booleanVariable(env, 'KEYWAY_TRUST_PROXY');
  if (trustProxy !== undefined) options.trustProxy = trustProxy;
  if (env.KEYWAY_RATE_LIMITS) options.rateLimits = parseRateLimits(env.KEYWAY_RATE_LIMITS);
  if (env.KEYWAY_ASSERTION_SOURCES)
    options.assertionSources = parseAssertionSources(env.KEYWAY_ASSERTION_SOURCES);
  const signIn = signInFromEnv(env);
  if (signIn !== undefined) options.signIn = signIn;
  const portal = portalFromEnv(env);
  if (portal !== undefined) options.portal = portal;
  const limits: Partial<ServerLimits> = {};
  for (const [key, name, min, max] of LIMIT_VARIABLES) {
    const value = integerVariable(env, name, min, max);
    if (value !== undefined) limits[key] = value;
  }
  if (Object.keys(limits).length > 0) options.limits = limits;
  const gateway: Record<string, number> = {};
  for (const [key, name, min, max] of GATEWAY_VARIABLES) {
    const value = integerVariable(env, name, min, max);
    if (value !== undefined) gateway[key] = value;
  }
  if (Object.keys(gateway).length > 0) options.gateway = gateway;
  if (env.KEYWAY_VAULT_KEYS) {
    options.vaultKeys = env.KEYWAY_VAULT_KEYS.split(',').map((key) => key.trim());
  }
  const webhook = webhookFromEnv(env);
  if (webhook !== undefined) options.webhooks = [webhook];
  const retention = integerVariable(env, 'KEYWAY_AUDIT_RETENTION_DAYS', 1, 3650);
  if (retention !== undefined) options.auditRetentionDays = retention;
  const idle = durationVariable(env, 'KEYWAY_REFRESH_IDLE_AFTER', 1000, '1s');
  if (idle !== undefined) options.refreshIdleAfter = idle;
  const margin = integerVariable(env, 'KEYWAY_REFRESH_MARGIN_MS', 0, 3_600_000);
  if (margin !== undefined) options.refreshMarginMs = margin;
  const lease = integerVariable(env, 'KEYWAY_REFRESH_LEASE_MS', 300, 600_000);
  if (lease !== undefined) options.refreshLeaseMs = lease;
  const ahead = env.KEYWAY_REFRESH_AHEAD?.trim().toLowerCase();
  if (ahead) {
    if (ahead !== 'off' && ahead !== 'rotating' && ahead !== 'all')
      throw new Error(
        `KEYWAY_REFRESH_AHEAD must be off, rotating or all (it is ${JSON.stringify(ahead.slice(0, 40))})`,
      );
    options.refreshAhead = ahead === 'off' ? false : ahead;
  }
  const notice = durationVariable(env, 'KEYWAY_EXPIRING_NOTICE', 60_000, '1m');
  if (notice !== undefined) options.expiringNotice = notice;
  const level = env.KEYWAY_LOG_LEVEL?.trim().toLowerCase();
  if (level) {
    if (!(LOG_LEVELS as readonly string[]).includes(level)) {
      throw new TypeError(
        `KEYWAY_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, not ` +
          `${JSON.stringify(env.KEYWAY_LOG_LEVEL?.slice(0, 32))}`,
      );
    }
    options.logLevel = level as LogLevel;
  }
  const metricsPort = integerVariable(env, 'KEYWAY_METRICS_PORT', 0, 65535);
  if (metricsPort !== undefined) options.metricsPort = metricsPort;
  if (env.KEYWAY_METRICS_HOST) {
    if (metricsPort === undefined) {
      throw new TypeError(
        'KEYWAY_METRICS_HOST is set without KEYWAY_METRICS_PORT: metrics are off',
      );
    }
    options.metricsHost = env.KEYWAY_METRICS_HOST;
  }
  return options;
}

/** The variables of the `oidc` way of signing in, by the option each sets. */
const OIDC_VARIABLES = {
  issuer: 'KEYWAY_SIGN_IN_ISSUER',
  clientId: 'KEYWAY_SIGN_IN_CLIENT_ID',
  clientSecret: 'KEYWAY_SIGN_IN_CLIENT_SECRET',
  scopes: 'KEYWAY_SIGN_IN_SCOPES',
  namespace: 'KEYWAY_SIGN_IN_NAMESPACE',
} as const;

/** A lifetime variable of sign-in, as seconds (`3600`, `1h`, `30d`). */
function lifetimeVariable(
  env: Record<string, string | undefined>,
  name: string,
): number | undefined {
  const text = env[name]?.trim();
  if (!text) return undefined;
  try {
    const ms = /^[0-9]+$/.test(text) ? Number(text) * 1000 : parseDuration(text);
    return Math.floor(ms / 1000);
  } catch (error) {
    throw new TypeError(`${name}: ${(error as Error).message}`);
  }
}

/**
 * Sign-in for MCP clients (docs/api.md §17) from `KEYWAY_SIGN_IN` (`token`, `oidc`, or
 * both, comma-separated) and its `KEYWAY_SIGN_IN_*` companions; `createBroker` checks the
 * values and names the variable of each mistake.
 */
function signInFromEnv(env: Record<string, string | undefined>): ServeOptions['signIn'] {
  const methods = env.KEYWAY_SIGN_IN === undefined ? [] : listVariable(env.KEYWAY_SIGN_IN);
  const set = Object.values(OIDC_VARIABLES).filter((name) => env[name]);
  if (methods.length === 0) {
    const stray = [...set, 'KEYWAY_SIGN_IN_ACCESS_TTL', 'KEYWAY_SIGN_IN_GRANT_TTL'].find(
      (name) => env[name],
    );
    if (stray !== undefined) {
      throw new TypeError(`${stray} is set, but KEYWAY_SIGN_IN is not: sign-in is off`);
    }
    return undefined;
  }
  const unknown = methods.find((method) => method !== 'token' && method !== 'oidc');
  if (unknown !== undefined) {
    throw new TypeError(
      `KEYWAY_SIGN_IN takes token and oidc, not ${JSON.stringify(unknown.slice(0, 32))}`,
    );
  }
  if (!methods.includes('oidc') && set.length > 0) {
    throw new TypeError(`${set[0]} is set, but KEYWAY_SIGN_IN does not name oidc`);
  }
  const accessTokenTtl = lifetimeVariable(env, 'KEYWAY_SIGN_IN_ACCESS_TTL');
  const grantTtl = lifetimeVariable(env, 'KEYWAY_SIGN_IN_GRANT_TTL');
  return {
    methods: methods as ('token' | 'oidc')[],
    ...(methods.includes('oidc')
      ? {
          oidc: {
            issuer: env.KEYWAY_SIGN_IN_ISSUER ?? '',
            clientId: env.KEYWAY_SIGN_IN_CLIENT_ID ?? '',
            ...(env.KEYWAY_SIGN_IN_CLIENT_SECRET
              ? { clientSecret: env.KEYWAY_SIGN_IN_CLIENT_SECRET }
              : {}),
            ...(env.KEYWAY_SIGN_IN_SCOPES
              ? {
                  scopes: env.KEYWAY_SIGN_IN_SCOPES.split(/[\s,]+/).filter((scope) => scope !== ''),
                }
              : {}),
            namespace: env.KEYWAY_SIGN_IN_NAMESPACE ?? '',
          },
        }
      : {}),
    ...(accessTokenTtl === undefined ? {} : { accessTokenTtl }),
    ...(grantTtl === undefined ? {} : { grantTtl }),
  };
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
      'KEYWAY_WEBHOOK_URL and KEYWAY_WEBHOOK_SECRET go together: set both (the secret is "whsec_" and a base64 key) ' +
        'or neither',
    );
  }
  const types = env.KEYWAY_WEBHOOK_TYPES?.split(',')
    .map((type) => type.trim())
    .filter((type) => type !== '');
  return { url, secret, ...(types === undefined || types.length === 0 ? {} : { types }) };
}

/**
 * The portal (docs/api.md §18) from `KEYWAY_AUDIT_TOOL_CALLS` (`on` records `tool.called`
 * events), `KEYWAY_PORTAL_LIST_DEADLINE_MS`, `KEYWAY_PORTAL_LIST_CACHE_MS` and
 * `KEYWAY_PORTAL_MAX_SESSIONS`; `undefined`
 * when none is set.
 */
function portalFromEnv(env: Record<string, string | undefined>): ServeOptions['portal'] {
  const portal: NonNullable<ServeOptions['portal']> = {};
  const audit = env.KEYWAY_AUDIT_TOOL_CALLS;
  if (audit !== undefined && audit !== '') {
    const value = audit.toLowerCase();
    if (!['on', 'off', 'true', 'false'].includes(value)) {
      throw new TypeError('KEYWAY_AUDIT_TOOL_CALLS must be "on" or "off"');
    }
    portal.auditToolCalls = value === 'on' || value === 'true';
  }
  const deadline = integerVariable(env, 'KEYWAY_PORTAL_LIST_DEADLINE_MS', 100, 60_000);
  if (deadline !== undefined) portal.listDeadlineMs = deadline;
  const cache = integerVariable(env, 'KEYWAY_PORTAL_LIST_CACHE_MS', 0, 86_400_000);
  if (cache !== undefined) portal.listCacheMs = cache;
  const sessions = integerVariable(env, 'KEYWAY_PORTAL_MAX_SESSIONS', 1, 1_000_000);
  if (sessions !== undefined) portal.maxSessions = sessions;
  return Object.keys(portal).length === 0 ? undefined : portal;
}

/** The variable of each option of `createBroker` that `keyway serve` takes from one. */
const VARIABLE_OF_OPTION: Record<string, string> = {
  rootKey: 'KEYWAY_ROOT_KEY',
  vaultKeys: 'KEYWAY_VAULT_KEYS',
  baseUrl: 'KEYWAY_BASE_URL',
  allowedHosts: 'KEYWAY_ALLOWED_HOSTS',
  allowedRedirects: 'KEYWAY_ALLOWED_REDIRECTS',
  clientMetadataUrl: 'KEYWAY_CLIENT_METADATA_URL',
  providerManagement: 'KEYWAY_PROVIDER_MANAGEMENT',
  webhooks: 'KEYWAY_WEBHOOK_URL',
  auditRetentionDays: 'KEYWAY_AUDIT_RETENTION_DAYS',
  refreshIdleAfter: 'KEYWAY_REFRESH_IDLE_AFTER',
  refreshMarginMs: 'KEYWAY_REFRESH_MARGIN_MS',
  refreshLeaseMs: 'KEYWAY_REFRESH_LEASE_MS',
  refreshAhead: 'KEYWAY_REFRESH_AHEAD',
  expiringNotice: 'KEYWAY_EXPIRING_NOTICE',
  rateLimits: 'KEYWAY_RATE_LIMITS',
  assertionSources: 'KEYWAY_ASSERTION_SOURCES',
  signIn: 'KEYWAY_SIGN_IN',
};

/**
 * A configuration error of `createBroker` in the words of an operator who set variables:
 * `"rootKey" must be …` becomes `KEYWAY_ROOT_KEY must be …`, a webhook's `"secret"`
 * becomes `KEYWAY_WEBHOOK_SECRET`.
 */
export function inOperatorWords(message: string): string {
  return message
    .replace(/^invalid broker configuration: /, 'invalid configuration: ')
    .replace(/"webhooks\.\d+\.secret": /g, '')
    .replace(/a webhook "secret"/g, 'KEYWAY_WEBHOOK_SECRET')
    .replace(/"webhooks\.\d+\.url"/g, 'KEYWAY_WEBHOOK_URL')
    .replace(/"signIn\.oidc\.([a-zA-Z]+)"/g, (quoted, name: string) =>
      name in OIDC_VARIABLES ? OIDC_VARIABLES[name as keyof typeof OIDC_VARIABLES] : quoted,
    )
    .replace(/"signIn\.accessTokenTtl"/g, 'KEYWAY_SIGN_IN_ACCESS_TTL')
    .replace(/"signIn\.grantTtl"/g, 'KEYWAY_SIGN_IN_GRANT_TTL')
    .replace(/"signIn\.methods"/g, 'KEYWAY_SIGN_IN')
    .replace(/"([a-zA-Z]+)"/g, (quoted, name: string) => VARIABLE_OF_OPTION[name] ?? quoted);
}

const SOURCE_KINDS = ['file', 'directory', 'env'] as const;

type Source = ({ file: string } | { directory: string } | { env: string }) & {
  providers?: string[];
};

/**
 * `KEYWAY_ASSERTION_SOURCES`: `name=kind:value` entries, comma-separated, each kind `file`
 * (a path), `directory` (a path; a provider names a file of it) or `env` (a variable), and
 * optionally `;providers=` the provider ids (scopes: `acme/billing`, `acme/services/**`)
 * the source serves, space-separated. A source without them serves providers the root key
 * writes only.
 *
 * @throws {TypeError} naming the variable and the entry.
 */
export function parseAssertionSources(text: string): Record<string, Source> {
  const sources: Record<string, Source> = {};
  for (const entry of listVariable(text)) {
    const match = /^([a-z][a-z0-9_-]{0,63})=(file|directory|env):([^;]+)(?:;providers=(.*))?$/.exec(
      entry,
    );
    if (match === null) {
      throw new TypeError(
        `KEYWAY_ASSERTION_SOURCES: ${JSON.stringify(entry.slice(0, 80))} is not name=kind:value[;providers=ids] ` +
          `(kind ${SOURCE_KINDS.join(', ')}; a name of lower case letters, digits, _ and -), e.g. ` +
          `k8s=file:/var/run/secrets/tokens/mcp;providers=acme/billing`,
      );
    }
    const [, name = '', kind = '', value = '', list] = match;
    if (sources[name] !== undefined)
      throw new TypeError(
        `KEYWAY_ASSERTION_SOURCES: the source ${JSON.stringify(name)} is named twice`,
      );
    const providers = list?.split(' ').filter((id) => id !== '');
    if (providers !== undefined && providers.length === 0)
      throw new TypeError(
        `KEYWAY_ASSERTION_SOURCES: the source ${JSON.stringify(name)} has an empty ";providers=": name the provider ` +
          `ids it serves, or leave it out`,
      );
    const bound = providers === undefined ? {} : { providers };
    sources[name] =
      kind === 'file'
        ? { file: value, ...bound }
        : kind === 'directory'
          ? { directory: value, ...bound }
          : { env: value, ...bound };
  }
  return sources;
} /**
 * A duration variable (`7d`, `12h`, a number of ms) of at least `min` ms, or `undefined`
 * when unset.
 *
 * @throws {Error} naming the variable.
 */
function durationVariable(
  env: Record<string, string | undefined>,
  name: string,
  min: number,
  minText: string,
): number | undefined {
  const text = env[name];
  if (!text) return undefined;
  let ms: number;
  try {
    ms = parseDuration(text);
  } catch (error) {
    throw new Error(`${name}: ${(error as Error).message}`);
  }
  if (ms < min) throw new Error(`${name} must be at least ${minText}`);
  return ms;
}
