#!/usr/bin/env node
import { ADMIN_COMMANDS, ADMIN_USAGE, runAdmin } from './admin.js';
import { inOperatorWords, serveOptionsFromEnv } from './environment.js';
import { startTracing } from './observability.js';
import { type RunningServer, serve } from './serve.js';
import { isWorkerProcess, startPrimary, startWorker, workersFromEnv } from './workers.js';

/** A configuration error in the operator's words (the variables), anything else as is. */
const inOperatorTerms = (error: unknown): unknown =>
  error instanceof TypeError ? new TypeError(inOperatorWords(error.message)) : error;

const USAGE = `Usage: keyway serve | keyway <command> (below)

Starts the Keyway broker. Environment:
  PORT              listening port (default 8787)
  HOST              listening address (default 127.0.0.1: this machine only; set
                    0.0.0.0 or :: to listen publicly)
  KEYWAY_ROOT_KEY   the root key, at least 32 characters (default: generated, printed once)
  KEYWAY_DATABASE   a SQLite file path or a postgres:// URL (default: keyway.sqlite)
  KEYWAY_WORKERS    processes sharing the port and the database: a number, or auto
                    for one per CPU (default 1); rate limits are then counted in the
                    database, and the metrics port serves every worker's
  KEYWAY_VAULT_KEYS comma-separated base64url 32-byte keys, the first encrypts
                    (default: generated once, kept in <database>.vault-keys; required
                    with PostgreSQL)
  KEYWAY_BASE_URL   public base URL; the OAuth callback is {base}/api/oauth/callback
                    (default: http://localhost:$PORT)
  KEYWAY_PROVIDER_MANAGEMENT  true/false: provider endpoints on or off (default true)
  KEYWAY_INSPECTOR  true/false: the inspector page at /inspector (default true)
  KEYWAY_CLIENT_METADATA_URL  the client-ID metadata document URL when hosted elsewhere
  KEYWAY_ALLOWED_REDIRECTS  comma-separated origins redirect_to and a connect session's
                    redirect_uri may point to (the connect page tells these origins)
  KEYWAY_CONNECT_FRAME_ANCESTORS  comma-separated origins that may frame the connect page
                    (default none)
  KEYWAY_ALLOWED_HOSTS  comma-separated hosts outbound requests may reach over plain
                    http and on loopback/private addresses (development only)
  KEYWAY_TRUST_PROXY  true: client address from the last X-Forwarded-For entry, scheme
                    and host from X-Forwarded-Proto/-Host (behind a proxy you run)
  KEYWAY_RATE_LIMITS  on, off, or auth=20/60,mint=60/60,discover=30/60,register=20/3600
                    (count per window in seconds; name=off turns one off). Default on;
                    shared through PostgreSQL, and through the database with KEYWAY_WORKERS
  KEYWAY_WEBHOOK_URL, KEYWAY_WEBHOOK_SECRET  a webhook endpoint and its whsec_ secret
                    (both or neither); KEYWAY_WEBHOOK_TYPES: only these event types
  KEYWAY_AUDIT_RETENTION_DAYS  days the audit log keeps an event (default 90)
  KEYWAY_REFRESH_IDLE_AFTER    refresh connections nothing refreshed for this long, e.g.
                    7d, so refresh tokens that expire when idle stay alive (default off)
  KEYWAY_REFRESH_MARGIN_MS     refresh a token this long before it expires, at most half
                    its lifetime (default 60000); the same on every instance
  KEYWAY_REFRESH_LEASE_MS      how long one instance holds a connection's refresh before
                    another may take it over (default 30000); the same on every instance
  KEYWAY_REFRESH_AHEAD         rotating: refresh connections whose server rotates refresh
                    tokens before their access token expires, in the background, once
                    across instances; all: every refreshable one; off (default)
  KEYWAY_EXPIRING_NOTICE       with refresh ahead on, send connection.expiring this long
                    before a refresh token's known end, e.g. 7d (default 7d)
  KEYWAY_ASSERTION_SOURCES     where jwt_bearer providers read their JWT assertions:
                    name=file:/path, name=directory:/path or name=env:VARIABLE, comma-separated,
                    each with ;providers=<ids> (space-separated, e.g. acme/billing acme/svc/**)
                    for the providers broker tokens may point at it (default: root's only)
  KEYWAY_SIGN_IN  sign-in for MCP clients (Keyway as the authorization server of its
                    /mcp endpoints): token (a pasted broker token), oidc, or token,oidc;
                    needs KEYWAY_BASE_URL, the issuer (default off)
  KEYWAY_SIGN_IN_ISSUER     the OpenID provider of oidc
  KEYWAY_SIGN_IN_CLIENT_ID, KEYWAY_SIGN_IN_CLIENT_SECRET  Keyway's client there (no
                    secret: a public client with PKCE)
  KEYWAY_SIGN_IN_SCOPES     scopes asked of it (default openid email profile)
  KEYWAY_SIGN_IN_NAMESPACE  where its users land, e.g. acme/users/{sub} ({sub},
                    {email} when verified, {preferred_username}: one segment each)
  KEYWAY_SIGN_IN_ACCESS_TTL  an MCP client's access token lifetime, at most 1h (default 1h)
  KEYWAY_SIGN_IN_GRANT_TTL   a grant's lifetime, its refresh tokens' (default 30d)
  KEYWAY_AUDIT_TOOL_CALLS    on: every tool called through the portal (/portal/<prefix>)
                    is a tool.called event, never its arguments or result (default off)
  KEYWAY_PORTAL_LIST_DEADLINE_MS  how long a portal's lists wait for its slowest server
                    (default 5000)
  KEYWAY_PORTAL_LIST_CACHE_MS  how long a server's lists are kept when it says nothing of
                    a change (default 300000; 0: asked on every list)
  KEYWAY_PORTAL_MAX_SESSIONS  portal sessions open at once (default 10000)
  KEYWAY_HEADERS_TIMEOUT_MS     time to receive request headers (default 10000)
  KEYWAY_REQUEST_TIMEOUT_MS     time to receive a whole request (default 30000)
  KEYWAY_KEEP_ALIVE_TIMEOUT_MS  idle keep-alive connection lifetime (default 5000)
  KEYWAY_MAX_CONNECTIONS        open connections at once (default 1000)
  KEYWAY_SHUTDOWN_TIMEOUT_MS    on SIGTERM/SIGINT, time requests in flight have to finish
                    before they are answered 503 with Retry-After (default 10000)
  KEYWAY_GATEWAY_MAX_BODY_BYTES  largest request body the MCP gateway forwards
                    (default 4194304)
  KEYWAY_GATEWAY_IDLE_TIMEOUT_MS  upstream silence the gateway allows, before an answer
                    or within a stream (default 300000)
  KEYWAY_GATEWAY_MAX_STREAMS_PER_CONNECTION  open upstream requests per connection
                    (default 64)
  KEYWAY_GATEWAY_MAX_STREAMS_PER_CALLER  open upstream requests per caller, counted per
                    delegation tree (default 256)
  KEYWAY_GATEWAY_MAX_BUFFERED_BYTES  request bytes the gateway and the proxy hold at once
                    across the process (default 67108864)
  KEYWAY_LOG_LEVEL  the request log's level: fatal, error, warn, info (default: a JSON
                    line per request on standard output), debug, trace, silent
  KEYWAY_METRICS_PORT  serve Prometheus metrics at /metrics on this port (default off)
  KEYWAY_METRICS_HOST  the metrics listener's address (default 127.0.0.1)
  OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_ENDPOINT, …  the standard OpenTelemetry
                    variables: when they name an exporter, spans are sent there`;

async function main(argv: string[]): Promise<number> {
  const [command = 'serve'] = argv;
  if (command === '--help' || command === '-h' || command === 'help') {
    console.log(`${USAGE}\n\n${ADMIN_USAGE}`);
    return 0;
  }
  if (ADMIN_COMMANDS.includes(command)) {
    return runAdmin(argv, {
      env: process.env,
      out: (line) => console.log(line),
      err: (line) => console.error(line),
      fetch: globalThis.fetch,
      sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
      tty: process.stderr.isTTY === true,
      stdin: async () => {
        const chunks: Buffer[] = [];
        for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
        return Buffer.concat(chunks);
      },
    });
  }
  if (command === 'serve' && (argv.includes('--help') || argv.includes('-h'))) {
    console.log(USAGE);
    return 0;
  }
  if (command !== 'serve') {
    console.error(`keyway: unknown command ${JSON.stringify(command)}\n\n${USAGE}`);
    return 2;
  }
  const options = serveOptionsFromEnv(process.env);
  const workers = workersFromEnv(process.env);
  if (workers > 1 && !isWorkerProcess()) {
    const primary = await startPrimary(options, workers, {
      out: (line) => console.log(line),
      err: (line) => console.error(line),
    }).catch((error: unknown) => Promise.reject(inOperatorTerms(error)));
    process.once('SIGINT', primary.stop);
    process.once('SIGTERM', primary.stop);
    primary.exited.then((code) => process.exit(code));
    return -1;
  }
  const tracing = await startTracing(process.env);
  let running: RunningServer | null = null;
  /** Asked while still starting: stopped as soon as it runs. */
  let stopAsked = false;
  // Once, whichever comes first: a signal, or (in a worker) the primary asking or gone.
  const stop = () => {
    if (running === null) {
      stopAsked = true;
      return;
    }
    const closing = running;
    running = null;
    closing
      .close()
      .then(() => tracing?.shutdown())
      .then(
        () => process.exit(0),
        () => process.exit(1),
      );
  };
  running = await (isWorkerProcess() ? startWorker(options, stop) : serve(options)).catch(
    async (error: unknown) => {
      await tracing?.shutdown();
      throw inOperatorTerms(error);
    },
  );
  if (tracing !== null)
    console.log('Traces go to the OpenTelemetry exporter the OTEL_* variables name');
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  if (stopAsked) stop();
  return -1;
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exitCode = code;
  },
  (error: unknown) => {
    console.error(`keyway: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
  },
);
