#!/usr/bin/env node
import { serve, serveOptionsFromEnv } from './serve.js';

const USAGE = `Usage: keyway serve

Starts the Keyway broker. Environment:
  PORT              listening port (default 8787)
  HOST              listening address (default: every interface)
  KEYWAY_ROOT_KEY   the root key, at least 32 characters (default: generated, printed once)
  KEYWAY_DATABASE   a SQLite file path or a postgres:// URL (default: keyway.sqlite)
  KEYWAY_VAULT_KEYS comma-separated base64url 32-byte keys, the first encrypts
                    (default: generated once, kept in <database>.vault-keys; required
                    with PostgreSQL)
  KEYWAY_BASE_URL   public base URL; the OAuth callback is {base}/api/oauth/callback
                    (default: http://localhost:$PORT)
  KEYWAY_PROVIDER_MANAGEMENT  true/false: provider endpoints on or off (default true)
  KEYWAY_CLIENT_METADATA_URL  the client-ID metadata document URL when hosted elsewhere
  KEYWAY_ALLOWED_REDIRECTS  comma-separated origins redirect_to may point to
  KEYWAY_ALLOWED_HOSTS  comma-separated hosts outbound requests may reach over plain
                    http and on loopback/private addresses (development only)`;

async function main(argv: string[]): Promise<number> {
  const [command = 'serve'] = argv;
  if (command === '--help' || command === '-h' || command === 'help') {
    console.log(USAGE);
    return 0;
  }
  if (command !== 'serve') {
    console.error(`keyway: unknown command ${JSON.stringify(command)}\n\n${USAGE}`);
    return 2;
  }
  const running = await serve(serveOptionsFromEnv(process.env));
  const stop = () => {
    running.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
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
