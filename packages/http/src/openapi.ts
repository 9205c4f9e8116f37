import { KeywayError, type KeywayErrorCode, schemas } from '@keyway/core';
import { z } from 'zod';

/*
 * The OpenAPI 3.1 document of the HTTP contract (API.md §10), generated from the request
 * and response schemas of `@keyway/core` (zod's JSON Schema output, draft 2020-12, which is
 * OpenAPI 3.1's dialect). A test holds this list of operations to the handler's routes.
 */

type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

interface Operation {
  method: Method;
  path: string;
  id: string;
  summary: string;
  /** The API.md section it implements. */
  see: string;
  /** Reached without a credential. */
  public?: boolean;
  /** A path parameter: `name` (one segment) or a resource path (slashes included). */
  param?: { name: string; description: string };
  query?: z.ZodObject;
  body?: z.ZodType;
  /** Success answers: a JSON schema, or `null` for an empty body. */
  ok: Record<number, { description: string; schema: z.ZodType | null }>;
  /** The error codes this operation answers with, besides those of every route. */
  errors: KeywayErrorCode[];
}

const RESOURCE_PATH =
  'A resource path (API.md §2): slash-delimited segments, sent as they are in the URL path.';
const path = (name: string) => ({ name, description: RESOURCE_PATH });
const tokenName = { name: 'name', description: 'A token name (API.md §3.2): one path segment.' };
const BODY_ERRORS: KeywayErrorCode[] = [
  'invalid_request',
  'payload_too_large',
  'unsupported_media_type',
];
const PROVIDER_ERRORS: KeywayErrorCode[] = ['provider_management_disabled'];

/** Every operation of the contract. */
export const OPERATIONS: readonly Operation[] = [
  {
    method: 'get',
    path: '/api/admin/tokens',
    id: 'listTokens',
    summary: 'List live broker tokens: all for the root key, its own tree for a token.',
    see: 'API.md §3.3',
    query: schemas.TokenListQuery,
    ok: {
      200: { description: 'A page of tokens.', schema: schemas.PageOf(schemas.TokenViewBody) },
    },
    errors: ['invalid_request'],
  },
  {
    method: 'post',
    path: '/api/admin/tokens',
    id: 'mintToken',
    summary: 'Mint a broker token; the root key any, a token only narrower descendants.',
    see: 'API.md §3.2, §3.3',
    body: schemas.MintTokenBody,
    ok: { 201: { description: 'The token, shown this once.', schema: schemas.IssuedTokenBody } },
    errors: [
      ...BODY_ERRORS,
      'invalid_name',
      'invalid_scope',
      'invalid_lifetime',
      'delegation_denied',
      'insufficient_scope',
      'conflict',
    ],
  },
  {
    method: 'get',
    path: '/api/admin/tokens/{name}',
    id: 'getToken',
    summary: 'Read a live token (never the token itself).',
    see: 'API.md §3.3',
    param: tokenName,
    ok: { 200: { description: 'The token.', schema: schemas.TokenViewBody } },
    errors: ['invalid_name', 'delegation_denied', 'not_found'],
  },
  {
    method: 'patch',
    path: '/api/admin/tokens/{name}',
    id: 'narrowToken',
    summary: 'Narrow a token and, in the same transaction, every descendant.',
    see: 'API.md §3.3',
    param: tokenName,
    body: schemas.NarrowTokenBody,
    ok: { 200: { description: 'The token as narrowed.', schema: schemas.TokenViewBody } },
    errors: [
      ...BODY_ERRORS,
      'invalid_name',
      'invalid_scope',
      'invalid_lifetime',
      'delegation_denied',
      'not_found',
    ],
  },
  {
    method: 'delete',
    path: '/api/admin/tokens/{name}',
    id: 'deleteToken',
    summary: 'Delete a token and every descendant.',
    see: 'API.md §3.3',
    param: tokenName,
    ok: { 204: { description: 'Deleted.', schema: null } },
    errors: ['invalid_name', 'delegation_denied', 'not_found'],
  },
  {
    method: 'get',
    path: '/api/admin/providers',
    id: 'listProviders',
    summary: 'List the providers the credential covers.',
    see: 'API.md §4',
    query: schemas.ProviderListQuery,
    ok: {
      200: {
        description: 'A page of providers.',
        schema: schemas.PageOf(schemas.ProviderViewBody),
      },
    },
    errors: [...PROVIDER_ERRORS, 'invalid_request', 'invalid_path'],
  },
  {
    method: 'get',
    path: '/api/admin/providers/{id}',
    id: 'getProvider',
    summary: 'Read a provider (never a secret).',
    see: 'API.md §4',
    param: path('id'),
    ok: { 200: { description: 'The provider.', schema: schemas.ProviderViewBody } },
    errors: [...PROVIDER_ERRORS, 'invalid_path', 'insufficient_scope', 'not_found'],
  },
  {
    method: 'put',
    path: '/api/admin/providers/{id}',
    id: 'putProvider',
    summary: 'Create or replace a provider: discovery and registration first, then storage.',
    see: 'API.md §4, §6',
    param: path('id'),
    body: schemas.ProviderBody,
    ok: {
      200: { description: 'Replaced.', schema: schemas.ProviderViewBody },
      201: { description: 'Created.', schema: schemas.ProviderViewBody },
    },
    errors: [
      ...PROVIDER_ERRORS,
      ...BODY_ERRORS,
      'invalid_path',
      'insufficient_scope',
      'discovery_failed',
      'unsupported_authorization_server',
      'registration_unsupported',
      'registration_failed',
      'conflict',
    ],
  },
  {
    method: 'post',
    path: '/api/admin/providers/{id}/register',
    id: 'registerProvider',
    summary:
      'Register a new client at the provider’s authorization server (the server forgot the old one); its connections need a new consent.',
    see: 'API.md §6 item 11',
    param: path('id'),
    ok: { 200: { description: 'The provider.', schema: schemas.ProviderViewBody } },
    errors: [
      ...PROVIDER_ERRORS,
      'invalid_path',
      'insufficient_scope',
      'not_found',
      'conflict',
      'registration_unsupported',
      'registration_failed',
    ],
  },
  {
    method: 'delete',
    path: '/api/admin/providers/{id}',
    id: 'deleteProvider',
    summary: 'Delete a provider and its secrets, once no connection uses it.',
    see: 'API.md §4',
    param: path('id'),
    ok: { 204: { description: 'Deleted.', schema: null } },
    errors: [...PROVIDER_ERRORS, 'invalid_path', 'insufficient_scope', 'not_found', 'conflict'],
  },
  {
    method: 'post',
    path: '/api/admin/discover',
    id: 'discover',
    summary: 'Run discovery for a resource URL and answer the trace, storing nothing.',
    see: 'API.md §6, §8',
    body: schemas.DiscoverBody,
    ok: { 200: { description: 'The discovery trace.', schema: schemas.DiscoveryTraceBody } },
    errors: [...PROVIDER_ERRORS, ...BODY_ERRORS],
  },
  {
    method: 'get',
    path: '/api/oauth/client-metadata.json',
    id: 'clientMetadataDocument',
    summary: 'The client-ID metadata document of this deployment.',
    see: 'API.md §6 step 6',
    public: true,
    ok: { 200: { description: 'The document.', schema: schemas.ClientMetadataBody } },
    errors: ['not_found'],
  },
  {
    method: 'post',
    path: '/api/oauth/authorize/{provider_id}',
    id: 'authorize',
    summary: 'Start an authorization: a pending connection and its consent URL.',
    see: 'API.md §5',
    param: path('provider_id'),
    body: schemas.AuthorizeBody,
    ok: { 201: { description: 'The consent URL.', schema: schemas.AuthorizeResultBody } },
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
    ],
  },
  {
    method: 'get',
    path: '/api/oauth/callback',
    id: 'callback',
    summary: 'The OAuth redirect URI: completes an authorization (a browser comes here).',
    see: 'API.md §5; RFC 6749 §4.1.2; RFC 9207',
    public: true,
    ok: {
      200: { description: 'A page saying how the authorization ended (text/html).', schema: null },
      302: { description: 'Back to the `redirect_to` of the authorize call.', schema: null },
    },
    errors: [],
  },
  {
    method: 'get',
    path: '/api/oauth/callback/{server_key}',
    id: 'serverCallback',
    summary:
      'The redirect URI of one authorization server (clients Keyway registers): as the shared callback, and a response that belongs to another server is refused.',
    see: 'API.md §5 "Mix-up defense"; RFC 9700 §4.4',
    public: true,
    param: {
      name: 'server_key',
      description: 'The key derived from the issuer, as in the provider view’s `redirect_uri`.',
    },
    ok: {
      200: { description: 'A page saying how the authorization ended (text/html).', schema: null },
      302: { description: 'Back to the `redirect_to` of the authorize call.', schema: null },
    },
    errors: [],
  },
  {
    method: 'post',
    path: '/api/oauth/verify',
    id: 'verify',
    summary: 'Confirm a user-verification flow: the connection then uses its new tokens.',
    see: 'API.md §5 "User verification"',
    body: schemas.VerifyBody,
    ok: { 200: { description: 'The connection.', schema: schemas.ConnectionViewBody } },
    errors: [...BODY_ERRORS, 'insufficient_scope', 'not_found'],
  },
  {
    method: 'get',
    path: '/api/admin/audit',
    id: 'listAuditEvents',
    summary:
      'The audit log, newest first: events of resources the credential covers, and of its descendant tokens.',
    see: 'API.md §11',
    query: schemas.AuditListQuery,
    ok: { 200: { description: 'A page of events.', schema: schemas.PageOf(schemas.EventBody) } },
    errors: ['invalid_request', 'invalid_path'],
  },
  {
    method: 'get',
    path: '/api/admin/webhooks/deliveries',
    id: 'listWebhookDeliveries',
    summary: 'Webhook deliveries by status (failed ones to replay by hand); the root key only.',
    see: 'API.md §11',
    query: schemas.DeliveryListQuery,
    ok: {
      200: {
        description: 'A page of deliveries.',
        schema: schemas.PageOf(schemas.DeliveryViewBody),
      },
    },
    errors: ['invalid_request', 'insufficient_scope'],
  },
  {
    method: 'get',
    path: '/api/oauth/connections',
    id: 'listConnections',
    summary: 'List the connections the credential covers, by prefix, provider and status.',
    see: 'API.md §5',
    query: schemas.ConnectionListQuery,
    ok: {
      200: {
        description: 'A page of connections.',
        schema: schemas.PageOf(schemas.ConnectionViewBody),
      },
    },
    errors: ['invalid_request', 'invalid_path'],
  },
  {
    method: 'get',
    path: '/api/oauth/connections/{id}',
    id: 'getConnection',
    summary: 'Read a connection (never a token).',
    see: 'API.md §5',
    param: path('id'),
    ok: { 200: { description: 'The connection.', schema: schemas.ConnectionViewBody } },
    errors: ['invalid_path', 'insufficient_scope', 'not_found'],
  },
  {
    method: 'delete',
    path: '/api/oauth/connections/{id}',
    id: 'deleteConnection',
    summary: 'Delete a connection, revoking its tokens at their server (best effort).',
    see: 'API.md §5; RFC 7009',
    param: path('id'),
    ok: { 204: { description: 'Deleted.', schema: null } },
    errors: ['invalid_path', 'insufficient_scope', 'not_found'],
  },
  {
    method: 'get',
    path: '/api/oauth/credentials/{id}',
    id: 'credentials',
    summary: 'A connection’s access token, refreshed first when due.',
    see: 'API.md §5 "Credentials"',
    param: path('id'),
    query: schemas.CredentialsQuery,
    ok: { 200: { description: 'The access token.', schema: schemas.CredentialsBody } },
    errors: [
      'invalid_request',
      'invalid_path',
      'insufficient_scope',
      'not_found',
      'connection_not_active',
      'refresh_unavailable',
      'reauthorization_required',
      'upstream_error',
    ],
  },
  {
    method: 'post',
    path: '/api/oauth/probe/{id}',
    id: 'probe',
    summary:
      'Check that a connection works: MCP initialize (or server/discover) and tools/list with its token.',
    see: 'API.md §8',
    param: path('id'),
    ok: {
      200: {
        description: 'The probe, step by step (never the token).',
        schema: schemas.ProbeResultBody,
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
  },
  {
    method: 'get',
    path: '/api/vault/secrets',
    id: 'listSecrets',
    summary: 'List the secrets the credential covers (never a value).',
    see: 'API.md §7',
    query: schemas.SecretListQuery,
    ok: {
      200: { description: 'A page of secrets.', schema: schemas.PageOf(schemas.SecretViewBody) },
    },
    errors: ['invalid_request', 'invalid_path'],
  },
  {
    method: 'get',
    path: '/api/vault/secrets/{path}',
    id: 'getSecret',
    summary: 'Read a secret with its value.',
    see: 'API.md §7',
    param: path('path'),
    ok: { 200: { description: 'The secret.', schema: schemas.SecretWithValueBody } },
    errors: ['invalid_path', 'insufficient_scope', 'not_found'],
  },
  {
    method: 'put',
    path: '/api/vault/secrets/{path}',
    id: 'putSecret',
    summary: 'Write a secret (encrypted at rest).',
    see: 'API.md §7',
    param: path('path'),
    body: schemas.PutSecretBody,
    ok: {
      200: { description: 'Replaced.', schema: schemas.SecretViewBody },
      201: { description: 'Created.', schema: schemas.SecretViewBody },
    },
    errors: [...BODY_ERRORS, 'invalid_path', 'insufficient_scope'],
  },
  {
    method: 'delete',
    path: '/api/vault/secrets/{path}',
    id: 'deleteSecret',
    summary: 'Delete a secret.',
    see: 'API.md §7',
    param: path('path'),
    ok: { 204: { description: 'Deleted.', schema: null } },
    errors: ['invalid_path', 'insufficient_scope', 'not_found'],
  },
  {
    method: 'get',
    path: '/api/openapi.json',
    id: 'openapi',
    summary: 'This document.',
    see: 'API.md §10',
    public: true,
    ok: {
      200: {
        description: 'The OpenAPI 3.1 document.',
        schema: z.looseObject({ openapi: z.literal('3.1.1') }),
      },
    },
    errors: [],
  },
];

/** JSON Schema (draft 2020-12) of a zod schema: `input` for requests, `output` for answers. */
function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' });
  return rest;
}

const jsonBody = (schema: z.ZodType, io: 'input' | 'output') => ({
  'application/json': { schema: jsonSchema(schema, io) },
});

function errorResponses(operation: Operation): Record<string, unknown> {
  const codes: KeywayErrorCode[] = [
    ...operation.errors,
    ...(operation.public ? [] : (['invalid_token', 'rate_limited'] as const)),
    'internal_error',
  ];
  const byStatus = new Map<number, KeywayErrorCode[]>();
  for (const code of new Set(codes)) {
    const status = new KeywayError(code, code).status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const responses: Record<string, unknown> = {};
  for (const [status, list] of [...byStatus].sort(([a], [b]) => a - b)) {
    const schema = {
      allOf: [{ $ref: '#/components/schemas/Error' }],
      properties: { error: { enum: list } },
    };
    responses[String(status)] = {
      description: `Error: ${list.map((code) => `\`${code}\``).join(', ')} (API.md §1.2).`,
      content: { 'application/json': { schema } },
    };
  }
  if (operation.id === 'callback' || operation.id === 'serverCallback') {
    responses['400'] = {
      description: 'An unknown, expired or replayed state: a page that says so (text/html).',
      content: { 'text/html': { schema: { type: 'string' } } },
    };
  }
  return responses;
}

function parameters(operation: Operation): unknown[] {
  const list: unknown[] = [];
  if (operation.param !== undefined) {
    list.push({
      name: operation.param.name,
      in: 'path',
      required: true,
      description: operation.param.description,
      schema: { type: 'string' },
    });
  }
  if (operation.query !== undefined) {
    const query = jsonSchema(operation.query, 'input') as {
      properties?: Record<string, unknown>;
      required?: string[];
    };
    for (const [name, schema] of Object.entries(query.properties ?? {})) {
      list.push({
        name,
        in: 'query',
        required: query.required?.includes(name) ?? false,
        schema,
      });
    }
  }
  return list;
}

/**
 * The OpenAPI 3.1 document of Keyway's HTTP API (API.md §10), served at
 * `GET {base}/api/openapi.json`.
 *
 * @param serverUrl Where the API is served (the `servers` entry), when known.
 */
export function openApiDocument(serverUrl?: string): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const operation of OPERATIONS) {
    const ok: Record<string, unknown> = {};
    for (const [status, answer] of Object.entries(operation.ok)) {
      ok[status] =
        answer.schema === null
          ? { description: answer.description }
          : { description: answer.description, content: jsonBody(answer.schema, 'output') };
    }
    const params = parameters(operation);
    paths[operation.path] ??= {};
    (paths[operation.path] as Record<string, unknown>)[operation.method] = {
      operationId: operation.id,
      summary: operation.summary,
      description: `See ${operation.see}.`,
      ...(operation.public ? { security: [] } : {}),
      ...(params.length > 0 ? { parameters: params } : {}),
      ...(operation.body === undefined
        ? {}
        : { requestBody: { required: true, content: jsonBody(operation.body, 'input') } }),
      responses: { ...ok, ...errorResponses(operation) },
    };
  }
  return {
    openapi: '3.1.1',
    info: {
      title: 'Keyway',
      version: '0.1.0',
      summary: 'OAuth connection broker for MCP servers and other APIs.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    ...(serverUrl === undefined ? {} : { servers: [{ url: serverUrl }] }),
    security: [{ bearer: [] }],
    components: {
      schemas: { Error: jsonSchema(schemas.ErrorBody, 'output') },
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description: 'The root key or a broker token (API.md §1.1, §3).',
        },
      },
    },
    paths,
  };
}
