import type { ConnectionFailure } from '../contract/connection-failure.js';
import { resourceMatches } from '../discovery/resource-metadata.js';
import type { OAuthParty, ProviderState } from '../storage/states.js';

/*
 * The OAuth party a provider offers (docs/api.md §5 "Connections keep their party"): the
 * authorization server and client a new authorization gets, whether a connection's party is
 * still the provider's, and why not.
 */

/** The party a new authorization through a provider gets: its current server and client. */
export function currentParty(state: ProviderState): OAuthParty | null {
  const server = state.authorization_server;
  const client = state.registrations[server.issuer];
  if (client === undefined) return null;
  return {
    issuer: server.issuer,
    token_endpoint: server.token_endpoint,
    revocation_endpoint: server.revocation_endpoint,
    client_id: client.client_id,
    token_endpoint_auth_method: client.token_endpoint_auth_method,
    // RFC 8707 `resource`: exactly as the protected-resource metadata publishes it (a
    // pathless `http://host:port` stays without a `/`), else the configured URL; none for
    // an `oauth2` provider, whose API is its `api_base_url`.
    ...(state.oauth2 === undefined
      ? {
          resource: state.resource?.resource || (state.configuration.resource_url ?? null),
          resource_url: state.configuration.resource_url,
        }
      : {
          resource: null,
          api_base_url: state.oauth2.api_base_url,
          refresh_endpoint: state.oauth2.refresh_endpoint,
        }),
    iss_parameter_supported: server.authorization_response_iss_parameter_supported,
    // Sealed with the tokens: turning hand-outs on later does not release these.
    ...(state.hand_out === false ? { inject_only: true as const } : {}),
  };
}

/**
 * Whether a provider still uses the resource, server and client of a party. When it does
 * not, the party's connections must be authorized again: their tokens never go to the new
 * server, nor to the new resource.
 */
export function providerKeepsParty(state: ProviderState, party: OAuthParty): boolean {
  const issuer = state.authorization_server.issuer;
  const sameApi =
    state.oauth2 === undefined
      ? partyResourceUrl(party, state.configuration.resource_url) ===
        state.configuration.resource_url
      : (party.api_base_url ?? null) === state.oauth2.api_base_url;
  return (
    issuer === party.issuer && state.registrations[issuer]?.client_id === party.client_id && sameApi
  );
}

/**
 * The MCP endpoint a party's token may be sent to (docs/api.md §8, §13): the one it was
 * authorized for. A party written before that was kept names only its RFC 8707 `resource`:
 * the provider's current URL is taken when that resource still covers it (same origin, a
 * segment-wise path prefix, as discovery checks it), else `null` — the token goes nowhere.
 */
export function partyResourceUrl(party: OAuthParty, currentUrl: string | undefined): string | null {
  if (party.resource_url !== undefined) return party.resource_url;
  if (party.resource === null || currentUrl === undefined) return null;
  return resourceMatches(party.resource, new URL(currentUrl)) ? currentUrl : null;
}

/** The failure a connection records when its provider left the party it was authorized with. */
export const PARTY_CHANGED: ConnectionFailure = {
  code: 'reauthorization_required',
  description:
    'the provider moved to another authorization server or client since this connection was authorized: authorize ' +
    'again',
};

/** The failure a connection records when its provider was re-pointed at another MCP endpoint. */
export const RESOURCE_CHANGED: ConnectionFailure = {
  code: 'reauthorization_required',
  description:
    'the provider was re-pointed at another MCP endpoint since this connection was authorized: authorize again',
};

/**
 * Why a connection's party is no longer its provider's, or `null` while it still is: a
 * move of the resource alone, or of the authorization server or client.
 */
export function partyChangeOf(state: ProviderState, party: OAuthParty): ConnectionFailure | null {
  if (providerKeepsParty(state, party)) return null;
  const issuer = state.authorization_server.issuer;
  const sameServer =
    issuer === party.issuer && state.registrations[issuer]?.client_id === party.client_id;
  return sameServer ? RESOURCE_CHANGED : PARTY_CHANGED;
}

export const FORGOTTEN_CLIENT: ConnectionFailure = {
  code: 'reauthorization_required',
  description:
    'the authorization server no longer knows the registered client (invalid_client): authorize again, a new client ' +
    'is registered first',
};
