import {
  authorizationServerMetadataUrls,
  processServerMetadataResponse,
  serverMetadataRequest,
} from '../discovery/server-metadata.js';
import { failureNote } from '../discovery/trace.js';
import type { OutboundFetch } from '../outbound/fetch.js';
import type { VaultKey, VaultWrite } from '../storage/record-types.js';
import type { ProviderState } from '../storage/states.js';
import type { Vault } from '../vault/vault.js';
import { invalid } from './client.js';
import type { ProviderSpec } from './input.js';
import { movedSecret } from './secret-binding.js';
import { IDP_SECRET_KIND, secretKey } from './state.js';

/*
 * Mode `enterprise` (docs/api.md §14, SEP-990): the enterprise identity provider that
 * exchanges a user's ID token for an ID-JAG. Keyway's client secret there, and every user's
 * ID token, go to its token endpoint: read from the issuer's own metadata where it publishes
 * one (so no body can name another), and bound to the secret like an `oauth2` provider's.
 */

const FIELD = 'credentials.identity_provider.token_endpoint';

/**
 * The identity provider's token endpoint: the one its issuer publishes in its authorization
 * server metadata (RFC 8414, OpenID Connect Discovery; the `issuer` equal to the one given),
 * else the one the body names.
 *
 * @throws {KeywayError} `invalid_request` naming the field: a body that names another token
 *   endpoint than the published one, an issuer whose metadata names another issuer, or no
 *   token endpoint at all.
 */
async function tokenEndpointOf(
  outbound: OutboundFetch,
  given: NonNullable<ProviderSpec['identityProvider']>,
): Promise<string> {
  const notes: string[] = [];
  for (const url of authorizationServerMetadataUrls(new URL(given.issuer))) {
    let answer: Awaited<ReturnType<typeof processServerMetadataResponse>>;
    try {
      answer = await processServerMetadataResponse(
        url,
        given.issuer,
        false,
        await serverMetadataRequest(outbound, url),
      );
    } catch (error) {
      notes.push(`${url}: ${failureNote(error)}`);
      continue;
    }
    if (answer.outcome === 'refused')
      throw invalid(
        'credentials.identity_provider.issuer',
        `the identity provider's ${answer.step.note}`,
      );
    if (answer.outcome === 'next') continue;
    const published = answer.server.token_endpoint;
    if (published === undefined) break;
    if (given.token_endpoint !== undefined && given.token_endpoint !== published)
      throw invalid(
        FIELD,
        `the identity provider ${given.issuer} publishes its token endpoint ${JSON.stringify(published)} in its ` +
          `metadata; leave "token_endpoint" out or give that one`,
      );
    return published;
  }
  if (given.token_endpoint !== undefined) return given.token_endpoint;
  const why = notes.length > 0 ? ` (${notes.join('; ')})` : '';
  throw invalid(
    FIELD,
    `the identity provider ${given.issuer} publishes no authorization server metadata${why}: ` +
      'name its "token_endpoint"',
  );
}

/**
 * The identity provider as stored, its client secret sealed, or kept for the same client id
 * at the same issuer and token endpoint, or deleted; `undefined` for another mode.
 *
 * @throws {KeywayError} `invalid_request` naming the field: see {@link tokenEndpointOf}, and a
 *   token endpoint moved without the secret.
 */
export async function identityProviderWrite(
  deps: { outbound: OutboundFetch; vault: Vault },
  providerId: string,
  spec: ProviderSpec,
  previous: ProviderState | null,
): Promise<
  | {
      state: NonNullable<ProviderState['identity_provider']>;
      puts: VaultWrite[];
      deletes: VaultKey[];
    }
  | undefined
> {
  const given = spec.identityProvider;
  if (given === undefined) return undefined;
  const tokenEndpoint = await tokenEndpointOf(deps.outbound, given);
  const key = { kind: IDP_SECRET_KIND, key: secretKey(providerId, given.issuer) };
  const before = previous?.identity_provider;
  const keep =
    given.client_secret === undefined &&
    before?.issuer === given.issuer &&
    before.client_id === given.client_id &&
    before.client_secret_set;
  if (keep) {
    const endpoints = (token_endpoint: string) => ({
      token_endpoint,
      revocation_endpoint: null,
      refresh_endpoint: null,
    });
    const moved = movedSecret(endpoints(before.token_endpoint), endpoints(tokenEndpoint), {
      field: () => FIELD,
      secret: 'credentials.identity_provider.client_secret',
    });
    if (moved !== null) throw moved;
  }
  const state = {
    issuer: given.issuer,
    token_endpoint: tokenEndpoint,
    client_id: given.client_id,
    client_secret_set: given.client_secret !== undefined || keep,
  };
  if (given.client_secret !== undefined)
    return { state, puts: [await deps.vault.seal(key, given.client_secret)], deletes: [] };
  return { state, puts: [], deletes: keep ? [] : [key] };
}
