import { resourcePathFromUrl } from '../auth/resource-path.js';

/*
 * What Keyway publishes as the authorization server of its MCP endpoints (docs/api.md §17):
 * the protected-resource metadata of each endpoint (RFC 9728), its own metadata (RFC 8414),
 * and the endpoints those name. The issuer is the deployment's base URL; a base with a path
 * puts that path after the well-known segment (RFC 8414 §3.1, RFC 9728 §3.1).
 */

/** Where the authorization server's own endpoints live, under the base. */
export const SIGN_IN_PATHS = {
  authorize: '/oauth/authorize',
  token: '/oauth/token',
  register: '/oauth/register',
  revoke: '/oauth/revoke',
  /** Where the upstream OpenID provider sends the user back. */
  upstreamCallback: '/oauth/sign-in/callback',
} as const;

/** The issuer split for well-known URLs: its origin, and its path (`''` at the root). */
function issuerParts(issuer: string): { origin: string; path: string } {
  const url = new URL(issuer);
  return { origin: url.origin, path: url.pathname === '/' ? '' : url.pathname.replace(/\/$/, '') };
}

/** The authorization server metadata (RFC 8414 §2) of the issuer. */
export function authorizationServerMetadata(issuer: string): Record<string, unknown> {
  return {
    issuer,
    authorization_endpoint: `${issuer}${SIGN_IN_PATHS.authorize}`,
    token_endpoint: `${issuer}${SIGN_IN_PATHS.token}`,
    registration_endpoint: `${issuer}${SIGN_IN_PATHS.register}`,
    revocation_endpoint: `${issuer}${SIGN_IN_PATHS.revoke}`,
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    code_challenge_methods_supported: ['S256'],
    token_endpoint_auth_methods_supported: ['none'],
    revocation_endpoint_auth_methods_supported: ['none'],
    client_id_metadata_document_supported: true,
    authorization_response_iss_parameter_supported: true,
  };
}

/** The path (under the origin) of the issuer's metadata: path-inserted (RFC 8414 §3.1). */
export function authorizationServerMetadataPath(issuer: string): string {
  return `/.well-known/oauth-authorization-server${issuerParts(issuer).path}`;
}

/** The URL of an MCP endpoint: `{base}/mcp/<connection path>`, the path as the URL writes it. */
export function endpointUrl(issuer: string, endpoint: string): string {
  const [kind, ...rest] = endpoint.split('/');
  return `${issuer}/${kind}/${rest.map(encodeURIComponent).join('/')}`;
}

/**
 * The URL of an endpoint's protected-resource metadata (RFC 9728 §3.1): the well-known
 * segment between the origin and the endpoint's path.
 */
export function resourceMetadataUrl(issuer: string, endpoint: string): string {
  const { origin } = issuerParts(issuer);
  const resource = new URL(endpointUrl(issuer, endpoint));
  return `${origin}/.well-known/oauth-protected-resource${resource.pathname}`;
}

/** An endpoint's protected-resource metadata (RFC 9728 §2). */
export function protectedResourceMetadata(
  issuer: string,
  endpoint: string,
): Record<string, unknown> {
  return {
    resource: endpointUrl(issuer, endpoint),
    authorization_servers: [issuer],
    bearer_methods_supported: ['header'],
  };
}

/**
 * The endpoint a resource URL names (`mcp/<connection path>`), or `null` when it names none
 * of Keyway's MCP endpoints: it must start with the issuer's `/mcp/` (a connection) or
 * `/portal/` (a portal) and end with a valid path, with no query or fragment.
 */
export function endpointOfResource(issuer: string, resource: string): string | null {
  if (/[?#]/.test(resource)) return null;
  // An MCP endpoint of one connection (§13), or the portal of a prefix (§18).
  for (const kind of ['mcp', 'portal']) {
    const prefix = `${issuer}/${kind}/`;
    if (!resource.startsWith(prefix)) continue;
    try {
      return `${kind}/${resourcePathFromUrl(resource.slice(prefix.length))}`;
    } catch {
      return null;
    }
  }
  return null;
}

/** The path of an endpoint's resource (what a token's scope covers): the connection path. */
export const endpointPath = (endpoint: string) => endpoint.slice(endpoint.indexOf('/') + 1);
