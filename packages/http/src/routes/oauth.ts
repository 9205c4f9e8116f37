import {
  type AuthorizeInput,
  KeywayError,
  resourcePathFromUrl,
  type UpdateConnectionInput,
  type VerifyInput,
} from '@keyway/core';
import { CONNECTION_VIEW_JSON } from '@keyway/core/contract';
import { callbackReply, invalidCallbackReply } from '../callback-page.js';
import { CALLBACK_SCRIPT, CONNECT_CALLBACK_SCRIPT } from '../inspector-assets.generated.js';
import { json, jsonText, noContent, PUBLIC_JSON_HEADERS, type Reply } from '../responses.js';
import { BODY_ERRORS, type Route, type RouteContext, resourcePath } from './route.js';

/* The OAuth routes (docs/api.md §5, §6, §8): authorization, callbacks, connections. */

/** What a callback page says (text/html), as the document names it. */
const CALLBACK_OK = {
  200: { description: 'A page saying how the authorization ended (text/html).', schema: null },
  302: { description: 'Back to the `redirect_to` of the authorize call.', schema: null },
};
const CALLBACK_PAGES = {
  400: 'An unknown, expired or replayed state: a page that says so (text/html).',
};

/**
 * A callback: the shared one (`serverKey` null) or a server's own. The page's script path
 * is relative to the page: the server's callback is one segment deeper.
 */
async function completeCallback(context: RouteContext, serverKey: string | null): Promise<Reply> {
  try {
    const outcome = await context.broker.connections.callback(
      context.incoming.searchParams(),
      serverKey,
    );
    // The page that started the consent hears how it ended: the connect page (always
    // served), or the inspector when it is on.
    const script =
      outcome.page === 'connect'
        ? `connect/assets/${CONNECT_CALLBACK_SCRIPT}`
        : context.inspector
          ? `inspector/assets/${CALLBACK_SCRIPT}`
          : null;
    return callbackReply(
      outcome,
      script === null ? undefined : `${serverKey === null ? '' : '../'}../../${script}`,
    );
  } catch (error) {
    if (error instanceof KeywayError && error.code === 'invalid_request') {
      return invalidCallbackReply(error.message);
    }
    throw error;
  }
}

export const OAUTH_ROUTES: Route[] = [
  {
    method: 'GET',
    path: '/api/oauth/client-metadata.json',
    id: 'clientMetadataDocument',
    summary: 'The client-ID metadata document of this deployment.',
    see: '§6 step 6',
    public: true,
    ok: { 200: { description: 'The document.', schema: 'ClientMetadataBody' } },
    errors: ['not_found'],
    handle: async ({ broker }) => {
      const document = broker.clientMetadataDocument();
      if (document === null) throw new KeywayError('not_found', 'this deployment has no base URL');
      return { status: 200, headers: PUBLIC_JSON_HEADERS, body: JSON.stringify(document) };
    },
  },
  {
    method: 'POST',
    path: '/api/oauth/authorize/{provider_id}',
    id: 'authorize',
    summary:
      'Start an authorization: a pending connection and its consent URL (with the client credentials grant, the ' +
      'connection with its token at once).',
    see: '§5, §14',
    param: resourcePath('provider_id'),
    body: 'AuthorizeBody',
    ok: {
      201: {
        description:
          'The consent URL; for a provider of the client credentials grant, the active connection.',
        schema: 'AuthorizeAnswerBody',
      },
    },
    errors: [
      ...BODY_ERRORS,
      'invalid_path',
      'invalid_redirect',
      'insufficient_scope',
      'not_found',
      'conflict',
      'discovery_failed',
      'unsupported_authorization_server',
      'registration_unsupported',
      'registration_failed',
      'upstream_error',
    ],
    handle: async ({ broker, principal, param, body }) => {
      const input = (await body()) as AuthorizeInput;
      return json(
        201,
        await broker.connections.start(principal, resourcePathFromUrl(param), input),
      );
    },
  },
  {
    method: 'GET',
    path: '/api/oauth/callback',
    id: 'callback',
    summary: 'The OAuth redirect URI: completes an authorization (a browser comes here).',
    see: '§5; RFC 6749 §4.1.2; RFC 9207',
    public: true,
    ok: CALLBACK_OK,
    errors: [],
    pages: CALLBACK_PAGES,
    handle: (context) => completeCallback(context, null),
  },
  {
    method: 'GET',
    path: '/api/oauth/callback/{server_key}',
    id: 'serverCallback',
    summary:
      'The redirect URI of one authorization server (clients Keyway registers): as the shared callback, and a ' +
      'response that belongs to another server is refused.',
    see: '§5 "Mix-up defense"; RFC 9700 §4.4',
    public: true,
    param: {
      name: 'server_key',
      description: 'The key derived from the issuer, as in the provider view’s `redirect_uri`.',
    },
    ok: CALLBACK_OK,
    errors: [],
    pages: CALLBACK_PAGES,
    handle: (context) => completeCallback(context, context.param),
  },
  {
    method: 'POST',
    path: '/api/oauth/verify',
    id: 'verify',
    summary: 'Confirm a user-verification flow: the connection then uses its new tokens.',
    see: '§5 "User verification"',
    body: 'VerifyBody',
    ok: { 200: { description: 'The connection.', schema: 'ConnectionViewBody' } },
    errors: [...BODY_ERRORS, 'insufficient_scope', 'not_found'],
    handle: async ({ broker, principal, body }) =>
      json(200, await broker.connections.verify(principal, (await body()) as VerifyInput)),
  },
];

export const CONNECTION_ROUTES: Route[] = [
  {
    method: 'GET',
    path: '/api/oauth/connections',
    id: 'listConnections',
    summary: 'List the connections the credential covers, by prefix, provider and status.',
    see: '§5',
    query: 'ConnectionListQuery',
    ok: {
      200: {
        description: 'A page of connections.',
        schema: 'ConnectionPage',
      },
    },
    errors: ['invalid_request', 'invalid_path'],
    handle: async ({ broker, principal, query }) =>
      json(200, await broker.connections.list(principal, query())),
  },
  {
    method: 'GET',
    path: '/api/oauth/connections/{id}',
    id: 'getConnection',
    summary: 'Read a connection (never a token).',
    see: '§5',
    param: resourcePath('id'),
    ok: { 200: { description: 'The connection.', schema: 'ConnectionViewBody' } },
    errors: ['invalid_path', 'insufficient_scope', 'not_found'],
    handle: async ({ broker, principal, param }) =>
      jsonText(
        200,
        await broker.connections[CONNECTION_VIEW_JSON](principal, resourcePathFromUrl(param)),
      ),
  },
  {
    method: 'PATCH',
    path: '/api/oauth/connections/{id}',
    id: 'updateConnection',
    summary: 'Set or clear what the portal reads of a connection: its alias and its tool policy.',
    see: '§18',
    param: resourcePath('id'),
    body: 'UpdateConnectionBody',
    ok: { 200: { description: 'The connection as updated.', schema: 'ConnectionViewBody' } },
    errors: [...BODY_ERRORS, 'invalid_path', 'insufficient_scope', 'not_found', 'conflict'],
    handle: async ({ broker, principal, param, body }) => {
      const input = (await body()) as UpdateConnectionInput;
      return json(
        200,
        await broker.connections.update(principal, resourcePathFromUrl(param), input),
      );
    },
  },
  {
    method: 'DELETE',
    path: '/api/oauth/connections/{id}',
    id: 'deleteConnection',
    summary: 'Delete a connection, revoking its tokens at their server (best effort).',
    see: '§5; RFC 7009',
    param: resourcePath('id'),
    ok: { 204: { description: 'Deleted.', schema: null } },
    errors: ['invalid_path', 'insufficient_scope', 'not_found'],
    handle: async ({ broker, principal, param }) => {
      await broker.connections.delete(principal, resourcePathFromUrl(param));
      return noContent();
    },
  },
  {
    method: 'GET',
    path: '/api/oauth/credentials/{id}',
    id: 'credentials',
    summary: 'A connection’s access token, refreshed first when due.',
    see: '§5 "Credentials"',
    param: resourcePath('id'),
    query: 'CredentialsQuery',
    ok: { 200: { description: 'The access token.', schema: 'CredentialsBody' } },
    errors: [
      'invalid_request',
      'invalid_path',
      'insufficient_scope',
      'not_found',
      'credentials_not_exportable',
      'connection_not_active',
      'refresh_unavailable',
      'reauthorization_required',
      'upstream_error',
    ],
    handle: async ({ broker, principal, param, query }) =>
      json(
        200,
        await broker.connections.credentials(principal, resourcePathFromUrl(param), query()),
      ),
  },
  {
    method: 'POST',
    path: '/api/oauth/probe/{id}',
    id: 'probe',
    summary:
      'Check that a connection works: MCP initialize (or server/discover) and tools/list with its token.',
    see: '§8',
    param: resourcePath('id'),
    ok: {
      200: {
        description: 'The probe, step by step (never the token).',
        schema: 'ProbeResultBody',
      },
    },
    errors: [
      'invalid_path',
      'insufficient_scope',
      'not_found',
      'connection_not_active',
      'reauthorization_required',
      'upstream_error',
    ],
    handle: async ({ broker, principal, param }) =>
      json(200, await broker.connections.probe(principal, resourcePathFromUrl(param))),
  },
];
