import { KeywayError } from '@keyway/core';
import { OAuthError } from '@keyway/core/sign-in';
import { json, noContent, type Reply } from '../responses.js';
import { bindingOf, signInReply } from '../sign-in-pages.js';
import { decodedParam, type Route, type RouteContext } from './route.js';

/*
 * Keyway as the authorization server of its MCP endpoints (docs/api.md §17): the pages of
 * the authorization endpoint, the token, registration and revocation endpoints, and the
 * grants they made. Every route but the grants' is public: an MCP client and its user's
 * browser call them. When sign-in is off they answer `404 not_found`.
 */

/** `{ error, error_description }` of the OAuth endpoints (RFC 6749 §5.2, RFC 7591 §3.2.2). */
const OAUTH_ERROR_SCHEMA = {
  type: 'object',
  properties: { error: { type: 'string' }, error_description: { type: 'string' } },
  required: ['error'],
};

/** An answer of the token endpoint (RFC 6749 §5.1). */
const TOKEN_ANSWER_SCHEMA = {
  type: 'object',
  properties: {
    access_token: { type: 'string', description: 'A broker token bound to the endpoint.' },
    token_type: { const: 'Bearer' },
    expires_in: { type: 'integer' },
    refresh_token: { type: 'string', description: 'Single use: each refresh rotates it.' },
  },
  required: ['access_token', 'token_type', 'expires_in', 'refresh_token'],
};

const METADATA_SCHEMA = { type: 'object', additionalProperties: true };

/** The answer of an OAuth endpoint's refusal, with `Cache-Control: no-store`. */
function oauthErrorReply(error: OAuthError): Reply {
  return json(error.status, error.toJSON());
}

/** A sign-in answer as the reply of a page route. */
async function pageReply(
  context: RouteContext,
  answer: Parameters<typeof signInReply>[0],
  afterForm: boolean,
): Promise<Reply> {
  const issuer = context.broker.signIn.issuer;
  return signInReply(answer, {
    issuer,
    action: `${new URL(issuer).pathname.replace(/\/$/, '')}/oauth/authorize`,
    afterForm,
  });
}

const binding = (context: RouteContext) =>
  bindingOf(context.incoming.header('cookie'), context.broker.signIn.issuer);

/** `404` when sign-in is off: for the routes that would read a body first. */
function assertOn(context: RouteContext): void {
  if (!context.broker.signIn.enabled) {
    throw new KeywayError('not_found', 'sign-in for MCP clients is not turned on');
  }
}

/**
 * Runs an OAuth endpoint: its refusals as RFC 6749 §5.2 bodies, not Keyway errors. When
 * sign-in is off it is no endpoint at all: `404`, before its body is read.
 */
async function oauthEndpoint(context: RouteContext, run: () => Promise<Reply>): Promise<Reply> {
  assertOn(context);
  try {
    return await run();
  } catch (error) {
    if (error instanceof OAuthError) return oauthErrorReply(error);
    if (error instanceof KeywayError && error.code === 'invalid_request') {
      return oauthErrorReply(new OAuthError('invalid_request', error.message));
    }
    throw error;
  }
}

export const SIGN_IN_ROUTES: Route[] = [
  {
    method: 'GET',
    path: '/oauth/authorize',
    id: 'signInAuthorize',
    summary: 'Authorization endpoint of MCP clients: the sign-in page (text/html).',
    see: '§17',
    public: true,
    ok: {
      200: { description: 'The sign-in page.', schema: null },
      302: { description: 'Back to the client with `error`, `state` and `iss`.', schema: null },
    },
    pages: { 400: 'A client or redirect URI that cannot be trusted: a page saying why.' },
    errors: ['not_found'],
    handle: async (context) =>
      pageReply(
        context,
        await context.broker.signIn.authorize(context.incoming.searchParams(), binding(context)),
        false,
      ),
  },
  {
    method: 'POST',
    path: '/oauth/authorize',
    id: 'signInForm',
    summary: 'The forms of the sign-in and consent pages (application/x-www-form-urlencoded).',
    see: '§17',
    public: true,
    passThrough: { request: ['application/x-www-form-urlencoded'], response: ['text/html'] },
    ok: {
      200: { description: 'The next page: consent, or sign-in again saying why.', schema: null },
      303: {
        description:
          'To the client with a `code` (or `error`), `state` and `iss`; or to the identity provider.',
        schema: null,
      },
    },
    pages: { 400: 'An expired, used or foreign form: a page saying to start again.' },
    errors: ['not_found', 'payload_too_large', 'unsupported_media_type', 'invalid_request'],
    handle: async (context) => {
      assertOn(context);
      const form = await context.form();
      const request = form.get('request') ?? '';
      const browser = binding(context);
      const signIn = context.broker.signIn;
      const action = form.get('action');
      const answer =
        action === 'token'
          ? await signIn.signInWithToken(
              request,
              form.get('token') ?? '',
              browser,
              context.incoming.clientAddress(),
            )
          : action === 'oidc'
            ? await signIn.signInUpstream(request, browser)
            : await signIn.decide(request, form.get('decision') ?? '', browser);
      return pageReply(context, answer, true);
    },
  },
  {
    method: 'GET',
    path: '/oauth/sign-in/callback',
    id: 'signInUpstreamCallback',
    summary: 'Where the upstream OpenID provider sends the user back (text/html).',
    see: '§17',
    public: true,
    ok: { 200: { description: 'The consent page, or sign-in again saying why.', schema: null } },
    pages: { 400: 'An expired, used or foreign sign-in: a page saying to start again.' },
    errors: ['not_found'],
    handle: async (context) =>
      pageReply(
        context,
        await context.broker.signIn.upstreamCallback(
          context.incoming.searchParams(),
          binding(context),
        ),
        false,
      ),
  },
  {
    method: 'POST',
    path: '/oauth/token',
    id: 'signInToken',
    summary: 'Token endpoint of MCP clients: a code or a refresh token for an access token.',
    see: '§17',
    public: true,
    passThrough: { request: ['application/x-www-form-urlencoded'], response: [] },
    ok: {
      200: { description: 'The tokens (RFC 6749 §5.1).', schema: TOKEN_ANSWER_SCHEMA },
      400: {
        description:
          'Refused (RFC 6749 §5.2): `invalid_request`, `invalid_grant`, `unsupported_grant_type`, `invalid_target`.',
        schema: OAUTH_ERROR_SCHEMA,
      },
      401: {
        description: 'Refused: `invalid_client` (no `client_id`).',
        schema: OAUTH_ERROR_SCHEMA,
      },
    },
    errors: ['not_found', 'payload_too_large', 'unsupported_media_type'],
    handle: async (context) =>
      oauthEndpoint(context, async () =>
        json(200, await context.broker.signIn.token(await context.form()), { pragma: 'no-cache' }),
      ),
  },
  {
    method: 'POST',
    path: '/oauth/register',
    id: 'signInRegister',
    summary: 'Dynamic registration of a public MCP client (RFC 7591).',
    see: '§17',
    public: true,
    passThrough: { request: ['application/json'], response: [] },
    ok: {
      201: { description: 'The client information (RFC 7591 §3.2.1).', schema: METADATA_SCHEMA },
      400: {
        description:
          'Refused (RFC 7591 §3.2.2): `invalid_redirect_uri`, `invalid_client_metadata`.',
        schema: OAUTH_ERROR_SCHEMA,
      },
    },
    errors: ['not_found', 'payload_too_large', 'unsupported_media_type', 'rate_limited'],
    handle: async (context) =>
      oauthEndpoint(context, async () =>
        json(
          201,
          await context.broker.signIn.register(
            await context.body(),
            context.incoming.clientAddress(),
          ),
        ),
      ),
  },
  {
    method: 'POST',
    path: '/oauth/revoke',
    id: 'signInRevoke',
    summary: 'Revocation of an MCP client’s refresh or access token (RFC 7009).',
    see: '§17',
    public: true,
    passThrough: { request: ['application/x-www-form-urlencoded'], response: [] },
    ok: {
      200: { description: 'Revoked, or nothing to revoke (RFC 7009 §2.2).', schema: null },
      400: { description: 'Refused: `invalid_request` (no `token`).', schema: OAUTH_ERROR_SCHEMA },
    },
    errors: ['not_found', 'payload_too_large', 'unsupported_media_type'],
    handle: async (context) =>
      oauthEndpoint(context, async () => {
        await context.broker.signIn.revoke(await context.form());
        return { status: 200, headers: { 'cache-control': 'no-store' }, body: null };
      }),
  },
  {
    method: 'GET',
    path: '/api/admin/grants',
    id: 'listGrants',
    summary:
      'List the live grants of MCP clients that signed in: all for the root key, its own tree’s for a token.',
    see: '§17',
    query: 'GrantListQuery',
    ok: { 200: { description: 'A page of grants.', schema: 'GrantPage' } },
    errors: ['invalid_request', 'not_found'],
    handle: async ({ broker, principal, query }) =>
      json(200, await broker.signIn.grants(principal, query())),
  },
  {
    method: 'DELETE',
    path: '/api/admin/grants/{grant_id}',
    id: 'revokeGrant',
    summary: 'Revoke a grant: its refresh token and every access token it issued.',
    see: '§17',
    param: { name: 'grant_id', description: 'The grant’s id.' },
    ok: { 204: { description: 'Revoked.', schema: null } },
    errors: ['not_found'],
    handle: async ({ broker, principal, param }) => {
      await broker.signIn.revokeGrant(principal, decodedParam(param));
      return noContent();
    },
  },
];
