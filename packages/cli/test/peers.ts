import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { toWebRequest, writeWebResponse } from '@keyway/http/node';
import { close, listen } from '@keyway/test-support/peers';
import { createTestWorld, type TestWorld, type TestWorldOptions } from '@keyway/testing';
import Provider, { type ClientMetadata, errors } from 'oidc-provider';

export { Browser, callApi, close, listen, serveMcp } from '@keyway/test-support/peers';

/**
 * oidc-provider as the MCP server's authorization server, configured as these tests need it;
 * tools/peers runs it in its default configuration. What is set here, and why:
 *
 * - `clients`: pre-registered clients of `custom` providers, when a test has them.
 * - `cookies.keys`: a fixed key, so the dev pages' cookies survive the test's requests
 *   without oidc-provider's warning about development keys.
 * - `scopes`: the default two and `mcp:tools`, the scope the MCP server's metadata names.
 * - `pkce.required`: always (the default requires it for public clients only).
 * - `rotateRefreshToken: true`: every refresh rotates, with reuse detection (a consumed
 *   refresh token presented again revokes the grant): what the two-instance tests need.
 * - `findAccount`: any login is an account (the dev pages sign in anyone).
 * - `features`: registration (Keyway registers itself), revocation, introspection, the dev
 *   pages, and resource indicators for the one MCP server (JWT access tokens of the given
 *   lifetime, for its URL).
 *
 * Refresh tokens are issued as oidc-provider decides by default: for `offline_access`,
 * which it grants only with `prompt=consent` (OpenID Connect Core §11). Until refresh asked for consent again this
 * peer overrode `issueRefreshToken`, which hid that Keyway never sent `prompt=consent`.
 */
export function oidcProvider(
  issuer: string,
  resourceUrl: () => string,
  options: { clients?: ClientMetadata[]; accessTokenTTL: number; accessTokenFormat?: 'jwt' },
): Provider {
  return new Provider(issuer, {
    clients: options.clients ?? [],
    cookies: { keys: ['keyway-test-cookie-key'] },
    scopes: ['openid', 'offline_access', 'mcp:tools'],
    pkce: { required: () => true },
    rotateRefreshToken: true,
    findAccount: async (_ctx, id) => ({ accountId: id, claims: async () => ({ sub: id }) }),
    features: {
      registration: { enabled: true },
      revocation: { enabled: true },
      introspection: { enabled: true },
      devInteractions: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => resourceUrl(),
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, indicator) => {
          if (indicator !== resourceUrl()) throw new errors.InvalidTarget();
          return {
            scope: 'mcp:tools',
            audience: resourceUrl(),
            accessTokenTTL: options.accessTokenTTL,
            ...(options.accessTokenFormat ? { accessTokenFormat: options.accessTokenFormat } : {}),
          };
        },
      },
    },
  });
}

/**
 * The in-memory test world, served over loopback HTTP so other processes can reach it.
 * Options go to `createTestWorld` (default: rotating refresh tokens, access tokens of 30 s,
 * due for a refresh in their second half). `answered` runs after the world has made each
 * answer and before it is sent: a change it makes to the world is in place before the broker
 * can act on that answer, however slowly the test itself runs.
 */
export async function serveWorld(
  options: TestWorldOptions | ((origin: string) => TestWorldOptions) = {},
  answered?: (world: TestWorld) => void,
): Promise<{ world: TestWorld; close(): Promise<void> }> {
  let world: TestWorld | null = null;
  const server = createServer((req, res) => {
    (world as TestWorld).fetch(toWebRequest(req)).then((response) => {
      answered?.(world as TestWorld);
      return writeWebResponse(res, response);
    });
  });
  const origin = await listen(server);
  world = createTestWorld({
    resourceUrl: `${origin}/mcp`,
    issuer: `${origin}/as`,
    rotateRefreshTokens: true,
    accessTokenLifetime: 30,
    ...(typeof options === 'function' ? options(origin) : options),
  });
  return { world, close: () => close(server) };
}

/** A loopback port nothing listens on (for now). */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  await close(server);
  return port;
}
