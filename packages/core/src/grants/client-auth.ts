import { importPKCS8 } from 'jose';
import * as oauth from 'oauth4webapi';
import { providerKeepsParty } from '../providers/party.js';
import type { OAuthParty } from '../storage/states.js';
import type { GrantDeps } from './deps.js';
import { clientAuthentication } from './token-endpoint.js';

/**
 * How Keyway authenticates as a party's client (RFC 6749 §2.3, RFC 7523 §2.2): with the
 * secret (or key) the provider keeps for that client at that issuer. `null` when the
 * provider no longer holds that client (it registered another one there), or, with
 * `current`, when the provider no longer uses that server and client at all (it moved):
 * their tokens are never sent anywhere then. Without `current` (revocation), a public client
 * can still be used at its old server.
 *
 * @see docs/api.md §5 "Connections keep their party"
 */
export async function authenticationOf(
  deps: Pick<GrantDeps, 'providers'>,
  providerId: string,
  party: OAuthParty,
  current: 'current' | 'any',
): Promise<oauth.ClientAuth | null> {
  const { state } = await deps.providers.resolve(providerId);
  if (current === 'current' && !providerKeepsParty(state, party)) return null;
  const registration = state.registrations[party.issuer];
  if (registration?.client_id !== party.client_id) {
    return party.token_endpoint_auth_method === 'none' ? oauth.None() : null;
  }
  const secret = await deps.providers.clientSecret(providerId, party.issuer);
  if (party.token_endpoint_auth_method === 'private_key_jwt' && secret !== null) {
    // RFC 7523 §2.2: an assertion signed with the client's key, a fresh `jti` each time.
    const key = await importPKCS8(secret, registration.signing_algorithm ?? 'ES256');
    return oauth.PrivateKeyJwt(key);
  }
  return clientAuthentication(party.token_endpoint_auth_method, secret);
}
