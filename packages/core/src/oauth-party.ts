import * as oauth from 'oauth4webapi';
import { z } from 'zod';
import type { ProviderState } from './providers.js';
import type { TokenEndpointAuthMethod } from './registration.js';

/**
 * The OAuth party of one authorization: the authorization server and the client a
 * connection's tokens were obtained from. It is sealed with the tokens, and refresh and
 * revocation talk to it only: a provider re-pointed at another server later never receives
 * an existing connection's refresh token (API.md §5 "Connections keep their party").
 */
export interface OAuthParty {
  issuer: string;
  token_endpoint: string;
  revocation_endpoint: string | null;
  client_id: string;
  token_endpoint_auth_method: TokenEndpointAuthMethod;
  /** The RFC 8707 `resource` of the authorization, repeated on every refresh. */
  resource: string;
  /** RFC 9207: the server promised `iss` in its authorization responses. */
  iss_parameter_supported: boolean;
}

/** The stored form of an {@link OAuthParty}, checked on every read. */
export const OAuthPartySchema = z.object({
  issuer: z.string(),
  token_endpoint: z.string(),
  revocation_endpoint: z.string().nullable(),
  client_id: z.string(),
  token_endpoint_auth_method: z.enum(['client_secret_basic', 'client_secret_post', 'none']),
  resource: z.string(),
  iss_parameter_supported: z.boolean(),
}) satisfies z.ZodType<OAuthParty>;

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
    // pathless `http://host:port` stays without a `/`), else the configured URL.
    resource: state.resource.resource || state.configuration.resource_url,
    iss_parameter_supported: server.authorization_response_iss_parameter_supported,
  };
}

/**
 * Whether a provider still uses the server and client of a party. When it does not, the
 * party's connections must be authorized again: their tokens never go to the new server.
 */
export function providerKeepsParty(state: ProviderState, party: OAuthParty): boolean {
  const issuer = state.authorization_server.issuer;
  return issuer === party.issuer && state.registrations[issuer]?.client_id === party.client_id;
}

/** The oauth4webapi view of a party: its server and its client. */
export function oauthPartyOf(party: OAuthParty): {
  as: oauth.AuthorizationServer;
  client: oauth.Client;
} {
  return {
    as: {
      issuer: party.issuer,
      token_endpoint: party.token_endpoint,
      ...(party.revocation_endpoint === null
        ? {}
        : { revocation_endpoint: party.revocation_endpoint }),
      ...(party.iss_parameter_supported
        ? { authorization_response_iss_parameter_supported: true }
        : {}),
    },
    client: { client_id: party.client_id },
  };
}

/**
 * The `application/x-www-form-urlencoded` serialization of one value: letters, digits and
 * `*-._` stay, a space becomes `+`, everything else (UTF-8) is percent-encoded.
 */
export function formEncode(value: string): string {
  return new URLSearchParams([['', value]]).toString().slice(1);
}

/**
 * `client_secret_basic` as RFC 6749 §2.3.1 says: id and secret form-encoded, then Basic
 * (API.md §6 item 10). Servers that compare the raw id and servers that decode both
 * accept `pre-registered-client`, which a percent-encoding of `-` would break.
 */
function formEncodedBasic(secret: string): oauth.ClientAuth {
  return (_as, client, _body, headers) => {
    const credentials = `${formEncode(client.client_id)}:${formEncode(secret)}`;
    headers.set('authorization', `Basic ${btoa(credentials)}`);
  };
}

/** The oauth4webapi client authentication for a method and the client's secret. */
export function clientAuthentication(
  method: TokenEndpointAuthMethod,
  secret: string | null,
): oauth.ClientAuth {
  if (method === 'client_secret_basic' && secret !== null) return formEncodedBasic(secret);
  if (method === 'client_secret_post' && secret !== null) return oauth.ClientSecretPost(secret);
  return oauth.None();
}
