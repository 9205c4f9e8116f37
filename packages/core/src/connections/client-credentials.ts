import * as oauth from 'oauth4webapi';
import { actorOf, assertCoversPath, type Principal } from '../auth/principal.js';
import { parseResourcePath } from '../auth/resource-path.js';
import { KeywayError } from '../contract/errors.js';
import { AuthorizeBody, type AuthorizeInput } from '../contract/schemas.js';
import { parseShape } from '../contract/validation.js';
import type { ConnectionTokens, OAuthParty, ProviderState } from '../storage/states.js';
import { inSpan, PROVIDER } from '../telemetry/tracing.js';
import { requestedScopes } from './consent.js';
import {
  currentParty,
  describeOAuthFailure,
  oauthPartyOf,
  resourceParam,
  tokensFrom,
} from './party.js';
import { tokenParamsOf, tokenRequestOptions } from './quirks.js';
import type { ConnectionRecords } from './state.js';
import { type ConnectionView, connectionState, connectionView } from './view.js';

/*
 * The client credentials grant (docs/api.md §14; RFC 6749 §4.4; the MCP extension
 * `io.modelcontextprotocol/oauth-client-credentials`, SEP-1046): a provider whose client
 * gets its own tokens — with its secret or a `private_key_jwt` assertion — for a
 * connection without a user. Authorize obtains the token at once; a token due is obtained
 * again the same way, under the refresh's single-flight lease.
 */

/**
 * A token for `party`'s client, asked for `scopes` and the party's RFC 8707 `resource`
 * (with `authentication` when the caller has it already).
 *
 * @throws what oauth4webapi throws for a refused or malformed answer; `reauthorization_required`
 *   when the provider no longer uses this client.
 */
export async function clientCredentialsTokens(
  records: ConnectionRecords,
  providerId: string,
  state: ProviderState,
  party: OAuthParty,
  scopes: readonly string[],
  authentication?: oauth.ClientAuth,
): Promise<Omit<ConnectionTokens, 'generation'>> {
  const { o } = records;
  const auth = authentication ?? (await records.authenticationOf(providerId, party, 'current'));
  if (auth === null) {
    throw new KeywayError(
      'reauthorization_required',
      `provider ${JSON.stringify(providerId)} no longer uses this client: authorize again`,
    );
  }
  return inSpan('keyway.client_credentials', { [PROVIDER]: providerId }, async () => {
    const { as, client } = oauthPartyOf(party);
    const parameters = new URLSearchParams({
      ...tokenParamsOf(state),
      ...resourceParam(party),
      ...(scopes.length > 0 ? { scope: scopes.join(' ') } : {}),
    });
    const response = await oauth.clientCredentialsGrantRequest(
      as,
      client,
      auth,
      parameters,
      tokenRequestOptions(o.outbound, state.oauth2),
    );
    const result = await oauth.processClientCredentialsResponse(as, client, response);
    // No refresh token is kept: the next token is obtained as this one was.
    const { generation: _, ...tokens } = tokensFrom(
      result,
      { refresh_token: null, party },
      o.now(),
    );
    return { ...tokens, refresh_token: null, grant: 'client_credentials' as const };
  });
}

/**
 * Authorize for a `client_credentials` provider: the token obtained at once and the
 * connection active with it (created when new), answered as its view. A refused request
 * leaves an active connection active and a new one in `error`, as a refused consent does.
 *
 * @throws {KeywayError} `invalid_request` (`redirect_to` or `verify_user`: there is no
 *   browser), `invalid_path`, `insufficient_scope`, `not_found`, `conflict`,
 *   `upstream_error` (the server refused or failed; the connection says why).
 */
export async function connectWithClientCredentials(
  records: ConnectionRecords,
  principal: Principal,
  providerId: string,
  input: AuthorizeInput,
): Promise<ConnectionView> {
  const { o } = records;
  const provider = parseResourcePath(providerId);
  const shape = parseShape(AuthorizeBody, input);
  const connectionId = parseResourcePath(shape.connection_id, 'connection_id');
  for (const field of ['redirect_to', 'verify_user'] as const) {
    if (shape[field] !== undefined) {
      const message = `provider ${JSON.stringify(provider)} uses the client credentials grant: no user, no browser, no "${field}"`;
      throw new KeywayError('invalid_request', message, { details: [{ path: field, message }] });
    }
  }
  assertCoversPath(principal, connectionId);
  assertCoversPath(principal, provider);
  const { state } = await o.providers.forAuthorization(provider);
  const existing = await records.get(connectionId);
  if (existing !== null && existing.providerId !== provider) {
    throw new KeywayError(
      'conflict',
      `connection ${JSON.stringify(connectionId)} belongs to provider ${JSON.stringify(existing.providerId)}`,
    );
  }
  const party = currentParty(state);
  if (party === null) throw new KeywayError('internal_error', `provider ${provider} has no client`);
  const scopes = requestedScopes(
    shape.scopes,
    state,
    existing === null ? null : connectionState(existing),
  );
  const actor = actorOf(principal);
  const incarnation = await records.ensure(existing, {
    id: connectionId,
    providerId: provider,
    scopes,
    actor,
  });
  if (incarnation === null) throw new KeywayError('not_found', 'the connection was deleted');
  let tokens: Omit<ConnectionTokens, 'generation'>;
  try {
    tokens = await clientCredentialsTokens(records, provider, state, party, scopes);
  } catch (error) {
    if (error instanceof KeywayError) throw error;
    const failure = describeOAuthFailure(error);
    await records.recordFailure(connectionId, failure);
    throw new KeywayError(
      'upstream_error',
      `the authorization server refused the client credentials grant: ${failure.code} (${failure.description})`,
      { cause: error },
    );
  }
  const written = await records.activate(connectionId, tokens, scopes, actor, 'client_credentials');
  if (written === null) throw new KeywayError('not_found', 'the connection was deleted meanwhile');
  return connectionView(written, o.now());
}

/** OAuth errors after which a client's own request cannot succeed until its operator acts. */
export const CLIENT_REFUSED = new Set([
  'invalid_client',
  'unauthorized_client',
  'invalid_scope',
  'unsupported_grant_type',
  'invalid_target',
]);
