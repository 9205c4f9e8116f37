import { z } from 'zod';
import {
  AuthorizeAnswerBody,
  AuthorizeResultBody,
  ClientMetadataBody,
  ConnectionViewBody,
  ConnectPageViewBody,
  ConnectSessionListBody,
  ConnectSessionViewBody,
  ConnectStartedBody,
  CreatedConnectSessionBody,
  CredentialsBody,
  DeliveryViewBody,
  DiscoveryReportBody,
  DiscoveryTraceBody,
  ErrorBody,
  EventBody,
  GrantViewBody,
  IssuedTokenBody,
  PageOf,
  ProbeResultBody,
  ProfileViewBody,
  ProviderViewBody,
  SecretViewBody,
  SecretWithValueBody,
  TokenViewBody,
} from './response-schemas.js';
import {
  AuditListQuery,
  AuthorizeBody,
  ConnectionListQuery,
  ConnectSessionBody,
  ConnectSessionListQuery,
  ConnectStartBody,
  CredentialsQuery,
  DeliveryListQuery,
  DiscoverBody,
  GrantListQuery,
  MintTokenBody,
  NarrowTokenBody,
  ProviderBody,
  ProviderListQuery,
  PutSecretBody,
  SecretListQuery,
  TokenListQuery,
  UpdateConnectionBody,
  VerifyBody,
} from './schemas.js';

/*
 * The shapes of the HTTP contract by name, as JSON Schema: what a handler, a document
 * generator or a client needs of core's request and response schemas, without zod's types.
 * The schemas themselves stay private to core, which parses every input with them.
 */

const SHAPES = {
  TokenListQuery,
  ProviderListQuery,
  SecretListQuery,
  ConnectionListQuery,
  AuditListQuery,
  DeliveryListQuery,
  CredentialsQuery,
  GrantListQuery,
  ConnectSessionListQuery,
  MintTokenBody,
  NarrowTokenBody,
  UpdateConnectionBody,
  ProviderBody,
  DiscoverBody,
  AuthorizeBody,
  VerifyBody,
  ConnectSessionBody,
  ConnectStartBody,
  PutSecretBody,
  ErrorBody,
  IssuedTokenBody,
  TokenViewBody,
  TokenPage: PageOf(TokenViewBody),
  ProviderViewBody,
  ProviderPage: PageOf(ProviderViewBody),
  ProfilePage: PageOf(ProfileViewBody),
  DiscoveryTraceBody,
  DiscoveryReportBody,
  ConnectionViewBody,
  ConnectionPage: PageOf(ConnectionViewBody),
  AuthorizeResultBody,
  AuthorizeAnswerBody,
  CredentialsBody,
  ProbeResultBody,
  ClientMetadataBody,
  SecretViewBody,
  SecretWithValueBody,
  SecretPage: PageOf(SecretViewBody),
  EventBody,
  EventPage: PageOf(EventBody),
  DeliveryViewBody,
  DeliveryPage: PageOf(DeliveryViewBody),
  GrantViewBody,
  GrantPage: PageOf(GrantViewBody),
  CreatedConnectSessionBody,
  ConnectSessionViewBody,
  ConnectSessionListBody,
  ConnectPageViewBody,
  ConnectStartedBody,
};

/**
 * The name of a request or answer shape of the HTTP contract: a query string
 * (`…Query`), a request body (`…Body` of a request), an answer body, or a page of a list
 * (`…Page`).
 *
 * @see [docs/api.md](https://github.com/keyway-dev/keyway/blob/main/docs/api.md)
 */
export type ContractShape = keyof typeof SHAPES;

/**
 * The name of a query-string shape: `TokenListQuery`, `ConnectionListQuery`, ….
 *
 * @see [docs/api.md](https://github.com/keyway-dev/keyway/blob/main/docs/api.md)
 */
export type QueryShape = Extract<ContractShape, `${string}Query`>;

/**
 * A JSON Schema (draft 2020-12, the dialect of OpenAPI 3.1).
 *
 * @see [JSON Schema 2020-12](https://json-schema.org/draft/2020-12/json-schema-core)
 */
export type JsonSchema = { [keyword: string]: unknown };

/**
 * The type of one query parameter, from which a handler reads its text: digits as an
 * integer, `true`/`false` as a boolean, anything else as it is (core refuses what does not
 * fit, with its own message).
 *
 * @see [docs/api.md](https://github.com/keyway-dev/keyway/blob/main/docs/api.md)
 */
export type QueryParameterKind = 'string' | 'integer' | 'boolean';

const cache = new Map<string, JsonSchema>();

function schemaOf(shape: ContractShape, io: 'input' | 'output'): JsonSchema {
  const key = `${io} ${shape}`;
  let schema = cache.get(key);
  if (schema === undefined) {
    if (!Object.hasOwn(SHAPES, shape)) throw new TypeError(`unknown contract shape "${shape}"`);
    const { $schema: _, ...rest } = z.toJSONSchema(SHAPES[shape], { io, unrepresentable: 'any' });
    schema = rest;
    cache.set(key, schema);
  }
  return schema;
}

/**
 * The JSON Schema of a shape of the HTTP contract: `input` as a request may be written
 * (optional fields, defaults not yet applied), `output` as an answer is (the default).
 * A fresh copy each call, which the caller may change.
 *
 * @example
 * contractSchema('ConnectionViewBody'); // { type: 'object', properties: { id: … }, … }
 * @see [docs/openapi.json](https://github.com/keyway-dev/keyway/blob/main/docs/openapi.json), written from these
 */
export function contractSchema(
  shape: ContractShape,
  io: 'input' | 'output' = 'output',
): JsonSchema {
  return structuredClone(schemaOf(shape, io));
}

const parameterCache = new Map<QueryShape, Readonly<Record<string, QueryParameterKind>>>();

/**
 * The parameters of a query-string shape and the type each is read as: only these may
 * appear in the query, each at most once. Frozen, and the same object for a shape each
 * call (a handler reads it on every request).
 *
 * @example
 * queryParameters('CredentialsQuery'); // { force_refresh: 'boolean' }
 * @see [docs/api.md](https://github.com/keyway-dev/keyway/blob/main/docs/api.md), "Lists"
 */
export function queryParameters(shape: QueryShape): Readonly<Record<string, QueryParameterKind>> {
  let kinds = parameterCache.get(shape);
  if (kinds === undefined) {
    const { properties = {} } = schemaOf(shape, 'input') as {
      properties?: Record<string, { type?: unknown }>;
    };
    const read: Record<string, QueryParameterKind> = {};
    for (const [name, property] of Object.entries(properties)) {
      read[name] =
        property.type === 'integer' || property.type === 'boolean' ? property.type : 'string';
    }
    kinds = Object.freeze(read);
    parameterCache.set(shape, kinds);
  }
  return kinds;
}
