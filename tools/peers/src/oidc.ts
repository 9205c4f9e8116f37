import Provider, { errors } from 'oidc-provider';

/**
 * oidc-provider (the most used OpenID provider on npm) as it ships, with only what an MCP
 * deployment cannot do without:
 *
 * - `features.registration`: on, so that Keyway can register its own client (RFC 7591);
 *   the default is off.
 * - `features.resourceIndicators.getResourceServerInfo`: the MCP server as a resource
 *   server (RFC 8707: its URL the audience, `mcp:tools` and `mcp:admin` its scopes, JWT
 *   access tokens it can verify on its own). The feature is on by default, but knows no
 *   resource server, so every `resource` would be refused.
 *
 * Everything else is the default: `issueRefreshToken` (a refresh token only for
 * `offline_access`, which an OpenID provider grants only with `prompt=consent`),
 * `rotateRefreshToken` (rotation for public clients, or past 70% of the lifetime), PKCE,
 * token lifetimes, the development sign-in and consent pages, no revocation endpoint.
 * `rotation: true` is the second peer: `rotateRefreshToken: true` and
 * `features.revocation` on, as a deployment that wants refresh-token rotation and RFC 7009
 * configures it.
 */
export function stockOidcProvider(
  issuer: string,
  resourceUrl: () => string,
  options: { rotation?: boolean } = {},
): Provider {
  return new Provider(issuer, {
    features: {
      registration: { enabled: true },
      resourceIndicators: {
        enabled: true,
        getResourceServerInfo: (_ctx, indicator) => {
          if (indicator !== resourceUrl()) throw new errors.InvalidTarget();
          return {
            scope: 'mcp:tools mcp:admin',
            audience: resourceUrl(),
            accessTokenFormat: 'jwt',
          };
        },
      },
      ...(options.rotation === true ? { revocation: { enabled: true } } : {}),
    },
    ...(options.rotation === true ? { rotateRefreshToken: true } : {}),
  });
}
