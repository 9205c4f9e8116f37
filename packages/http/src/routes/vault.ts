import { type PutSecretInput, resourcePathFromUrl } from '@keyway/core';
import { json, noContent, PUBLIC_JSON_HEADERS } from '../responses.js';
import { BODY_ERRORS, type Route, resourcePath } from './route.js';

/* The vault routes (docs/api.md §7), and the document itself (docs/api.md §10). */

export const VAULT_ROUTES: Route[] = [
  {
    method: 'GET',
    path: '/api/vault/secrets',
    id: 'listSecrets',
    summary: 'List the secrets the credential covers (never a value).',
    see: '§7',
    query: 'SecretListQuery',
    ok: {
      200: { description: 'A page of secrets.', schema: 'SecretPage' },
    },
    errors: ['invalid_request', 'invalid_path'],
    handle: async ({ broker, principal, query }) =>
      json(200, await broker.secrets.list(principal, query())),
  },
  {
    method: 'GET',
    path: '/api/vault/secrets/{path}',
    id: 'getSecret',
    summary: 'Read a secret with its value.',
    see: '§7',
    param: resourcePath('path'),
    ok: { 200: { description: 'The secret.', schema: 'SecretWithValueBody' } },
    errors: ['invalid_path', 'insufficient_scope', 'not_found'],
    handle: async ({ broker, principal, param }) =>
      json(200, await broker.secrets.get(principal, resourcePathFromUrl(param))),
  },
  {
    method: 'PUT',
    path: '/api/vault/secrets/{path}',
    id: 'putSecret',
    summary: 'Write a secret (encrypted at rest).',
    see: '§7',
    param: resourcePath('path'),
    body: 'PutSecretBody',
    ok: {
      200: { description: 'Replaced.', schema: 'SecretViewBody' },
      201: { description: 'Created.', schema: 'SecretViewBody' },
    },
    errors: [...BODY_ERRORS, 'invalid_path', 'insufficient_scope'],
    handle: async ({ broker, principal, param, body }) => {
      const input = (await body()) as PutSecretInput;
      const { secret, created } = await broker.secrets.put(
        principal,
        resourcePathFromUrl(param),
        input,
      );
      return json(created ? 201 : 200, secret);
    },
  },
  {
    method: 'DELETE',
    path: '/api/vault/secrets/{path}',
    id: 'deleteSecret',
    summary: 'Delete a secret.',
    see: '§7',
    param: resourcePath('path'),
    ok: { 204: { description: 'Deleted.', schema: null } },
    errors: ['invalid_path', 'insufficient_scope', 'not_found'],
    handle: async ({ broker, principal, param }) => {
      await broker.secrets.delete(principal, resourcePathFromUrl(param));
      return noContent();
    },
  },
  {
    method: 'GET',
    path: '/api/openapi.json',
    id: 'openapi',
    summary: 'This document.',
    see: '§10',
    public: true,
    ok: {
      200: {
        description: 'The OpenAPI 3.1 document.',
        schema: {
          type: 'object',
          properties: { openapi: { type: 'string', const: '3.1.1' } },
          required: ['openapi'],
          additionalProperties: {},
        },
      },
    },
    errors: [],
    handle: async ({ document }) => ({
      status: 200,
      headers: PUBLIC_JSON_HEADERS,
      body: document(),
    }),
  },
];
