import { createAuthorizationServer } from './world/authorization-server.js';
import { classicApi } from './world/classic.js';
import { failureResponse } from './world/faults.js';
import { json } from './world/http.js';
import type { Endpoint, TestWorld, TestWorldOptions } from './world/options.js';
import { createResourceServer } from './world/resource-server.js';
import { createWorldState } from './world/state.js';

export type {
  AuthorizationServerMetadataLocation,
  ClassicQuirks,
  Endpoint,
  Failure,
  MetadataLocation,
  RegisteredClient,
  TestWorld,
  TestWorldOptions,
  TokenResponseQuirks,
  WorldStats,
} from './world/options.js';

/**
 * Creates an in-memory MCP resource server and OAuth authorization server, reachable
 * through the returned `fetch` (no sockets), for unit-testing OAuth flows end to end:
 * discovery, registration, consent, code exchange, refresh, revocation and MCP calls.
 *
 * @example
 * import { createTestWorld } from '@keyway/testing';
 * const world = createTestWorld({ metadataLocation: 'path', rotateRefreshTokens: false });
 * const broker = createBroker({ rootKey, storage, vaultKeys, fetch: world.fetch });
 * // … authorize, then play the user:
 * const callbackUrl = world.consent(authorizationUrl, 'approve');
 */
export function createTestWorld(initial: TestWorldOptions = {}): TestWorld {
  const world = createWorldState(initial);
  const {
    opt,
    resourceUrl,
    issuerString,
    endpoint,
    requests,
    stats,
    clients,
    prmUrl,
    asMetadataUrl,
  } = world;
  const server = createAuthorizationServer(world);
  const resource = createResourceServer(world, server.isValidAccessToken);

  async function route(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const here = url.href.split('?')[0] as string;
    const fail = (name: Endpoint) => world.options.failures?.[name];
    const failing = async (name: Endpoint, answer: () => Response | Promise<Response>) => {
      const failure = fail(name);
      return failure ? failureResponse(failure, request.signal) : answer();
    };
    if (here === resourceUrl.href && request.method === 'POST') {
      return failing(request.headers.has('authorization') ? 'mcp' : 'probe', () =>
        resource.mcp(request),
      );
    }
    if (here === resourceUrl.href) {
      // No server-initiated stream and no sessions here.
      return new Response(null, { status: 405, headers: { allow: 'POST' } });
    }
    if (request.method === 'GET' && here === prmUrl())
      return failing('resource_metadata', resource.resourceMetadata);
    if (request.method === 'GET' && asMetadataUrl() !== null && here === asMetadataUrl())
      return failing('authorization_server_metadata', server.serverMetadata);
    if (
      request.method === 'POST' &&
      here === endpoint('register') &&
      opt('dynamicRegistration', true)
    ) {
      return failing('registration', async () =>
        server.register((await request.json().catch(() => ({}))) as Record<string, unknown>),
      );
    }
    if (request.method === 'DELETE' && here.startsWith(`${endpoint('register')}/`))
      return server.unregister(
        decodeURIComponent(here.slice(endpoint('register').length + 1)),
        request,
      );
    if (request.method === 'POST' && (here === endpoint('token') || here === endpoint('refresh')))
      return failing('token', () => server.token(request));
    if (request.method === 'POST' && here === endpoint('revoke'))
      return failing('revocation', () => server.revoke(request));
    const api = await classicApi(request, world.options.classic, server.isValidAccessToken, () => {
      stats.apiCalls++;
    });
    return api ?? json(404, { error: 'not_found' });
  }

  return {
    resourceUrl: resourceUrl.href,
    issuer: issuerString,
    requests,
    tokenRequests: world.tokenRequests,
    stats,
    clients,
    async fetch(input, init) {
      const request =
        input instanceof Request && init === undefined ? input : new Request(input, init);
      requests.push({ method: request.method, url: request.url });
      return route(request);
    },
    preregister: server.preregister,
    consent: server.consent,
    isValidAccessToken: server.isValidAccessToken,
    set(changes) {
      world.options = { ...world.options, ...changes };
    },
    forgetRegisteredClients: server.forgetRegisteredClients,
    revokeRefreshTokens: server.revokeRefreshTokens,
    secrets() {
      return [
        ...world.accessTokens.keys(),
        ...world.refreshTokens.keys(),
        ...world.codes.keys(),
        ...world.seen,
        ...[...clients.values()].flatMap((client) => [
          client.client_secret,
          client.registration_access_token,
        ]),
      ].filter((secret): secret is string => typeof secret === 'string' && secret.length >= 8);
    },
  };
}
