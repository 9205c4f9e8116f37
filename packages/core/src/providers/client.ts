import { KeywayError } from '../contract/errors.js';
import type { OutboundFetch } from '../outbound/fetch.js';
import { normalizeHost } from '../outbound/hosts.js';
import type { VaultKey, VaultWrite } from '../storage/record-types.js';
import type { AuthorizationServerInfo, StoredRegistration } from '../storage/states.js';
import { inSpan, PROVIDER } from '../telemetry/tracing.js';
import type { Vault } from '../vault/vault.js';
import { type ClientMetadata, type ClientProfile, registerClient } from './registration.js';
import { CLIENT_SECRET_KIND, REGISTRATION_TOKEN_KIND, secretKey } from './state.js';

/** An `invalid_request` about one field of the provider body. */
export function invalid(path: string, message: string): KeywayError {
  return new KeywayError('invalid_request', message, { details: [{ path, message }] });
}

/**
 * Validates an endpoint an operator gives (an MCP `resource_url`, an `oauth2` endpoint):
 * absolute https, no fragment or user info (plain http only for allowed hosts).
 *
 * @param field The body's field, named in the error.
 * @returns the URL as WHATWG serializes it.
 */
export function checkResourceUrl(
  text: string,
  allowedHosts: readonly string[],
  field = 'configuration.resource_url',
): string {
  const name = `"${field.slice(field.lastIndexOf('.') + 1)}"`;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw invalid(field, `${name} must be an absolute URL`);
  }
  const allowed = allowedHosts.map(normalizeHost).includes(normalizeHost(url.hostname));
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && allowed)) {
    throw invalid(field, `${name} must use https (plain http only for allowed hosts)`);
  }
  if (url.hash !== '' || text.includes('#'))
    throw invalid(field, `${name} must not have a fragment`);
  if (url.username !== '' || url.password !== '') {
    throw invalid(field, `${name} must not contain user info`);
  }
  return url.href;
}

/**
 * Registers a client at a server (client-ID metadata document or RFC 7591), with the
 * vault writes of its secrets under the provider and that server's issuer.
 */
export async function registerAt(
  outbound: OutboundFetch,
  vault: Vault,
  profile: ClientProfile,
  providerId: string,
  server: AuthorizationServerInfo,
  metadata?: ClientMetadata,
): Promise<{ registration: StoredRegistration; puts: VaultWrite[]; deletes: VaultKey[] }> {
  const client = await inSpan(
    'keyway.registration',
    { [PROVIDER]: providerId },
    () => registerClient(outbound, server, profile, metadata),
    (registered) => registered.registration,
  );
  const key = secretKey(providerId, server.issuer);
  const puts: VaultWrite[] = [];
  const deletes: VaultKey[] = [];
  if (client.client_secret !== null)
    puts.push(await vault.seal({ kind: CLIENT_SECRET_KIND, key }, client.client_secret));
  else deletes.push({ kind: CLIENT_SECRET_KIND, key });
  if (client.registration_access_token !== null) {
    puts.push(
      await vault.seal({ kind: REGISTRATION_TOKEN_KIND, key }, client.registration_access_token),
    );
  } else {
    deletes.push({ kind: REGISTRATION_TOKEN_KIND, key });
  }
  const { client_secret, registration_access_token, ...registration } = client;
  return {
    registration: { ...registration, client_secret_set: client_secret !== null },
    puts,
    deletes,
  };
}
