import type * as oauth from 'oauth4webapi';
import { endpointProblem } from '../outbound/fetch.js';
import type { AuthorizationServerInfo } from '../storage/states.js';
import { type DiscoveryStep, quoted, stringArray } from './trace.js';

/*
 * What Keyway requires of an authorization server (docs/api.md §6, the seed's requirements), and
 * step 5: the scopes to request.
 */

/** The endpoints of authorization-server metadata that Keyway uses or sends a browser to. */
const CHECKED_ENDPOINTS = [
  'authorization_endpoint',
  'token_endpoint',
  'registration_endpoint',
  'revocation_endpoint',
  'jwks_uri',
] as const;

const requirementsStep = (ok: boolean, note: string): DiscoveryStep => ({
  step: 'requirements',
  url: null,
  status: null,
  ok,
  note,
});

/**
 * Checks a server's metadata against what Keyway requires: an authorization endpoint, a
 * token endpoint, PKCE S256 (absent counts as unsupported) — for the client credentials
 * grant the token endpoint only — and every endpoint acceptable
 * to the outbound guard (a browser is sent to the authorization endpoint, where a
 * `javascript:` or `data:` URL would run; the others receive secrets).
 *
 * @returns the step, and what Keyway keeps of the server when it passes.
 */
export function checkRequirements(
  server: oauth.AuthorizationServer,
  allowedHosts: ReadonlySet<string>,
  pkce?: 'assume_s256',
  grant?: 'client_credentials' | 'jwt_bearer' | 'enterprise',
): { step: DiscoveryStep; info: AuthorizationServerInfo | null; warning?: DiscoveryStep } {
  const problems: string[] = [];
  let warning: DiscoveryStep | undefined;
  // The client credentials grant sends no browser anywhere: only the token endpoint counts.
  const own = grant !== undefined;
  const required = own
    ? (['token_endpoint'] as const)
    : (['authorization_endpoint', 'token_endpoint'] as const);
  for (const field of required) {
    if (typeof server[field] !== 'string')
      problems.push(
        `"${field}" is ${server[field] === undefined ? 'absent' : quoted(server[field])}`,
      );
  }
  const methods = stringArray(server.code_challenge_methods_supported) ?? [];
  if (!methods.includes('S256') && pkce === 'assume_s256') {
    // The operator vouches for S256 (docs/api.md §6 item 4): said in the trace, never silent.
    const advertised =
      server.code_challenge_methods_supported === undefined
        ? 'absent'
        : quoted(server.code_challenge_methods_supported);
    warning = requirementsStep(
      true,
      `warning: "code_challenge_methods_supported" is ${advertised}; ` +
        'PKCE S256 is assumed because the provider sets pkce "assume_s256"',
    );
  } else if (!methods.includes('S256') && !own) {
    problems.push(
      server.code_challenge_methods_supported === undefined
        ? '"code_challenge_methods_supported" is absent (PKCE S256 is required; absent counts as unsupported)'
        : `"code_challenge_methods_supported" is ${quoted(server.code_challenge_methods_supported)}, without "S256" ` +
            `(PKCE S256 is required)`,
    );
  }
  if (problems.length > 0)
    return { step: requirementsStep(false, problems.join('; ')), info: null };
  for (const field of CHECKED_ENDPOINTS) {
    const value = server[field];
    if (value === undefined || value === null) continue;
    const problem =
      typeof value === 'string' ? endpointProblem(value, allowedHosts) : 'is not a string';
    if (problem !== null) {
      return {
        step: requirementsStep(false, `"${field}" ${quoted(value)} ${problem}`),
        info: null,
      };
    }
  }
  const text = (value: unknown) => (typeof value === 'string' ? value : null);
  return {
    ...(warning === undefined ? {} : { warning }),
    step: requirementsStep(
      true,
      own
        ? 'token endpoint and issuer (a client that gets its own tokens: no authorization endpoint or PKCE needed); ' +
            'every endpoint https (plain http only on an allowed host)'
        : 'authorization and token endpoints, issuer, S256; every endpoint https (plain http only on an allowed host)',
    ),
    info: {
      issuer: server.issuer,
      authorization_endpoint: text(server.authorization_endpoint) ?? '',
      token_endpoint: text(server.token_endpoint) ?? '',
      registration_endpoint: text(server.registration_endpoint),
      revocation_endpoint: text(server.revocation_endpoint),
      scopes_supported: stringArray(server.scopes_supported),
      code_challenge_methods_supported: methods,
      token_endpoint_auth_methods_supported: stringArray(
        server.token_endpoint_auth_methods_supported,
      ),
      client_id_metadata_document_supported: server.client_id_metadata_document_supported === true,
      authorization_response_iss_parameter_supported:
        server.authorization_response_iss_parameter_supported === true,
      ...(Array.isArray(server.dpop_signing_alg_values_supported)
        ? {
            dpop_signing_alg_values_supported:
              stringArray(server.dpop_signing_alg_values_supported) ?? [],
          }
        : {}),
    },
  };
}

/**
 * The scopes to request (docs/api.md §6 step 5): the configured ones when any, else the
 * challenge's `scope`, else the resource's `scopes_supported`, else none; `offline_access`
 * added only when the authorization server lists it.
 */
export function selectScopes(
  configured: readonly string[],
  challengeScope: string | null,
  resourceScopes: readonly string[] | null,
  serverScopes: readonly string[] | null,
): string[] {
  let scopes: string[];
  if (configured.length > 0) scopes = [...configured];
  else if (challengeScope !== null && challengeScope.trim() !== '')
    scopes = challengeScope.trim().split(/\s+/);
  else scopes = [...(resourceScopes ?? [])];
  if (serverScopes?.includes('offline_access') && !scopes.includes('offline_access')) {
    scopes.push('offline_access');
  }
  return [...new Set(scopes)];
}
