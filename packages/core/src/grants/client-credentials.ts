import * as oauth from 'oauth4webapi';
import { readAssertion } from '../providers/assertion-sources.js';
import type { ConnectionTokens } from '../storage/states.js';
import { inSpan, PROVIDER } from '../telemetry/tracing.js';
import type { GrantDeps } from './deps.js';
import { dpopOptions, withNonceRetry } from './dpop.js';
import type { Grant, GrantRequest, ObtainedTokens } from './grant.js';
import { tokenParamsOf, tokenRequestOptions } from './token-answers.js';
import {
  JWT_BEARER_GRANT,
  jwtBearerGrant,
  oauthPartyOf,
  resourceParam,
  tokensFrom,
} from './token-endpoint.js';

/*
 * The grants whose tokens are the client's own (docs/api.md §14): client credentials (RFC
 * 6749 §4.4; SEP-1046, with a secret or a `private_key_jwt` assertion) and the JWT bearer
 * grant of workload identity (RFC 7523 §2.1; SEP-1933, the workload's JWT read from its
 * source at each request, never kept). Nothing is refreshed: the next tokens are obtained as
 * the first were, under the refresh's single-flight lease.
 */

/** OAuth errors after which a client's own request cannot succeed until its operator acts. */
export const CLIENT_REFUSED: ReadonlySet<string> = new Set([
  'invalid_client',
  'unauthorized_client',
  'invalid_scope',
  'unsupported_grant_type',
  'invalid_target',
]);

/** The parameters every request of these grants sends: the scopes, the `resource`, the profile's. */
function parametersOf(request: GrantRequest): URLSearchParams {
  const { provider, party, scopes } = request;
  return new URLSearchParams({
    ...tokenParamsOf(provider),
    ...resourceParam(party),
    ...(scopes.length > 0 ? { scope: scopes.join(' ') } : {}),
  });
}

/** Tokens of an own grant's answer: no refresh token is kept (the next are obtained anew). */
function ownTokens(
  deps: GrantDeps,
  request: GrantRequest,
  result: oauth.TokenEndpointResponse,
  name: 'client_credentials' | 'jwt_bearer',
): ObtainedTokens {
  const { generation: _, ...tokens } = tokensFrom(
    result,
    { refresh_token: null, party: request.party },
    deps.now(),
    name === 'jwt_bearer' ? JWT_BEARER_GRANT : 'client_credentials',
  );
  return {
    ...tokens,
    refresh_token: null,
    grant: name,
    ...(request.dpop === undefined ? {} : { dpop: request.dpop }),
  };
}

/** An own grant renewed: obtained again, as the first tokens were, for the same authorization. */
async function obtainedAgain(
  grant: Grant,
  deps: GrantDeps,
  request: GrantRequest,
  tokens: ConnectionTokens,
): Promise<ObtainedTokens & { generation: number }> {
  const next = await grant.obtain(deps, { ...request, dpop: tokens.dpop }, {});
  return { ...next, generation: tokens.generation };
}

/** The client credentials grant (SEP-1046): with the client's secret or signed assertion. */
export const CLIENT_CREDENTIALS: Grant = {
  name: 'client_credentials',
  ownTokens: true,
  obtain(deps, request) {
    return inSpan('keyway.client_credentials', { [PROVIDER]: request.providerId }, async () => {
      const { as, client } = oauthPartyOf(request.party);
      // A DPoP-bound connection proves its key here too (RFC 9449 §5), a nonce retried once.
      const options = {
        ...tokenRequestOptions(deps.outbound, request.provider.oauth2),
        ...(await dpopOptions(request.dpop)),
      };
      const result = await withNonceRetry(async () =>
        oauth.processClientCredentialsResponse(
          as,
          client,
          await oauth.clientCredentialsGrantRequest(
            as,
            client,
            request.auth,
            parametersOf(request),
            options,
          ),
        ),
      );
      return ownTokens(deps, request, result, 'client_credentials');
    });
  },
  renew(deps, request, tokens) {
    return obtainedAgain(CLIENT_CREDENTIALS, deps, request, tokens);
  },
};

/** The JWT bearer grant of workload identity (SEP-1933): the workload's JWT as `assertion`. */
export const JWT_BEARER: Grant = {
  name: 'jwt_bearer',
  ownTokens: true,
  obtain(deps, request) {
    return inSpan('keyway.client_credentials', { [PROVIDER]: request.providerId }, async () => {
      const { as, client } = oauthPartyOf(request.party);
      const options = {
        ...tokenRequestOptions(deps.outbound, request.provider.oauth2),
        ...(await dpopOptions(request.dpop)),
      };
      const { party, providerId } = request;
      const parameters = parametersOf(request);
      // RFC 7523 §2.1: the workload's assertion, read now from its source, never kept.
      const ref = request.provider.assertion ?? { source: '' };
      const target = { providerId, issuer: party.issuer, tokenEndpoint: party.token_endpoint };
      parameters.set('assertion', await readAssertion(deps.assertionSources, ref, target));
      const result = await jwtBearerGrant(as, client, request.auth, parameters, options);
      return ownTokens(deps, request, result, 'jwt_bearer');
    });
  },
  renew(deps, request, tokens) {
    return obtainedAgain(JWT_BEARER, deps, request, tokens);
  },
};
