import * as oauth from 'oauth4webapi';
import type { ConnectionTokens } from '../storage/states.js';
import type { GrantDeps } from './deps.js';
import { dpopOptions, withNonceRetry } from './dpop.js';
import type { Grant, GrantRequest, ObtainedTokens } from './grant.js';
import {
  afterConnect,
  metadataOf,
  readTokenAnswer,
  tokenParamsOf,
  tokenRequestOptions,
} from './token-answers.js';
import { oauthPartyOf, resourceParam, tokensFrom } from './token-endpoint.js';

/*
 * The authorization code grant (RFC 6749 §4.1, with PKCE, RFC 7636): a user's consent gives
 * a code, which is exchanged once at the party's token endpoint; the tokens are renewed with
 * the refresh token (§6), rotated when the server rotates it.
 */

/**
 * The refresh token grant (RFC 6749 §6) at the party the tokens came from, read as its
 * profile says: the renewal of every grant that holds a refresh token. A DPoP-bound
 * connection proves its key at each refresh too (RFC 9449 §5); an unrotated refresh token is
 * kept.
 *
 * @throws what oauth4webapi throws for a refused or malformed answer.
 */
export async function refreshTokenGrant(
  deps: GrantDeps,
  request: GrantRequest,
  tokens: ConnectionTokens,
): Promise<ObtainedTokens & { generation: number }> {
  const { provider } = request;
  const { as, client } = oauthPartyOf(tokens.party, true);
  const dpop = await dpopOptions(tokens.dpop);
  const result = await withNonceRetry(async () => {
    const response = await oauth.refreshTokenGrantRequest(
      as,
      client,
      request.auth,
      tokens.refresh_token ?? '',
      {
        ...tokenRequestOptions(deps.outbound, provider.oauth2),
        ...dpop,
        additionalParameters: { ...tokenParamsOf(provider), ...resourceParam(tokens.party) },
      },
    );
    return oauth.processRefreshTokenResponse(
      as,
      client,
      await readTokenAnswer(response, provider.oauth2),
    );
  });
  const metadata = metadataOf(result, null, provider.oauth2, tokens.metadata);
  return {
    ...tokensFrom(result, tokens, deps.now(), 'refresh_token'),
    ...(tokens.dpop === undefined ? {} : { dpop: tokens.dpop }),
    ...(tokens.grant === undefined ? {} : { grant: tokens.grant }),
    ...(metadata === undefined ? {} : { metadata }),
  };
}

/** The authorization code grant: obtain with a consent's code, renew with the refresh token. */
export const AUTHORIZATION_CODE: Grant = {
  name: 'authorization_code',
  ownTokens: false,
  async obtain(deps, request, input) {
    const code = input.code;
    if (code === undefined) throw new TypeError('the authorization code grant needs a code');
    const { party, provider, dpop } = request;
    const quirks = provider.oauth2;
    const { as, client } = oauthPartyOf(party);
    const params = oauth.validateAuthResponse(as, client, code.query, code.state);
    const result = await withNonceRetry(async () => {
      const response = await oauth.authorizationCodeGrantRequest(
        as,
        client,
        request.auth,
        params,
        // RFC 6749 §4.1.3: the same redirect_uri as the authorization request.
        code.redirectUri,
        code.verifier ?? oauth.nopkce,
        {
          ...tokenRequestOptions(deps.outbound, quirks),
          ...(await dpopOptions(dpop)),
          additionalParameters: { ...code.tokenParams, ...resourceParam(party) },
        },
      );
      return oauth.processAuthorizationCodeResponse(
        as,
        client,
        await readTokenAnswer(response, quirks),
      );
    });
    const { generation: _, ...next } = {
      ...tokensFrom(result, { refresh_token: null, party }, deps.now(), 'authorization_code'),
      ...(dpop === undefined ? {} : { dpop }),
    };
    const metadata = await afterConnect(
      deps.outbound,
      quirks,
      next.access_token,
      metadataOf(result, code.query, quirks),
    );
    return metadata === undefined ? next : { ...next, metadata };
  },
  renew: refreshTokenGrant,
};
