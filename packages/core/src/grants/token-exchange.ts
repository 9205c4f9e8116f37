import { decodeJwt, decodeProtectedHeader } from 'jose';
import * as oauth from 'oauth4webapi';
import { KeywayError } from '../contract/errors.js';
import { libraryOptions } from '../outbound/oauth-fetch.js';
import { IDP_SECRET_KIND, secretKey } from '../providers/state.js';
import type { OAuthParty, ProviderState } from '../storage/states.js';
import { inSpan, PROVIDER } from '../telemetry/tracing.js';
import { refreshTokenGrant } from './authorization-code.js';
import type { GrantDeps } from './deps.js';
import { dpopOptions } from './dpop.js';
import type { Grant, GrantRequest, ObtainedTokens } from './grant.js';
import { tokenParamsOf, tokenRequestOptions } from './token-answers.js';
import {
  clientAuthentication,
  describeOAuthFailure,
  JWT_BEARER_GRANT,
  jwtBearerGrant,
  oauthPartyOf,
  resourceParam,
  tokensFrom,
} from './token-endpoint.js';

/*
 * Enterprise-managed authorization (docs/api.md §14; the MCP extension SEP-990): the user's
 * ID token from the enterprise identity provider is exchanged there for an identity
 * assertion authorization grant (ID-JAG, RFC 8693 token exchange), which the MCP server's
 * authorization server takes in a JWT bearer grant (RFC 7523). The user's ID token is used
 * once and never kept; the ID-JAG is checked — issued by that identity provider, for that
 * authorization server, for this client and resource, unexpired — before it goes anywhere.
 */

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ID_TOKEN = 'urn:ietf:params:oauth:token-type:id_token';
const ID_JAG = 'urn:ietf:params:oauth:token-type:id-jag';

/** A failure of one of the two exchanges, with the code the connection records. */
export class EnterpriseRefused extends Error {
  override readonly name = 'EnterpriseRefused';
  constructor(
    readonly failure: { code: string; description: string },
    options?: { cause?: unknown },
  ) {
    super(failure.description, options);
  }
}

const refused = (description: string) =>
  new EnterpriseRefused({ code: 'invalid_response', description });

/**
 * What the identity provider answered, checked before it is sent on: an ID-JAG issued by
 * the identity provider, for the authorization server, for this client and resource.
 */
function checkedGrant(
  answer: oauth.TokenEndpointResponse,
  idp: NonNullable<ProviderState['identity_provider']>,
  party: OAuthParty,
  now: number,
): string {
  if (answer.issued_token_type !== ID_JAG)
    throw refused(
      `the identity provider issued ${JSON.stringify(answer.issued_token_type)}, not an ID-JAG`,
    );
  const grant = answer.access_token;
  let claims: ReturnType<typeof decodeJwt>;
  let typ: unknown;
  try {
    claims = decodeJwt(grant);
    typ = decodeProtectedHeader(grant).typ;
  } catch {
    throw refused('the identity provider answered an ID-JAG that is not a JWT');
  }
  if (typ !== 'oauth-id-jag+jwt') throw refused('the ID-JAG has no "typ" of oauth-id-jag+jwt');
  if (claims.iss !== idp.issuer)
    throw refused(
      `the ID-JAG was issued by ${JSON.stringify(claims.iss)}, not the identity provider`,
    );
  const audiences = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
  if (!audiences.includes(party.issuer))
    throw refused('the ID-JAG is not for the MCP server\'s authorization server ("aud")');
  if (claims.client_id !== undefined && claims.client_id !== party.client_id)
    throw refused('the ID-JAG is for another client ("client_id")');
  if (
    claims.resource !== undefined &&
    party.resource !== null &&
    claims.resource !== party.resource
  )
    throw refused('the ID-JAG is for another resource ("resource")');
  if (typeof claims.exp !== 'number' || claims.exp * 1000 <= now)
    throw refused('the ID-JAG has expired');
  return grant;
}

/**
 * Token exchange (SEP-990): the connection's tokens for the user whose ID token
 * `input.subjectToken` is — the token exchange at the identity provider, then the JWT bearer
 * grant at the authorization server; renewed with a refresh token when the server gave one
 * (else the user's ID token is needed again).
 *
 * @throws {EnterpriseRefused} when either refuses or the ID-JAG fails its checks.
 */
export const ENTERPRISE: Grant = {
  name: 'enterprise',
  ownTokens: false,
  obtain(deps, request, input) {
    const subjectToken = input.subjectToken;
    if (subjectToken === undefined) throw new TypeError('token exchange needs a subject token');
    return exchanged(deps, request, subjectToken);
  },
  renew: refreshTokenGrant,
};

async function exchanged(
  deps: GrantDeps,
  request: GrantRequest,
  subjectToken: string,
): Promise<ObtainedTokens> {
  const { providerId, provider: state, party, scopes, auth, dpop } = request;
  const idp = state.identity_provider;
  if (idp === undefined) throw new KeywayError('internal_error', 'no identity provider');
  return inSpan('keyway.enterprise', { [PROVIDER]: providerId }, async () => {
    const scope: Record<string, string> = scopes.length > 0 ? { scope: scopes.join(' ') } : {};
    let grant: string;
    try {
      // RFC 8693 at the identity provider, with Keyway's client there.
      const entry = await deps.storage.getVaultEntry(
        IDP_SECRET_KIND,
        secretKey(providerId, idp.issuer),
      );
      const secret = entry === null ? null : await deps.vault().open(entry);
      const idpServer = { issuer: idp.issuer, token_endpoint: idp.token_endpoint };
      const idpClient = { client_id: idp.client_id };
      const exchange = await oauth.genericTokenEndpointRequest(
        idpServer,
        idpClient,
        clientAuthentication(secret === null ? 'none' : 'client_secret_post', secret),
        TOKEN_EXCHANGE,
        new URLSearchParams({
          subject_token: subjectToken,
          subject_token_type: ID_TOKEN,
          requested_token_type: ID_JAG,
          audience: party.issuer,
          ...resourceParam(party),
          ...scope,
        }),
        libraryOptions(deps.outbound),
      );
      const answer = await oauth.processGenericTokenEndpointResponse(
        idpServer,
        idpClient,
        exchange,
        {
          // An ID-JAG is no access token: its `token_type` is `N_A` (RFC 8693 §2.2.1).
          recognizedTokenTypes: { n_a: () => {} },
        },
      );
      grant = checkedGrant(answer, idp, party, deps.now());
    } catch (error) {
      if (error instanceof EnterpriseRefused) throw error;
      const failure = describeOAuthFailure(error);
      throw new EnterpriseRefused(
        { code: failure.code, description: `the identity provider: ${failure.description}` },
        { cause: error },
      );
    }
    try {
      // RFC 7523 at the MCP server's authorization server, as its client.
      const { as, client } = oauthPartyOf(party);
      const options = {
        ...tokenRequestOptions(deps.outbound, state.oauth2),
        ...(await dpopOptions(dpop)),
      };
      const result = await jwtBearerGrant(
        as,
        client,
        auth,
        new URLSearchParams({
          ...tokenParamsOf(state),
          assertion: grant,
          ...resourceParam(party),
          ...scope,
        }),
        options,
      );
      const { generation: _, ...tokens } = tokensFrom(
        result,
        { refresh_token: null, party },
        deps.now(),
        JWT_BEARER_GRANT,
      );
      return { ...tokens, grant: 'enterprise' as const, ...(dpop === undefined ? {} : { dpop }) };
    } catch (error) {
      const failure = describeOAuthFailure(error);
      throw new EnterpriseRefused(
        { code: failure.code, description: `the authorization server: ${failure.description}` },
        { cause: error },
      );
    }
  });
}
