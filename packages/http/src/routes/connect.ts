import { type Broker, KeywayError } from '@keyway/core';
import { CONNECT_ASSETS, CONNECT_HTML } from '../inspector-assets.generated.js';
import { bearerOf } from '../request.js';
import { json, noContent } from '../responses.js';
import { assetReply } from './inspector.js';
import { BODY_ERRORS, decodedParam, type Route, type RouteContext, resourcePath } from './route.js';

/*
 * Connect sessions (docs/api.md §19): the application's routes that create, list and end
 * them (a broker token covering the namespace), and the hosted page's own — its HTML and
 * assets, and the three calls it makes with the session's secret as its Bearer credential.
 * The secret opens nothing else: every other route takes broker tokens only.
 */

const sessionId = {
  name: 'id',
  description: 'A connect session id, as `POST /api/admin/connect-sessions` answered it.',
};

export const CONNECT_SESSION_ROUTES: Route[] = [
  {
    method: 'POST',
    path: '/api/admin/connect-sessions',
    id: 'createConnectSession',
    summary:
      'Create a connect session for the end users of a namespace: its page URL holds the secret, shown this once.',
    see: '§19',
    body: 'ConnectSessionBody',
    ok: {
      201: { description: 'The session and its page URL.', schema: 'CreatedConnectSessionBody' },
    },
    errors: [...BODY_ERRORS, 'invalid_path', 'invalid_redirect', 'insufficient_scope', 'not_found'],
    handle: async ({ broker, principal, body }) =>
      json(
        201,
        await broker.connectSessions.create(
          principal,
          (await body()) as Parameters<Broker['connectSessions']['create']>[1],
        ),
      ),
  },
  {
    method: 'GET',
    path: '/api/admin/connect-sessions',
    id: 'listConnectSessions',
    summary:
      'List the connect sessions of namespaces the caller covers, newest first (never a secret).',
    see: '§19',
    query: 'ConnectSessionListQuery',
    ok: { 200: { description: 'The sessions.', schema: 'ConnectSessionListBody' } },
    errors: ['invalid_request', 'invalid_path'],
    handle: async ({ broker, principal, query }) => {
      const { namespace } = query() as { namespace?: string };
      const items = await broker.connectSessions.list(principal, namespace);
      return json(200, { items, next_cursor: null });
    },
  },
  {
    method: 'DELETE',
    path: '/api/admin/connect-sessions/{id}',
    id: 'revokeConnectSession',
    summary: 'End a connect session before its expiry: its secret is refused from then on.',
    see: '§19',
    param: sessionId,
    ok: { 200: { description: 'The session, ended.', schema: 'ConnectSessionViewBody' } },
    errors: ['not_found'],
    handle: async ({ broker, principal, param }) =>
      json(200, await broker.connectSessions.revoke(principal, decodedParam(param))),
  },
];

/**
 * The security headers of the connect page: this origin's files only, framed only by the
 * origins the operator lists (`KEYWAY_CONNECT_FRAME_ANCESTORS`), no Referer. No
 * `Cross-Origin-Opener-Policy`: the app's window that opened the page keeps its handle, to
 * hear how a connection ended (restricted to the app's origin).
 */
function pageHeaders(frameAncestors: readonly string[]): Record<string, string> {
  const ancestors = frameAncestors.length === 0 ? "'none'" : frameAncestors.join(' ');
  return {
    'content-type': 'text/html; charset=utf-8',
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'content-security-policy':
      "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src https: data:; " +
      `base-uri 'none'; form-action 'none'; frame-ancestors ${ancestors}`,
    ...(frameAncestors.length === 0 ? { 'x-frame-options': 'DENY' } : {}),
  };
}

/** The session a page's call is for: its secret, the Bearer credential of the call. */
async function pageOf(context: RouteContext) {
  const secret = bearerOf(context.incoming.authorization());
  if (secret === null || secret === undefined) {
    throw new KeywayError('invalid_token', 'the Authorization header is not "Bearer <secret>"');
  }
  return context.broker.connectSessions.open(secret, context.clientAddress());
}

const PAGE_ERRORS = ['invalid_token', 'rate_limited'] as const;

const providerId = resourcePath('provider_id');

/** The connect page's scripts and style: served always, left out of the document. */
export const CONNECT_ASSET_ROUTES: Route[] = [
  {
    method: 'GET',
    path: '/connect/assets/{file}',
    id: 'connectAsset',
    summary: 'A script or style of the connect page, named by its content.',
    see: '§19',
    public: true,
    undocumented: true,
    ok: { 200: { description: 'The asset.', schema: null } },
    errors: ['not_found'],
    handle: async ({ param }) => assetReply(CONNECT_ASSETS, param),
  },
];

export const CONNECT_PAGE_ROUTES: Route[] = [
  {
    method: 'GET',
    path: '/connect',
    id: 'connectPage',
    summary:
      'The hosted connect page: it reads its session secret from the URL’s fragment, which never reaches a server.',
    see: '§19',
    public: true,
    ok: { 200: { description: 'The page.', schema: null } },
    pages: { 200: 'text/html' },
    errors: [],
    handle: async ({ connectFrameAncestors }) => ({
      status: 200,
      headers: pageHeaders(connectFrameAncestors),
      body: CONNECT_HTML,
    }),
  },
  {
    method: 'GET',
    path: '/connect/api/session',
    id: 'connectPageView',
    summary:
      'What the connect page shows: its branding, each offered provider, its connection’s status.',
    see: '§19',
    public: true,
    ok: { 200: { description: 'The page’s view.', schema: 'ConnectPageViewBody' } },
    errors: [...PAGE_ERRORS],
    handle: async (context) => json(200, await (await pageOf(context)).view()),
  },
  {
    method: 'POST',
    path: '/connect/api/authorize',
    id: 'connectPageAuthorize',
    summary:
      'Start the authorization of an offered provider’s connection: its consent URL (the session secret as Bearer).',
    see: '§19; §5',
    public: true,
    body: 'ConnectStartBody',
    ok: { 200: { description: 'The consent URL.', schema: 'ConnectStartedBody' } },
    errors: [
      ...PAGE_ERRORS,
      ...BODY_ERRORS,
      'invalid_path',
      'not_found',
      'conflict',
      'upstream_error',
      'unsupported_authorization_server',
    ],
    handle: async (context) => {
      const page = await pageOf(context);
      const input = (await context.body()) as Parameters<typeof page.start>[0];
      return json(200, await page.start(input));
    },
  },
  {
    method: 'DELETE',
    path: '/connect/api/providers/{provider_id}',
    id: 'connectPageDisconnect',
    summary:
      'Disconnect an offered provider’s connection, when the session allows it (the session secret as Bearer).',
    see: '§19',
    public: true,
    param: providerId,
    ok: { 204: { description: 'Disconnected.', schema: null } },
    errors: [...PAGE_ERRORS, 'invalid_path', 'insufficient_scope', 'not_found'],
    handle: async (context) => {
      const page = await pageOf(context);
      await page.disconnect(decodedParam(context.param));
      return noContent();
    },
  },
];
