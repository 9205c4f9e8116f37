import { z } from 'zod';
import { KeywayError } from '../contract/errors.js';
import {
  AuthorizationServerInfoSchema,
  ResourceInfoSchema,
  TokenAnswerSchema,
} from '../contract/metadata.js';
import { ToolPolicyBody } from '../contract/response-schemas.js';
import { ConnectionValueSchema, TokenResponseSchema } from './quirks.js';
import type { ConnectionRecord } from './record-types.js';

export {
  AuthorizationServerInfoSchema,
  ResourceInfoSchema,
  TokenAnswerSchema,
} from '../contract/metadata.js';

/**
 * The schemas of every JSON state Keyway keeps in storage, parsed on every read: a row
 * another version wrote, or someone edited by hand, is an `internal_error` (reported through
 * the handler's `onInternalError`), never a crash and never a value of the wrong type
 * flowing on. The TypeScript types of these states are inferred from here.
 */

/**
 * The grants with no consent page (docs/api.md §14), as providers, connections and their
 * tokens record them; absent: the authorization code grant.
 */
const GrantSchema = z.enum(['client_credentials', 'jwt_bearer', 'enterprise']);

const AuthMethodSchema = z.enum([
  'client_secret_basic',
  'client_secret_post',
  'private_key_jwt',
  'none',
]);

/** A client at one authorization server (its secrets are vault entries). */
export const StoredRegistrationSchema = z.object({
  issuer: z.string(),
  client_id: z.string(),
  /** How Keyway came to hold the client (docs/api.md §4 `registration`). */
  registration: z.enum(['dynamic', 'metadata_document', 'manual']),
  token_endpoint_auth_method: AuthMethodSchema,
  /** Epoch ms; `null` when the secret does not expire (or there is none). */
  client_secret_expires_at: z.number().nullable(),
  registration_client_uri: z.string().nullable(),
  /** Whether the vault holds the client's secret (its private key, for `private_key_jwt`). */
  client_secret_set: z.boolean(),
  /** `private_key_jwt`: the algorithm of the client's assertions. */
  signing_algorithm: z.string().optional(),
  /**
   * The callback the client redirects to: the shared one, or the server's own (docs/api.md §5
   * "Mix-up defense"). Absent in registrations made before it was kept: the shared one.
   */
  callback: z.enum(['shared', 'per_server']).optional(),
  /**
   * The server answered `invalid_client` for this dynamically registered client: it forgot
   * it. The next authorization registers a new client first (docs/api.md §6 item 11).
   */
  stale: z.boolean().optional(),
  /** Dynamic registration: the server's answer with its secrets masked (for debugging). */
  response: z.record(z.string(), z.unknown()).optional(),
  /**
   * `oauth2`: the endpoints the client's secret was given for, the only ones it is sent to
   * (a change of one needs the secret again). Absent in registrations written before it was
   * kept: the provider's endpoints then.
   */
  secret_endpoints: z
    .object({
      token_endpoint: z.string(),
      revocation_endpoint: z.string().nullable(),
      refresh_endpoint: z.string().nullable(),
    })
    .optional(),
});

const stringRecord = z.record(z.string(), z.string());

/**
 * What an `oauth2` provider keeps of its profile (docs/api.md §15), placeholders filled: how
 * its requests are written and its answers read. The endpoints are in the provider's
 * `authorization_server`, as discovered ones are for `mcp` providers.
 */
export const OAuth2QuirksSchema = z.object({
  /** The catalog profile, or `null` for endpoints named by the operator. */
  profile: z.string().nullable(),
  /** The values of the profile's placeholders, defaults included. */
  params: stringRecord,
  scopes_always: z.array(z.string()),
  scope_separator: z.enum([' ', ',']),
  scope_param: z.enum(['scope', 'user_scope']),
  pkce: z.enum(['S256', 'none']),
  token_request_format: z.enum(['form', 'json']),
  token_request_headers: stringRecord,
  /** The profile's own extra parameters; the operator's are in `configuration`. */
  authorization_params: stringRecord,
  token_params: stringRecord,
  token_response: TokenResponseSchema,
  redirect_params: z.array(z.string()),
  refresh_endpoint: z.string().nullable(),
  /** With `{placeholders}` of `connection_values`, filled per connection by the proxy. */
  api_base_url: z.string().nullable(),
  api_headers: stringRecord,
  connection_values: z.array(ConnectionValueSchema).default([]),
  /** The request after connect, its URL filled and checked. */
  after_connect: z
    .object({ url: z.string(), metadata: z.record(z.string(), z.string()) })
    .nullable()
    .default(null),
});

/** What `state` of a provider record holds (secrets live in the vault). */
export const ProviderStateSchema = z.object({
  label: z.string(),
  /** Absent: `mcp` (records written before there was another template). */
  template: z.literal('oauth2').optional(),
  /** `oauth2` only: its profile, resolved. */
  oauth2: OAuth2QuirksSchema.optional(),
  /** `false`: inject-only (docs/api.md §13). Absent: tokens may be handed out. */
  hand_out: z.boolean().optional(),
  /** `true`: DPoP-bound tokens whatever the server advertises (docs/api.md §14). */
  dpop: z.boolean().optional(),
  configuration: z.object({
    /** The MCP endpoint; absent for `oauth2` providers. */
    resource_url: z.string().optional(),
    scopes: z.array(z.string()),
    /** Added to the authorization URL (docs/api.md §4); never a parameter Keyway sends itself. */
    authorization_params: z.record(z.string(), z.string()).optional(),
    /** Added to every token request (code exchange and refresh). */
    token_params: z.record(z.string(), z.string()).optional(),
    /**
     * `assume_s256`: the operator says the server does PKCE S256 without advertising it
     * (docs/api.md §6 item 4). Absent: S256 must be advertised.
     */
    pkce: z.literal('assume_s256').optional(),
  }),
  mode: z.enum(['register', 'custom']),
  /**
   * `client_credentials`, `jwt_bearer` (docs/api.md §14): the operator's client (`mode`
   * `custom`) gets its tokens itself, with no user and no consent. Absent: the
   * authorization code grant.
   */
  grant: GrantSchema.optional(),
  /** `jwt_bearer`: where its assertions are read (a configured source, a file of it). */
  assertion: z
    .object({
      source: z.string(),
      file: z.string().optional(),
      /** Written with the root key (or declared in code): any configured source serves it. */
      root: z.boolean().optional(),
    })
    .optional(),
  /** `mcp`: the catalog profile it was written from (docs/servers.md). */
  profile: z.string().optional(),
  /**
   * Mode `register`: the client metadata the operator set for dynamic registration
   * (RFC 7591 §2), sent in place of Keyway's defaults; a change registers a new client.
   */
  client_metadata: z.record(z.string(), z.union([z.string(), z.array(z.string())])).optional(),
  /** `enterprise`: the identity provider (its client secret is a vault entry). */
  identity_provider: z
    .object({
      issuer: z.string(),
      token_endpoint: z.string(),
      client_id: z.string(),
      client_secret_set: z.boolean(),
    })
    .optional(),
  /** The protected resource of an `mcp` provider; `null` for `oauth2` (no RFC 8707 `resource`). */
  resource: ResourceInfoSchema.nullable(),
  authorization_server: AuthorizationServerInfoSchema,
  challenge_scope: z.string().nullable(),
  /** Registrations by issuer: a resource that moves to another server registers again there. */
  registrations: z.record(z.string(), StoredRegistrationSchema),
  /** A server of the 2025-03-26 revision, without protected-resource metadata. */
  legacy: z.boolean().optional(),
  /** Declared in code (`createBroker({ providers })`) rather than through the API. */
  declared: z.boolean(),
  /** The last move to another server or client; times in epoch ms. Absent: never moved. */
  last_party_change: z
    .object({
      at: z.number(),
      previous_issuer: z.string(),
      previous_client_id: z.string(),
      /** Absent in changes recorded before the resource was part of the party. */
      previous_resource_url: z.string().optional(),
      connections_reauthorization_required: z.number().int().nonnegative(),
    })
    .nullable()
    .optional(),
});

/** The one field of a provider's state a hand-out reads (`hand_out`), validated alone. */
export const HandOutSchema = ProviderStateSchema.pick({ hand_out: true });

/**
 * The OAuth party of one authorization: the authorization server and the client a
 * connection's tokens were obtained from. Sealed with the tokens: refresh and revocation
 * talk to it only (docs/api.md §5 "Connections keep their party").
 */
export const OAuthPartySchema = z.object({
  issuer: z.string(),
  token_endpoint: z.string(),
  revocation_endpoint: z.string().nullable(),
  client_id: z.string(),
  token_endpoint_auth_method: AuthMethodSchema,
  /**
   * The RFC 8707 `resource` of the authorization, repeated on every refresh; `null` for an
   * `oauth2` provider, which sends none.
   */
  resource: z.string().nullable(),
  /**
   * The MCP endpoint the connection was authorized for (the provider's `resource_url` at
   * authorize time): the probe and the gateway send the token there only (docs/api.md §8, §13).
   * Absent in parties written before it was kept.
   */
  resource_url: z.string().optional(),
  /**
   * `oauth2`: the API the token is for (the profile's `api_base_url`, filled): the proxy
   * sends it there only (docs/api.md §13); `null` when the provider has none.
   */
  api_base_url: z.string().nullable().optional(),
  /** `oauth2`: where the refresh grant goes when not to the token endpoint (Figma). */
  refresh_endpoint: z.string().nullable().optional(),
  /** RFC 9207: the server promised `iss` in its authorization responses. */
  iss_parameter_supported: z.boolean(),
  /**
   * The provider was inject-only (`hand_out: false`) when the connection was authorized: its
   * tokens never leave the broker until it is authorized again, whatever the provider says
   * later. Absent: as the provider says.
   */
  inject_only: z.literal(true).optional(),
});

const FailureSchema = z.object({ code: z.string(), description: z.string() });

/** What `state` of a connection record holds. */
export const ConnectionStateSchema = z.object({
  scopes: z.array(z.string()),
  token_expires_at: z.number().nullable(),
  authorized_at: z.number().nullable(),
  last_refreshed_at: z.number().nullable(),
  error: FailureSchema.nullable(),
  /**
   * Grows by one with each completed authorization. A refresh writes its tokens only while
   * the generation it refreshed is still the current one, so a slow refresh never
   * overwrites the tokens of a newer authorization. Records written before generations
   * existed are generation 0.
   */
  generation: z.number().int().nonnegative().default(0),
  /**
   * Whether the connection holds a refresh token (docs/api.md §5 `refreshable`). Absent in
   * connections written before it was kept, and in pending ones.
   */
  refreshable: z.boolean().optional(),
  /**
   * Random, set when the connection is created: a connection deleted and created again
   * under the same id is another one, and gets nothing of the first one's pending
   * authorizations. Absent in connections created before it was kept.
   */
  incarnation: z.string().optional(),
  /**
   * `oauth2`: values the profile keeps from the token response and the redirect back
   * (Salesforce's `instance_url`, QuickBooks' `realmId`). Absent: none.
   */
  metadata: z.record(z.string(), z.string()).optional(),
  /** How its tokens came (docs/api.md §14). Absent: a user's consent (authorization code). */
  grant: GrantSchema.optional(),
  /** The last token response, without its tokens. Absent: none since it was kept. */
  token_response: TokenAnswerSchema.optional(),
  /**
   * The account the authorization's ID token named (`email`, `preferred_username` or
   * `name`), a label for people (docs/api.md §19). Absent: the server said none.
   */
  account: z.string().optional(),
  /**
   * The name the portal gives the connection's tools (docs/api.md §18); absent: its last
   * path segment.
   */
  alias: z.string().optional(),
  /** The portal's tool policy of the connection (docs/api.md §18); absent: every tool. */
  tools: ToolPolicyBody.optional(),
  /** A refresh answered a new refresh token: its server rotates them. Absent: none seen yet. */
  rotating: z.boolean().optional(),
  /**
   * When the current refresh token expires, epoch ms, where the server said
   * (`refresh_token_expires_in`). Absent: it did not.
   */
  refresh_token_expires_at: z.number().optional(),
  /**
   * The refresh-token expiry a `connection.expiring` event was sent for, so each is told
   * once. Absent: none sent.
   */
  expiring_noticed: z.number().optional(),
  /**
   * The last refresh that failed without ending the connection (the server's error, no
   * answer): the refresh token it concerns (a hash, never the token), what failed, and when
   * one more attempt may be made. Until then no instance presents that token again; every
   * caller reads this verdict instead. Absent: the last refresh did not fail so.
   */
  refresh_failure: z
    .object({
      token: z.string(),
      code: z.string(),
      description: z.string(),
      at: z.number(),
      retry_at: z.number(),
      attempts: z.number().int().positive(),
    })
    .optional(),
});

/** The one field of a connection's state a hand-out may read (`scopes`), validated alone. */
export const GrantedScopesSchema = ConnectionStateSchema.pick({ scopes: true });

/** A JSON Web Key, as WebCrypto exports it (RFC 7517). */
const jwk = z.custom<JsonWebKey>(
  (value) =>
    typeof value === 'object' && value !== null && typeof (value as JsonWebKey).kty === 'string',
);

/** What a connection's vault entry holds (sealed), as written before parties were kept too. */
export const SealedTokensSchema = z.object({
  access_token: z.string(),
  token_type: z.string(),
  refresh_token: z.string().nullable(),
  expires_at: z.number().nullable(),
  scope: z.array(z.string()),
  /** The connection state's `generation` of the authorization these tokens belong to. */
  generation: z.number().int().nonnegative().default(0),
  /**
   * When the access token was received (epoch ms): its lifetime scales the refresh margin.
   * Absent in tokens written before it was kept.
   */
  issued_at: z.number().optional(),
  /** The server and client they came from: refresh and revocation go there only. */
  party: OAuthPartySchema.optional(),
  /** `oauth2`: what the profile keeps from the answers (the connection state's `metadata`). */
  metadata: z.record(z.string(), z.string()).optional(),
  /** DPoP (RFC 9449): the connection's key pair; its tokens are bound to it. */
  dpop: z.object({ private_jwk: jwk, public_jwk: jwk }).optional(),
  /** How they came (docs/api.md §14); `client_credentials` and `jwt_bearer` renew themselves. */
  grant: GrantSchema.optional(),
  // Written before the party was kept: only the issuer and client id.
  issuer: z.string().optional(),
  client_id: z.string().optional(),
});

/** Sealed tokens with their party, as every write since parties were kept has them. */
export const ConnectionTokensSchema = SealedTokensSchema.omit({
  issuer: true,
  client_id: true,
}).required({ party: true });

/** What a pending authorization holds between the authorize call and the callback. */
export const PendingStateSchema = z.object({
  kind: z.literal('authorization').optional(),
  /** The PKCE verifier, sealed. */
  verifier: z.string(),
  /** `none`: an `oauth2` server that cannot do PKCE; the verifier is not sent. */
  pkce: z.literal('none').optional(),
  /** The redirect_uri of the authorization request: the code exchange must repeat it. */
  redirect_uri: z.string(),
  /**
   * The key of the server's own callback the response must come back to, or `null` for the
   * shared one (docs/api.md §5 "Mix-up defense"). Absent in states written before: shared.
   */
  callback_key: z.string().nullable().optional(),
  redirect_to: z.string().nullable(),
  scopes: z.array(z.string()),
  party: OAuthPartySchema,
  verify_user: z.boolean().default(false),
  /** The provider's `token_params` when the authorization started: sent with the code. */
  token_params: z.record(z.string(), z.string()).optional(),
  /**
   * The stored record key of the broker token that started the authorization (`null`: the
   * root key). The callback completes only while that token is live and still covers the
   * connection and the provider: revoking it ends its pending authorizations.
   */
  started_by: z.string().nullable().optional(),
  /**
   * The incarnation of the connection the authorization is for: a connection deleted (and
   * perhaps created again) meanwhile is not given this authorization's tokens.
   */
  connection: z.string().optional(),
  /** `connect`: a connect page started it (docs/api.md §19); its callback page tells it. */
  page: z.literal('connect').optional(),
});

/** What a user-verification flow holds until the app confirms it. */
export const VerificationStateSchema = z.object({
  kind: z.literal('verification'),
  /** The tokens of the completed consent, sealed. */
  tokens: z.string(),
  scopes: z.array(z.string()),
});

/** A pending authorization's state: an authorization in flight, or a flow to verify. */
export const PendingRecordStateSchema = z.union([VerificationStateSchema, PendingStateSchema]);

export type ResourceInfo = z.infer<typeof ResourceInfoSchema>;
export type AuthorizationServerInfo = z.infer<typeof AuthorizationServerInfoSchema>;
export type StoredRegistration = z.infer<typeof StoredRegistrationSchema>;
export type ProviderState = z.infer<typeof ProviderStateSchema>;
export type OAuthParty = z.infer<typeof OAuthPartySchema>;
export type OAuth2Quirks = z.infer<typeof OAuth2QuirksSchema>;
export type ConnectionState = z.infer<typeof ConnectionStateSchema>;
export type TokenAnswer = z.infer<typeof TokenAnswerSchema>;
/**
 * What a connection's vault entry holds (sealed): its OAuth tokens and the party they came from.
 *
 * @see [docs/api.md §5](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#5-connections) "Connections keep their party"; docs/vault.md
 */
export type ConnectionTokens = z.infer<typeof ConnectionTokensSchema>;
export type PendingState = z.infer<typeof PendingStateSchema>;

/**
 * Reads a stored value through its schema.
 *
 * @throws {KeywayError} `internal_error` naming what failed and where (never the value); the
 *   zod error is the cause, for the operator's log.
 */
export function readStored<S extends z.ZodType>(
  schema: S,
  value: unknown,
  what: string,
): z.infer<S> {
  const result = schema.safeParse(value);
  if (!result.success) {
    const where = result.error.issues[0]?.path.join('.') ?? '';
    throw new KeywayError(
      'internal_error',
      `stored ${what} is not valid${where ? ` (at ${where})` : ''}`,
      {
        cause: result.error,
      },
    );
  }
  return result.data;
}

/** Parses a sealed JSON value opened from the vault through its schema. */
export function readSealed<S extends z.ZodType>(schema: S, text: string, what: string): z.infer<S> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new KeywayError('internal_error', `stored ${what} is not JSON`);
  }
  return readStored(schema, value, what);
}

/**
 * Whether a connection's tokens can be renewed without the user: a refresh token, or the
 * client's own credentials (docs/api.md §14).
 */
export function renewable(tokens: ConnectionTokens): boolean {
  return tokens.refresh_token !== null || ownGrant(tokens.grant);
}

/** Whether a grant renews itself, with no user (docs/api.md §14): not `enterprise`. */
export function ownGrant(grant: string | undefined): grant is 'client_credentials' | 'jwt_bearer' {
  return grant === 'client_credentials' || grant === 'jwt_bearer';
}

/** The state of a connection record, checked. @throws {KeywayError} `internal_error`. */
export function connectionState(record: ConnectionRecord): ConnectionState {
  return readStored(ConnectionStateSchema, record.state, `state of connection ${record.id}`);
}
