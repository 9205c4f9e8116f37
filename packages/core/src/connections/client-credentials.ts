import * as oauth from 'oauth4webapi';
import { actorOf, assertCoversPath, type Principal } from '../auth/principal.js';
import { parseResourcePath } from '../auth/resource-path.js';
import { KeywayError } from '../contract/errors.js';
import { AuthorizeBody, type AuthorizeInput } from '../contract/schemas.js';
import { parseShape } from '../contract/validation.js';
import type { ConnectionTokens, OAuthParty, ProviderState } from '../storage/states.js';
import { inSpan, PROVIDER } from '../telemetry/tracing.js';
import { readAssertion } from './assertions.js';
import { requestedScopes } from './consent.js';
import { type DpopKey, dpopOptions, newDpopKey, wantsDpop, withNonceRetry } from './dpop.js';
import { EnterpriseRefused, enterpriseTokens } from './enterprise.js';
import {
  currentParty,
  describeOAuthFailure,
  JWT_BEARER_GRANT,
  jwtBearerGrant,
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
  dpop?: DpopKey,
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
    // A DPoP-bound connection proves its key here too (RFC 9449 §5), a nonce retried once.
    const options = {
      ...tokenRequestOptions(o.outbound, state.oauth2),
      ...(await dpopOptions(dpop)),
    };
    let result: oauth.TokenEndpointResponse;
    if (state.grant === 'jwt_bearer') {
      // RFC 7523 §2.1: the workload's assertion, read now from its source, never kept.
      const ref = state.assertion ?? { source: '' };
      const target = { providerId, issuer: party.issuer, tokenEndpoint: party.token_endpoint };
      parameters.set('assertion', await readAssertion(o.assertionSources, ref, target));
      result = await jwtBearerGrant(as, client, auth, parameters, options);
    } else {
      result = await withNonceRetry(async () =>
        oauth.processClientCredentialsResponse(
          as,
          client,
          await oauth.clientCredentialsGrantRequest(as, client, auth, parameters, options),
        ),
      );
    }
    // No refresh token is kept: the next token is obtained as this one was.
    const { generation: _, ...tokens } = tokensFrom(
      result,
      { refresh_token: null, party },
      o.now(),
      state.grant === 'jwt_bearer' ? JWT_BEARER_GRANT : 'client_credentials',
    );
    return {
      ...tokens,
      refresh_token: null,
      grant: state.grant ?? 'client_credentials',
      ...(dpop === undefined ? {} : { dpop }),
    };
  });
}

/**
 * Authorize for a provider whose tokens need no consent page (docs/api.md §14): client
 * credentials and JWT bearer obtain the token at once; `enterprise` exchanges the user's
 * ID token (`subject_token`) for it. The connection is active with it (created when new)
 * and answered as its view. A refusal leaves an active connection active and a new one in
 * `error`, as a refused consent does.
 *
 * @throws {KeywayError} `invalid_request` (`redirect_to` or `verify_user`: there is no
 *   browser; `subject_token` missing for `enterprise`, given for another), `invalid_path`,
 *   `insufficient_scope`, `not_found`, `conflict`, `upstream_error` (the server refused or
 *   failed; the connection says why).
 */
export async function connectWithoutConsent(
  records: ConnectionRecords,
  principal: Principal,
  providerId: string,
  input: AuthorizeInput,
): Promise<ConnectionView> {
  const { o } = records;
  const provider = parseResourcePath(providerId);
  const shape = parseShape(AuthorizeBody, input);
  const connectionId = parseResourcePath(shape.connection_id, 'connection_id');
  const { state } = await o.providers.forAuthorization(provider);
  const grant = state.grant ?? 'client_credentials';
  for (const field of ['redirect_to', 'verify_user'] as const) {
    if (shape[field] !== undefined) {
      const message = `provider ${JSON.stringify(provider)} uses the ${grant} grant: no browser, no "${field}"`;
      throw new KeywayError('invalid_request', message, { details: [{ path: field, message }] });
    }
  }
  if ((shape.subject_token === undefined) === (grant === 'enterprise')) {
    const message =
      grant === 'enterprise'
        ? `provider ${JSON.stringify(provider)} is enterprise-managed: "subject_token" is the user's ID token from its identity provider`
        : '"subject_token" is for a provider of mode "enterprise"';
    throw new KeywayError('invalid_request', message, {
      details: [{ path: 'subject_token', message }],
    });
  }
  assertCoversPath(principal, connectionId);
  assertCoversPath(principal, provider);
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
  // DPoP (RFC 9449) as for consent.
  const key = wantsDpop(state, state.authorization_server) ? await newDpopKey() : undefined;
  let tokens: Omit<ConnectionTokens, 'generation'>;
  try {
    tokens =
      shape.subject_token === undefined
        ? await clientCredentialsTokens(records, provider, state, party, scopes, key)
        : await enterpriseTokens(records, provider, state, party, scopes, shape.subject_token, key);
  } catch (error) {
    if (error instanceof KeywayError) throw error;
    const failure =
      error instanceof EnterpriseRefused ? error.failure : describeOAuthFailure(error);
    await records.recordFailure(connectionId, failure);
    throw new KeywayError(
      'upstream_error',
      `the ${grant} grant was refused: ${failure.code} (${failure.description})`,
      { cause: error },
    );
  }
  const written = await records.activate(connectionId, tokens, scopes, actor, grant);
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
