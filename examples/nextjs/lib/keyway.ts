import { type Broker, createBroker } from '@keyway/core';
import { createHandler, requireBrokerToken } from '@keyway/http';
import { memoryStorage } from '@keyway/store-memory';

/*
 * One broker per server process, made on the first request: `next build` evaluates route
 * modules while it collects them, and nothing may read the root key then.
 */
const globalForKeyway = globalThis as { keywayBroker?: Broker };

function broker(): Broker {
  globalForKeyway.keywayBroker ??= createBroker({
    rootKey: process.env.KEYWAY_ROOT_KEY ?? '',
    storage: memoryStorage(),
  });
  return globalForKeyway.keywayBroker;
}

/** Keyway's HTTP API, mounted under /api/keyway. */
export const keyway = createHandler(broker, { basePath: '/api/keyway' });

/** The app's own routes: /notes/<path> needs a broker token whose scopes cover the path. */
export const guardNotes = (request: Request) =>
  requireBrokerToken(broker(), (r) => decodeURIComponent(new URL(r.url).pathname.slice(1)))(
    request,
  );
