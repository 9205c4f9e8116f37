import { sha256 } from '@noble/hashes/sha2.js';
import { assertionProblem } from './assertion.js';
import { classicAnswer, classicConsent, classicError, readTokenRequest } from './classic.js';
import { createClients } from './clients.js';
import { b64url, ISSUED_CLIENT_PREFIX, json, oauthError, random } from './http.js';
import type { RegisteredClient, TestWorld } from './options.js';
import type { WorldState } from './state.js';

/**
 * The world's OAuth authorization server: metadata (RFC 8414), dynamic registration
 * (RFC 7591), consent, the token endpoint (codes with PKCE, refresh with rotation and
 * replay detection, the client credentials grant), revocation (RFC 7009).
 */
const JWT_BEARER_GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';

export function createAuthorizationServer(world: WorldState) {
  const {
    opt,
    resourceUrl,
    issuerString,
    endpoint,
    now,
    stats,
    clients,
    codes,
    accessTokens,
    refreshTokens,
    seen,
  } = world;

  function serverMetadata(): Response {
    const methods = opt('codeChallengeMethods', ['S256']);
    return json(200, {
      issuer: world.options.metadataIssuer ?? issuerString,
      authorization_endpoint: endpoint('authorize'),
      token_endpoint: endpoint('token'),
      revocation_endpoint: endpoint('revoke'),
      ...(opt('dynamicRegistration', true) ? { registration_endpoint: endpoint('register') } : {}),
      response_types_supported: ['code'],
      grant_types_supported: [
        'authorization_code',
        'refresh_token',
        'client_credentials',
        ...(world.options.jwtBearer === undefined ? [] : [JWT_BEARER_GRANT]),
      ],
      ...(opt('clientSecretPostOnly', false)
        ? {}
        : {
            token_endpoint_auth_methods_supported: opt('tokenEndpointAuthMethods', [
              'client_secret_basic',
              'client_secret_post',
              'none',
            ]),
          }),
      ...(world.options.codeChallengeMethods === null
        ? {}
        : { code_challenge_methods_supported: methods }),
      ...(world.options.serverScopesSupported
        ? { scopes_supported: world.options.serverScopesSupported }
        : {}),
      ...(opt('clientIdMetadataDocuments', false)
        ? { client_id_metadata_document_supported: true }
        : {}),
      ...(opt('issParameter', true)
        ? { authorization_response_iss_parameter_supported: true }
        : {}),
      ...world.options.serverMetadataOverrides,
    });
  }

  function register(body: Record<string, unknown>): Response {
    stats.registrations++;
    const refusal = world.options.registrationRefused;
    if (refusal !== undefined) {
      return json(refusal.status, {
        error: refusal.error ?? 'invalid_client_metadata',
        error_description: refusal.description ?? 'registration is not available',
      });
    }
    const redirectUris = body.redirect_uris;
    if (
      !Array.isArray(redirectUris) ||
      redirectUris.length === 0 ||
      redirectUris.some((u) => typeof u !== 'string')
    ) {
      return oauthError(400, 'invalid_redirect_uri', 'redirect_uris is required');
    }
    const names = world.options.registrationClientNames;
    const name = typeof body.client_name === 'string' ? body.client_name : undefined;
    if (names !== undefined && (name === undefined || !names.includes(name)))
      return json(403, { error: 'access_denied', error_description: 'Forbidden' });
    const applicationType =
      typeof body.application_type === 'string' ? body.application_type : 'web';
    for (const uri of redirectUris as string[]) {
      const parsed = new URL(uri);
      if (opt('registrationHttpsOnly', false) && parsed.protocol !== 'https:')
        return oauthError(400, 'invalid_redirect_uri', 'redirect URIs must use https');
      const loopback =
        parsed.hostname === 'localhost' ||
        parsed.hostname === '127.0.0.1' ||
        parsed.hostname === '[::1]';
      if (parsed.protocol === 'http:' && (applicationType === 'web' || !loopback)) {
        return oauthError(400, 'invalid_redirect_uri', 'web clients must use https redirect URIs');
      }
    }
    const offered = opt('tokenEndpointAuthMethods', [
      'client_secret_basic',
      'client_secret_post',
      'none',
    ]);
    const requested =
      typeof body.token_endpoint_auth_method === 'string'
        ? body.token_endpoint_auth_method
        : 'client_secret_basic';
    const method = offered.includes(requested) ? requested : (offered[0] as string);
    const lifetime = opt('clientSecretLifetime', 0);
    const issued = opt('issuedClient', {} as { client_id?: string; client_secret?: string });
    const client: RegisteredClient = {
      client_id: issued.client_id ?? random(ISSUED_CLIENT_PREFIX),
      token_endpoint_auth_method: method,
      redirect_uris: redirectUris as string[],
      grant_types: Array.isArray(body.grant_types)
        ? (body.grant_types as string[])
        : ['authorization_code'],
      application_type: applicationType,
      ...(name === undefined ? {} : { client_name: name }),
      registration_access_token: random('rat_'),
      client_secret_expires_at: lifetime === 0 ? 0 : Math.floor(now() / 1000) + lifetime,
      via: 'dynamic',
      ...(method === 'none' ? {} : { client_secret: issued.client_secret ?? random('secret_') }),
    };
    clients.set(client.client_id, client);
    return json(opt('registrationStatus', 201), {
      client_id: client.client_id,
      ...(client.client_secret ? { client_secret: client.client_secret } : {}),
      client_id_issued_at: Math.floor(now() / 1000),
      ...(opt('omitSecretExpiry', false)
        ? {}
        : { client_secret_expires_at: client.client_secret_expires_at }),
      token_endpoint_auth_method: method,
      redirect_uris: client.redirect_uris,
      grant_types: client.grant_types,
      application_type: client.application_type,
      registration_access_token: client.registration_access_token,
      registration_client_uri: `${endpoint('register')}/${client.client_id}`,
    });
  }

  /**
   * RFC 7592 §2.3: a dynamically registered client deleted by its registration access token
   * (204), or `401` for any other token.
   */
  function unregister(clientId: string, request: Request): Response {
    const client = clients.get(clientId);
    const presented = request.headers.get('authorization');
    if (
      client === undefined ||
      client.registration_access_token === undefined ||
      presented !== `Bearer ${client.registration_access_token}`
    )
      return oauthError(401, 'invalid_token', 'unknown client or registration access token');
    clients.delete(clientId);
    stats.unregistrations++;
    return new Response(null, { status: 204 });
  }

  const { clientOf, authenticateClient } = createClients(world);

  /** A token answer, written with the quirks the options ask for. */
  function tokenAnswer(tokens: Record<string, unknown>): Response {
    const quirks = world.options.tokenResponse ?? {};
    const body: Record<string, unknown> = { ...tokens };
    if (quirks.tokenType === null) delete body.token_type;
    else if (quirks.tokenType !== undefined) body.token_type = quirks.tokenType;
    const expiresIn = body.expires_in as number;
    if (quirks.expiresIn === 'string') body.expires_in = String(expiresIn);
    else if (quirks.expiresIn === 'absent') delete body.expires_in;
    else if (quirks.expiresIn === 'zero') body.expires_in = 0;
    const scope = String(body.scope ?? '');
    if (quirks.scope === 'absent') delete body.scope;
    else if (quirks.scope === 'comma') body.scope = scope.split(' ').filter(Boolean).join(',');
    else if (quirks.scope === 'padded') body.scope = `  ${scope.split(' ').join('   ')} `;
    if (quirks.idToken === true) {
      const part = (value: object) => b64url(new TextEncoder().encode(JSON.stringify(value)));
      const claims = {
        iss: issuerString,
        sub: 'alice',
        email: 'alice@example.test',
        aud: tokens.client_id ?? 'client',
        exp: Math.floor(now() / 1000) + 600,
        iat: Math.floor(now() / 1000),
      };
      body.id_token = `${part({ alg: 'none', typ: 'JWT' })}.${part(claims)}.`;
      seen.add(body.id_token as string);
    }
    delete body.client_id;
    const classic = world.options.classic;
    return classic === undefined ? json(200, body) : classicAnswer(body, classic);
  }

  /** An OAuth error, with status 200 when the options ask for that quirk. */
  function tokenError(status: number, error: string, description?: string): Response {
    const classic = classicError(status, error, description, world.options.classic);
    if (classic !== null) return classic;
    return world.options.tokenResponse?.errorsWithStatus200 === true
      ? oauthError(200, error, description)
      : oauthError(status, error, description);
  }

  function issueTokens(
    clientId: string,
    scope: string,
    resource: string | null,
    refresh: string | null,
    family: string = random('family_'),
    withRefresh = true,
  ) {
    const accessToken = random('at_');
    const lifetime = opt('accessTokenLifetime', 3600);
    accessTokens.set(accessToken, {
      expiresAt: now() + lifetime * 1000,
      scope,
      resource,
      revoked: false,
    });
    const answer = {
      client_id: clientId,
      access_token: accessToken,
      token_type: 'Bearer',
      expires_in: lifetime,
      scope,
    };
    // A new refresh token with the code (unless none is issued), and on refresh when rotating.
    if (refresh === null ? !withRefresh : !opt('rotateRefreshTokens', true)) return answer;
    const refreshToken = random('rt_');
    if (refresh !== null) {
      const previous = refreshTokens.get(refresh);
      if (previous !== undefined) {
        previous.revoked = true;
        previous.used = true;
        previous.rotatedAt ??= now();
        previous.successor = refreshToken;
      }
    }
    refreshTokens.set(refreshToken, {
      clientId,
      scope,
      resource,
      revoked: false,
      family,
      used: false,
      issuedAt: now(),
      rotatedAt: null,
      successor: null,
    });
    const stated = opt('refreshTokenLifetimeSeconds', 0);
    return {
      ...answer,
      refresh_token: refreshToken,
      ...(stated > 0 ? { refresh_token_expires_in: stated } : {}),
    };
  }

  async function token(request: Request): Promise<Response> {
    const read = await readTokenRequest(request, world.options.classic);
    if (read instanceof Response) return read;
    const form = read;
    world.tokenRequests.push(Object.fromEntries(form));
    const client = await authenticateClient(request, form);
    if (client instanceof Response) return client;
    const grant = form.get('grant_type');
    if (grant === 'authorization_code') {
      stats.codeExchanges++;
      const code = codes.get(form.get('code') ?? '');
      if (code === undefined || code.used || code.clientId !== client.client_id) {
        return tokenError(400, 'invalid_grant', 'unknown, used or foreign code');
      }
      code.used = true;
      if (form.get('redirect_uri') !== code.redirectUri)
        return tokenError(400, 'invalid_grant', 'redirect_uri mismatch');
      const verifier = form.get('code_verifier') ?? '';
      seen.add(verifier);
      const pkce = world.options.classic?.pkce !== 'ignored';
      if (pkce && b64url(sha256(new TextEncoder().encode(verifier))) !== code.challenge) {
        return tokenError(400, 'invalid_grant', 'PKCE verification failed');
      }
      if (code.resource !== null && form.get('resource') !== code.resource) {
        return tokenError(400, 'invalid_target', 'resource mismatch');
      }
      // OpenID Connect Core §11: `offline_access` gives a refresh token only with consent.
      const offlineWithoutConsent =
        opt('offlineAccessNeedsConsentPrompt', false) &&
        code.scope.split(' ').includes('offline_access') &&
        !code.consentPrompt;
      const withRefresh = opt('issueRefreshTokens', true) && !offlineWithoutConsent;
      return tokenAnswer(
        issueTokens(client.client_id, code.scope, code.resource, null, undefined, withRefresh),
      );
    }
    if (grant === 'refresh_token') {
      stats.refreshes++;
      const presented = form.get('refresh_token') ?? '';
      const refresh = refreshTokens.get(presented);
      const refused = opt('invalidGrantDescription', 'unknown or revoked refresh token');
      if (refresh?.used) {
        stats.refreshTokenReuses++;
        const grace = opt('refreshTokenReuseGraceSeconds', 0) * 1000;
        const current =
          refresh.successor === null ? undefined : refreshTokens.get(refresh.successor);
        if (
          grace > 0 &&
          refresh.rotatedAt !== null &&
          now() - refresh.rotatedAt < grace &&
          current !== undefined &&
          !current.used &&
          !current.revoked &&
          refresh.clientId === client.client_id
        ) {
          // Within the grace window a rotated token works once more: it rotates again.
          return tokenAnswer(
            issueTokens(
              client.client_id,
              refresh.scope,
              refresh.resource,
              refresh.successor,
              refresh.family,
            ),
          );
        }
        if (opt('refreshTokenReuse', 'reject') === 'revoke-family') {
          // Replay detected: everything of that grant is revoked (RFC 9700 §4.14.2).
          for (const other of refreshTokens.values())
            if (other.family === refresh.family) other.revoked = true;
        }
      }
      if (refresh === undefined || refresh.revoked || refresh.clientId !== client.client_id) {
        return tokenError(400, 'invalid_grant', refused);
      }
      const stated = opt('refreshTokenLifetimeSeconds', 0) * 1000;
      if (stated > 0 && now() - refresh.issuedAt >= stated) {
        refresh.revoked = true;
        return tokenError(400, 'invalid_grant', refused);
      }
      const idle = opt('refreshTokenUnusedLifetimeSeconds', 0) * 1000;
      if (idle > 0 && now() - refresh.issuedAt >= idle) {
        // Never used within its lifetime: refused at its first use (and from then on).
        refresh.revoked = true;
        stats.refreshTokensExpiredUnused++;
        return tokenError(400, 'invalid_grant', refused);
      }
      if (
        opt('resourceOnRefresh', 'optional') === 'required' &&
        refresh.resource !== null &&
        form.get('resource') !== refresh.resource
      ) {
        return tokenError(400, 'invalid_target', 'resource missing or different on refresh');
      }
      return tokenAnswer(
        issueTokens(client.client_id, refresh.scope, refresh.resource, presented, refresh.family),
      );
    }
    const bearer = world.options.jwtBearer;
    if (grant === JWT_BEARER_GRANT && bearer !== undefined) {
      // RFC 7523 §2.1: a workload's token from a trusted issuer, for this server.
      stats.jwtBearerGrants++;
      const problem = await assertionProblem(
        form.get('assertion') ?? '',
        { iss: bearer.issuer },
        bearer.publicJwk,
        [issuerString, endpoint('token')],
        now(),
        null,
      );
      if (problem !== null) return tokenError(400, 'invalid_grant', problem);
      return tokenAnswer(
        issueTokens(
          client.client_id,
          form.get('scope') ?? '',
          form.get('resource'),
          null,
          undefined,
          false,
        ),
      );
    }
    if (grant === 'client_credentials' && client.grant_types.includes('client_credentials')) {
      // RFC 6749 §4.4: a token for the client itself, never with a refresh token (§4.4.3).
      stats.clientCredentialsGrants++;
      const resource = form.get('resource');
      return tokenAnswer(
        issueTokens(client.client_id, form.get('scope') ?? '', resource, null, undefined, false),
      );
    }
    return oauthError(400, 'unsupported_grant_type');
  }

  async function revoke(request: Request): Promise<Response> {
    const form = new URLSearchParams(await request.text());
    const client = await authenticateClient(request, form);
    if (client instanceof Response) return client;
    stats.revocations++;
    const value = form.get('token') ?? '';
    const access = accessTokens.get(value);
    if (access && opt('revocationRefusesAccessTokens', false)) {
      return oauthError(400, 'unsupported_token_type', 'access tokens are not revocable here');
    }
    if (access) access.revoked = true;
    const refresh = refreshTokens.get(value);
    if (refresh) refresh.revoked = true;
    return new Response(null, { status: 200 });
  }

  function isValidAccessToken(value: string): boolean {
    const access = accessTokens.get(value);
    return access !== undefined && !access.revoked && access.expiresAt > now();
  }

  function preregister(partial: Parameters<TestWorld['preregister']>[0]): RegisteredClient {
    const client: RegisteredClient = {
      client_id: partial.client_id ?? random(ISSUED_CLIENT_PREFIX),
      token_endpoint_auth_method:
        partial.token_endpoint_auth_method ??
        (partial.client_secret ? 'client_secret_basic' : 'none'),
      grant_types: partial.grant_types ?? ['authorization_code', 'refresh_token'],
      application_type: partial.application_type ?? 'web',
      client_secret_expires_at: partial.client_secret_expires_at ?? 0,
      via: 'preregistered',
      ...partial,
    };
    clients.set(client.client_id, client);
    return client;
  }

  function consent(authorizationUrl: string, decision: 'approve' | 'deny' = 'approve'): string {
    stats.authorizations++;
    const url = new URL(authorizationUrl);
    const params = url.searchParams;
    if (url.href.split('?')[0] !== endpoint('authorize'))
      throw new Error('not this server’s authorization endpoint');
    const client = clientOf(params.get('client_id') ?? '');
    if (client === null) {
      if (opt('unknownClientAtConsent', 'error_page') === 'error_page') {
        throw new Error('unknown client_id');
      }
      const back = new URL(params.get('redirect_uri') ?? '');
      const state = params.get('state');
      if (state !== null) back.searchParams.set('state', state);
      if (opt('issParameter', true)) back.searchParams.set('iss', issuerString);
      back.searchParams.set('error', 'invalid_client');
      return back.href;
    }
    const redirectUri = params.get('redirect_uri') ?? '';
    if (client.via !== 'metadata_document' && !client.redirect_uris.includes(redirectUri)) {
      throw new Error('redirect_uri is not registered');
    }
    const back = new URL(redirectUri);
    const state = params.get('state');
    if (state !== null) {
      seen.add(state);
      back.searchParams.set('state', state);
    }
    if (opt('issParameter', true)) back.searchParams.set('iss', issuerString);
    const fault = (error: string, description?: string) => {
      back.searchParams.set('error', error);
      if (description !== undefined) back.searchParams.set('error_description', description);
      return back.href;
    };
    if (params.get('response_type') !== 'code') return fault('unsupported_response_type');
    const classic = world.options.classic;
    const read = classicConsent(params, classic);
    if (read.fault !== null) return fault(read.fault);
    if (
      classic?.pkce !== 'ignored' &&
      (params.get('code_challenge_method') !== 'S256' || !params.get('code_challenge'))
    )
      return fault('invalid_request');
    const resource = params.get('resource');
    // The audience is the resource exactly as the metadata publishes it, or one the server lists.
    const accepted = opt('acceptedResources', [world.options.metadataResource ?? resourceUrl.href]);
    if (resource !== null && !accepted.includes(resource))
      return fault('invalid_target', opt('invalidTargetDescription', 'resource mismatch'));
    if (decision === 'deny') return fault('access_denied');
    const code = random('code_');
    codes.set(code, {
      clientId: client.client_id,
      redirectUri,
      challenge: params.get('code_challenge') ?? '',
      resource,
      scope: read.scope,
      used: false,
      consentPrompt: params.get('prompt')?.split(' ').includes('consent') === true,
    });
    back.searchParams.set('code', code);
    for (const [name, value] of Object.entries(classic?.redirectExtra ?? {}))
      back.searchParams.set(name, value);
    return back.href;
  }

  function forgetRegisteredClients(): void {
    for (const [id, client] of clients) if (client.via === 'dynamic') clients.delete(id);
  }

  function revokeRefreshTokens(): void {
    for (const refresh of refreshTokens.values()) refresh.revoked = true;
  }

  return {
    serverMetadata,
    register,
    token,
    revoke,
    isValidAccessToken,
    preregister,
    unregister,
    consent,
    forgetRegisteredClients,
    revokeRefreshTokens,
  };
}
