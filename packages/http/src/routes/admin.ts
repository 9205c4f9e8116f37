import {
  type DiscoverInput,
  type KeywayErrorCode,
  type MintTokenInput,
  type NarrowTokenInput,
  type ProviderInput,
  resourcePathFromUrl,
} from '@keyway/core';
import { json, noContent } from '../responses.js';
import { BODY_ERRORS, decodedParam, type Route, resourcePath } from './route.js';

/* The administration routes (docs/api.md §3, §4, §6, §11): tokens, providers, events. */

const tokenName = {
  name: 'name',
  description: 'A token name (docs/api.md §3.2): one path segment.',
};
const PROVIDER_ERRORS: KeywayErrorCode[] = ['provider_management_disabled'];

export const TOKEN_ROUTES: Route[] = [
  {
    method: 'GET',
    path: '/api/admin/tokens',
    id: 'listTokens',
    summary: 'List live broker tokens: all for the root key, its own tree for a token.',
    see: '§3.3',
    query: 'TokenListQuery',
    ok: {
      200: { description: 'A page of tokens.', schema: 'TokenPage' },
    },
    errors: ['invalid_request'],
    handle: async ({ broker, principal, query }) =>
      json(200, await broker.tokens.list(principal, query())),
  },
  {
    method: 'POST',
    path: '/api/admin/tokens',
    id: 'mintToken',
    summary: 'Mint a broker token; the root key any, a token only narrower descendants.',
    see: '§3.2, §3.3',
    body: 'MintTokenBody',
    ok: { 201: { description: 'The token, shown this once.', schema: 'IssuedTokenBody' } },
    errors: [
      ...BODY_ERRORS,
      'invalid_name',
      'invalid_scope',
      'invalid_lifetime',
      'delegation_denied',
      'insufficient_scope',
      'conflict',
    ],
    handle: async ({ broker, principal, body }) =>
      json(201, await broker.tokens.mint(principal, (await body()) as MintTokenInput)),
  },
  {
    method: 'GET',
    path: '/api/admin/tokens/{name}',
    id: 'getToken',
    summary: 'Read a live token (never the token itself).',
    see: '§3.3',
    param: tokenName,
    ok: { 200: { description: 'The token.', schema: 'TokenViewBody' } },
    errors: ['invalid_name', 'delegation_denied', 'not_found'],
    handle: async ({ broker, principal, param }) =>
      json(200, await broker.tokens.get(principal, decodedParam(param))),
  },
  {
    method: 'PATCH',
    path: '/api/admin/tokens/{name}',
    id: 'narrowToken',
    summary: 'Narrow a token and, in the same transaction, every descendant.',
    see: '§3.3',
    param: tokenName,
    body: 'NarrowTokenBody',
    ok: { 200: { description: 'The token as narrowed.', schema: 'TokenViewBody' } },
    errors: [
      ...BODY_ERRORS,
      'invalid_name',
      'invalid_scope',
      'invalid_lifetime',
      'delegation_denied',
      'not_found',
    ],
    handle: async ({ broker, principal, param, body }) => {
      const name = decodedParam(param);
      const input = (await body()) as NarrowTokenInput;
      return json(200, await broker.tokens.narrow(principal, name, input));
    },
  },
  {
    method: 'DELETE',
    path: '/api/admin/tokens/{name}',
    id: 'deleteToken',
    summary: 'Delete a token and every descendant.',
    see: '§3.3',
    param: tokenName,
    ok: { 204: { description: 'Deleted.', schema: null } },
    errors: ['invalid_name', 'delegation_denied', 'not_found'],
    handle: async ({ broker, principal, param }) => {
      await broker.tokens.delete(principal, decodedParam(param));
      return noContent();
    },
  },
];

export const PROVIDER_ROUTES: Route[] = [
  {
    method: 'GET',
    path: '/api/admin/profiles',
    id: 'listProfiles',
    summary: "List the profiles of the oauth2 template: the built-in catalog and the app's own.",
    see: '§15',
    ok: { 200: { description: 'Every profile, by id, in one page.', schema: 'ProfilePage' } },
    errors: [],
    handle: async ({ broker, principal }) => json(200, broker.providers.profiles(principal)),
  },
  {
    method: 'GET',
    path: '/api/admin/providers',
    id: 'listProviders',
    summary: 'List the providers the credential covers.',
    see: '§4',
    query: 'ProviderListQuery',
    ok: {
      200: {
        description: 'A page of providers.',
        schema: 'ProviderPage',
      },
    },
    errors: [...PROVIDER_ERRORS, 'invalid_request', 'invalid_path'],
    handle: async ({ broker, principal, query }) =>
      json(200, await broker.providers.list(principal, query())),
  },
  {
    method: 'GET',
    path: '/api/admin/providers/{id}',
    id: 'getProvider',
    summary: 'Read a provider (never a secret).',
    see: '§4',
    param: resourcePath('id'),
    ok: { 200: { description: 'The provider.', schema: 'ProviderViewBody' } },
    errors: [...PROVIDER_ERRORS, 'invalid_path', 'insufficient_scope', 'not_found'],
    handle: async ({ broker, principal, param }) =>
      json(200, await broker.providers.get(principal, resourcePathFromUrl(param))),
  },
  {
    method: 'PUT',
    path: '/api/admin/providers/{id}',
    id: 'putProvider',
    summary: 'Create or replace a provider: discovery and registration first, then storage.',
    see: '§4, §6',
    param: resourcePath('id'),
    body: 'ProviderBody',
    ok: {
      200: { description: 'Replaced.', schema: 'ProviderViewBody' },
      201: { description: 'Created.', schema: 'ProviderViewBody' },
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
    handle: async ({ broker, principal, param, body }) => {
      const input = (await body()) as ProviderInput;
      const { provider, created } = await broker.providers.put(
        principal,
        resourcePathFromUrl(param),
        input,
      );
      return json(created ? 201 : 200, provider);
    },
  },
  {
    method: 'POST',
    path: '/api/admin/providers/{id}/register',
    id: 'registerProvider',
    summary:
      'Register a new client at the provider’s authorization server (the server forgot the old one); its connections ' +
      'need a new consent.',
    see: '§6 item 11',
    param: resourcePath('id'),
    ok: { 200: { description: 'The provider.', schema: 'ProviderViewBody' } },
    errors: [
      ...PROVIDER_ERRORS,
      'invalid_path',
      'insufficient_scope',
      'not_found',
      'conflict',
      'registration_unsupported',
      'registration_failed',
    ],
    handle: async ({ broker, principal, param }) =>
      json(200, await broker.providers.register(principal, resourcePathFromUrl(param))),
  },
  {
    method: 'DELETE',
    path: '/api/admin/providers/{id}',
    id: 'deleteProvider',
    summary: 'Delete a provider and its secrets, once no connection uses it.',
    see: '§4',
    param: resourcePath('id'),
    ok: { 204: { description: 'Deleted.', schema: null } },
    errors: [...PROVIDER_ERRORS, 'invalid_path', 'insufficient_scope', 'not_found', 'conflict'],
    handle: async ({ broker, principal, param }) => {
      await broker.providers.delete(principal, resourcePathFromUrl(param));
      return noContent();
    },
  },
  {
    method: 'POST',
    path: '/api/admin/discover',
    id: 'discover',
    summary: 'Run discovery for a resource URL and answer the trace, storing nothing.',
    see: '§6, §8',
    body: 'DiscoverBody',
    ok: {
      200: {
        description: 'The discovery trace, and what will work in plain words.',
        schema: 'DiscoveryReportBody',
      },
    },
    errors: [...PROVIDER_ERRORS, ...BODY_ERRORS],
    handle: async ({ broker, principal, body }) =>
      json(200, await broker.providers.discover(principal, (await body()) as DiscoverInput)),
  },
];

export const EVENT_ROUTES: Route[] = [
  {
    method: 'GET',
    path: '/api/admin/audit',
    id: 'listAuditEvents',
    summary:
      'The audit log, newest first: events of resources the credential covers, and of its descendant tokens.',
    see: '§11',
    query: 'AuditListQuery',
    ok: { 200: { description: 'A page of events.', schema: 'EventPage' } },
    errors: ['invalid_request', 'invalid_path'],
    handle: async ({ broker, principal, query }) =>
      json(200, await broker.events.list(principal, query())),
  },
  {
    method: 'GET',
    path: '/api/admin/webhooks/deliveries',
    id: 'listWebhookDeliveries',
    summary: 'Webhook deliveries by status (failed ones to replay by hand); the root key only.',
    see: '§11',
    query: 'DeliveryListQuery',
    ok: {
      200: {
        description: 'A page of deliveries.',
        schema: 'DeliveryPage',
      },
    },
    errors: ['invalid_request', 'insufficient_scope'],
    handle: async ({ broker, principal, query }) =>
      json(200, await broker.events.deliveries(principal, query())),
  },
];
