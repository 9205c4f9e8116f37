import { z } from 'zod';
import { CONNECTION_STATUSES, DELIVERY_STATUSES, EVENT_TYPES, MAX_SCOPES } from './codes.js';
import { LIST_LIMIT } from './pagination.js';

/**
 * The request schemas of the HTTP contract, one per body and query string, by concept: the
 * single source for validating what callers send (core operations parse their `unknown`
 * input with these) and for documenting it. Query strings arrive here already typed: the
 * HTTP layer turns `"10"` into `10` and `"true"` into `true`; core never parses a string
 * as a number.
 *
 * Body shapes come first, the specific checks (paths, scopes, names, lifetimes) after, so
 * that a type error always wins (docs/api.md §1.2 precedence).
 */

// ─── lists (docs/api.md §1.4) ─────────────────────────────────────────────────────────────────

const LIMIT = `"limit" must be an integer from 1 to ${LIST_LIMIT.max}`;

const listFields = {
  /** 1–500, default 100. */
  limit: z
    .number({ error: LIMIT })
    .int({ error: LIMIT })
    .min(1, { error: LIMIT })
    .max(LIST_LIMIT.max, { error: LIMIT })
    .optional(),
  /** The `next_cursor` of the previous page. */
  cursor: z.string().optional(),
};

/** `GET /api/admin/tokens` (docs/api.md §3.3). */
export const TokenListQuery = z.strictObject(listFields);

/** `GET /api/admin/grants` (docs/api.md §17). */
export const GrantListQuery = z.strictObject(listFields);

/** `prefix`: only records at or below this resource path. */
const prefix = z.string().optional();

/** `GET /api/admin/providers` (docs/api.md §4). */
export const ProviderListQuery = z.strictObject({ prefix, ...listFields });

/** `GET /api/vault/secrets` (docs/api.md §7). */
export const SecretListQuery = z.strictObject({ prefix, ...listFields });

const STATUS = '"status" must be pending, active or error';

/** `GET /api/oauth/connections` (docs/api.md §5). */
export const ConnectionListQuery = z.strictObject({
  prefix,
  provider_id: z.string().optional(),
  status: z.enum(CONNECTION_STATUSES, { error: STATUS }).optional(),
  ...listFields,
});

const TYPE = '"type" must be an event type of docs/api.md §11, like connection.authorized';
const SINCE = '"since" must be an RFC 3339 time, like 2026-11-23T10:00:00Z';

/** `GET /api/admin/audit` (docs/api.md §11). */
export const AuditListQuery = z.strictObject({
  prefix,
  type: z.enum(EVENT_TYPES, { error: TYPE }).optional(),
  since: z.iso.datetime({ offset: true, error: SINCE }).optional(),
  ...listFields,
});

const DELIVERY_STATUS = '"status" must be pending, delivered or failed';

/** `GET /api/admin/webhooks/deliveries` (docs/api.md §11). */
export const DeliveryListQuery = z.strictObject({
  status: z.enum(DELIVERY_STATUSES, { error: DELIVERY_STATUS }).optional(),
  ...listFields,
});

const FORCE_REFRESH = '"force_refresh" must be true or false';

/** `GET /api/oauth/credentials/<path>` (docs/api.md §5). */
export const CredentialsQuery = z.strictObject({
  /** Refresh first, even when the access token is not due. */
  force_refresh: z.boolean({ error: FORCE_REFRESH }).optional(),
});

// ─── tokens (docs/api.md §3) ──────────────────────────────────────────────────────────────────

// `expires_in` is checked by parseLifetime, so that any bad value, whatever its type, is
// `invalid_lifetime` (docs/api.md §1.2).

const TOO_MANY_SCOPES = `"scopes" has more than ${MAX_SCOPES} entries; at most ${MAX_SCOPES} are allowed`;
/** A token's scopes: the bound is checked before the entries, so a huge list costs nothing. */
const tokenScopes = z.array(z.string()).max(MAX_SCOPES, { error: TOO_MANY_SCOPES });

/** Body of `POST /api/admin/tokens` (docs/api.md §3.3). */
/** Most globs one tool list holds (docs/api.md §18). */
export const MAX_TOOL_GLOBS = 50;

/**
 * Globs over the portal's tool names (docs/api.md §18): each 1 to 128 characters of
 * `[A-Za-z0-9_-]` and `*`, at most {@link MAX_TOOL_GLOBS}.
 */
export const ToolGlobs = z
  .array(
    z.string().regex(/^[A-Za-z0-9_*-]{1,128}$/, {
      error: 'a glob of 1 to 128 characters of A-Z, a-z, 0-9, "_", "-" and "*"',
    }),
  )
  // A refinement, not `max`: too many globs is `invalid_request`, not the scopes' code.
  .refine((globs) => globs.length <= MAX_TOOL_GLOBS, { error: `at most ${MAX_TOOL_GLOBS} globs` });

export const MintTokenBody = z.strictObject({
  name: z.string(),
  scopes: tokenScopes,
  /** Seconds, 60–2592000; default 3600. */
  expires_in: z.unknown().optional(),
  /**
   * The portal's tools the token may list and call (docs/api.md §18); a child's must fall
   * within its parent's, and a child minted without them inherits its parent's.
   */
  tools: ToolGlobs.optional(),
});

/** Body of `PATCH /api/admin/tokens/<name>` (docs/api.md §3.3): narrow only. */
export const NarrowTokenBody = z.strictObject({
  scopes: tokenScopes.optional(),
  expires_in: z.unknown().optional(),
});

/** Globs over a server's own tool names (a connection's policy, docs/api.md §18). */
const ServerToolGlobs = z
  .array(
    z.string().regex(/^[\x21-\x7e]{1,128}$/, {
      error: 'a glob of 1 to 128 visible ASCII characters ("*" for any run of characters)',
    }),
  )
  .refine((globs) => globs.length <= MAX_TOOL_GLOBS, { error: `at most ${MAX_TOOL_GLOBS} globs` });

/** A connection's alias in the portal (docs/api.md §18). */
export const CONNECTION_ALIAS =
  /^(?!keyway$)(?!.*__)[A-Za-z0-9](?:[A-Za-z0-9_-]{0,30}[A-Za-z0-9])?$/;

/** Body of `PATCH /api/oauth/connections/<id>` (docs/api.md §18): what the portal uses. */
export const UpdateConnectionBody = z.strictObject({
  /** 1 to 32 characters, no `__`, not `keyway`; `null` clears it. */
  alias: z
    .string()
    .regex(CONNECTION_ALIAS, {
      error:
        'an alias of 1 to 32 characters of A-Z, a-z, 0-9, "_" and "-", starting and ending with a letter or ' +
        'digit, without "__", and not "keyway"',
    })
    .nullable()
    .optional(),
  /** The tool policy; `null` clears it. */
  tools: z
    .strictObject({
      allow: ServerToolGlobs.optional(),
      deny: ServerToolGlobs.optional(),
      read_only: z.boolean().optional(),
    })
    .nullable()
    .optional(),
});

// ─── providers (docs/api.md §4, §6) ───────────────────────────────────────────────────────────

/** Most extra parameters a provider adds to one kind of request. */
const MAX_EXTRA_PARAMS = 20;
const EXTRA_PARAMS =
  `at most ${MAX_EXTRA_PARAMS} parameters, each a name of 1 to 64 characters with a string value ` +
  `of at most 2048`;

/** Extra request parameters (docs/api.md §4): names to string values, bounded. */
const extraParams = z
  .record(z.string().min(1).max(64), z.string().max(2048))
  .refine((params) => Object.keys(params).length <= MAX_EXTRA_PARAMS, { error: EXTRA_PARAMS })
  .optional();

/** The algorithms of a `private_key_jwt` client's assertions (RFC 7523 §2.2). */
export const SIGNING_ALGORITHMS = ['ES256', 'ES384', 'ES512', 'RS256', 'PS256', 'EdDSA'] as const;

/** A provider's client at its server, as the operator registered it (mode `custom`). */
const clientFields = {
  client_id: z.string().min(1).max(2048).optional(),
  client_secret: z.string().min(1).max(4096).optional(),
};

/** An https URL a server shows its users (RFC 7591 §2 `client_uri`, `logo_uri`, …). */
const shownUrl = z
  .string()
  .max(2048)
  .regex(/^https:\/\/[^\s#]+$/, 'an https URL without fragment');

/**
 * Mode `register`: what dynamic registration tells the server about Keyway (RFC 7591 §2),
 * for a server that refuses the default (Figma answers 403 to clients it does not know);
 * each field given replaces Keyway's own. The redirect URI stays Keyway's callback.
 */
export const ClientMetadataBody = z.strictObject({
  client_name: z.string().min(1).max(200).optional(),
  client_uri: shownUrl.optional(),
  logo_uri: shownUrl.optional(),
  policy_uri: shownUrl.optional(),
  tos_uri: shownUrl.optional(),
  contacts: z.array(z.string().min(1).max(320)).min(1).max(8).optional(),
  software_id: z.string().min(1).max(200).optional(),
  software_version: z.string().min(1).max(64).optional(),
  /** Default: `web` for an https callback, `native` for a loopback http one. */
  application_type: z.enum(['web', 'native']).optional(),
  /** Default: the strongest the server lists (`client_secret_basic`, `client_secret_post`, `none`). */
  token_endpoint_auth_method: z
    .enum(['client_secret_basic', 'client_secret_post', 'none'])
    .optional(),
});

/** The OAuth scopes a provider asks for by default. */
const providerScopes = z.array(z.string().min(1).max(200)).max(64).optional();

/**
 * `false`: inject-only — its connections' tokens are never handed out, only used by the
 * gateway and the proxy (docs/api.md §13). Default `true`.
 */
const handOut = z.boolean().optional();
/**
 * `true`: DPoP-bound tokens (RFC 9449) even where the server does not list
 * `dpop_signing_alg_values_supported` — for a server that requires proofs without saying
 * so. Its connections are then inject-only (docs/api.md §14). Default `false`: DPoP where
 * the server lists ES256 and the provider is inject-only.
 */
const dpop = z.boolean().optional();
const providerLabel = z.string().min(1).max(200).optional();

/** Body of `PUT /api/admin/providers/<id>` (docs/api.md §4), template `mcp`. */
export const McpProviderBody = z.strictObject({
  template: z.literal('mcp'),
  /**
   * An `mcp` profile of the catalog (`GET /api/admin/profiles`): its endpoint, the
   * credentials mode and client authentication that work, its authorization parameters.
   */
  profile: z.string().min(1).max(64).optional(),
  hand_out: handOut,
  dpop,
  label: providerLabel,
  configuration: z
    .strictObject({
      /** The MCP endpoint; with a `profile`, its endpoint when left out. */
      resource_url: z.string().optional(),
      scopes: providerScopes,
      /** Added to the authorization URL (`prompt`, `access_type`, `audience`, …). */
      authorization_params: extraParams,
      /** Added to every token request: the code exchange and each refresh. */
      token_params: extraParams,
      /**
       * `assume_s256`: the server does PKCE S256 without advertising it; Keyway sends it
       * anyway (docs/api.md §6 item 4). Only for a server you know does.
       */
      pkce: z.literal('assume_s256').optional(),
    })
    // With a `profile`, the configuration may be left out.
    .optional(),
  credentials: z
    .strictObject({
      mode: z
        .enum(['register', 'custom', 'client_credentials', 'jwt_bearer', 'enterprise'])
        .optional(),
      ...clientFields,
      /**
       * Mode `client_credentials`, `private_key_jwt` (RFC 7523 §2.2): the client's private
       * key, PKCS #8 PEM, kept in the vault and never shown. Instead of `client_secret`.
       */
      private_key: z.string().min(1).max(16384).optional(),
      /** The algorithm of `private_key`'s assertions. Default `ES256`. */
      signing_algorithm: z.enum(SIGNING_ALGORITHMS).optional(),
      /** Mode `jwt_bearer`: the configured assertion source its assertions are read from. */
      assertion_source: z.string().min(1).max(64).optional(),
      /** Mode `jwt_bearer`, a `directory` source: the file of it to read. */
      assertion_file: z.string().min(1).max(128).optional(),
      /**
       * Mode `enterprise` (SEP-990): the enterprise identity provider that exchanges a user's
       * ID token for an identity assertion grant (ID-JAG), and Keyway's client there.
       */
      identity_provider: z
        .strictObject({
          issuer: z.string().min(1).max(2048),
          /**
           * Needed when the issuer publishes no authorization server metadata; otherwise the
           * published one is used, and a different one here is refused.
           */
          token_endpoint: z.string().min(1).max(2048).optional(),
          client_id: z.string().min(1).max(2048),
          client_secret: z.string().min(1).max(4096).optional(),
        })
        .optional(),
      /**
       * Mode `custom`: the redirect URI the operator registered: `shared`
       * (`{base}/api/oauth/callback`, the default) or `per_server` (the server's own, shown
       * in the view), which keeps a server that sends no `iss` apart from a mix-up.
       */
      callback: z.enum(['shared', 'per_server']).optional(),
      /**
       * Mode `custom`: how the client authenticates at the token endpoint, whatever the
       * server's metadata lists (HubSpot takes `client_secret_post` only). Default:
       * `client_secret_basic` when the server lists it or lists nothing, else
       * `client_secret_post`.
       */
      token_endpoint_auth_method: z.enum(['client_secret_basic', 'client_secret_post']).optional(),
      client_metadata: ClientMetadataBody.optional(),
    })
    .optional(),
});

/** An endpoint of an `oauth2` provider without a profile: checked like discovered ones. */
const endpointText = z.string().min(1).max(2048);

/**
 * Body of `PUT /api/admin/providers/<id>` (docs/api.md §4), template `oauth2`: a classic
 * OAuth 2 API, from a catalog profile (docs/api.md §15) or with its endpoints named.
 */
export const OAuth2ProviderBody = z.strictObject({
  template: z.literal('oauth2'),
  /** A profile of the catalog (`GET /api/admin/profiles`); absent: the endpoints below. */
  profile: z.string().min(1).max(64).optional(),
  hand_out: handOut,
  label: providerLabel,
  configuration: z
    .strictObject({
      scopes: providerScopes,
      /** Values of the profile's placeholders (a Microsoft `tenant`, a Zendesk `subdomain`). */
      params: z.record(z.string().min(1).max(64), z.string().max(253)).optional(),
      authorization_params: extraParams,
      token_params: extraParams,
      // Without a profile: the server as the operator knows it.
      authorization_endpoint: endpointText.optional(),
      token_endpoint: endpointText.optional(),
      revocation_endpoint: endpointText.optional(),
      /** The issuer an `iss` in the redirect back must equal (RFC 9207). */
      issuer: endpointText.optional(),
      scope_separator: z.enum([' ', ',']).optional(),
      /** The authorization parameter the scopes go in: `user_scope` for Slack's user tokens. */
      scope_param: z.enum(['scope', 'user_scope']).optional(),
      /**
       * How the token endpoint answers, as a catalog profile's `token_response` says: where
       * the tokens are (`authed_user.access_token`), a `false` field of a failure (`ok`), …
       */
      token_response: z.record(z.string(), z.unknown()).optional(),
      /** `none` only for a server that cannot do PKCE. Default `S256`. */
      pkce: z.enum(['S256', 'none']).optional(),
      token_endpoint_auth_method: z.enum(['client_secret_basic', 'client_secret_post']).optional(),
      /** Where the API proxy forwards (docs/api.md §13). */
      api_base_url: endpointText.optional(),
    })
    .optional(),
  credentials: z.strictObject({ mode: z.literal('custom').optional(), ...clientFields }),
});

/** Body of `PUT /api/admin/providers/<id>` (docs/api.md §4): one of the templates. */
export const ProviderBody = z.discriminatedUnion('template', [McpProviderBody, OAuth2ProviderBody]);

/** Body of `POST /api/admin/discover` (docs/api.md §6). */
export const DiscoverBody = z.strictObject({
  resource_url: z.string(),
  /** As a provider's `configuration.pkce`: discover as that provider would. */
  pkce: z.literal('assume_s256').optional(),
  /**
   * Register a test client to learn whether registration works (deleted again where the
   * server offers RFC 7592); what `keyway doctor` asks for. Default `false`.
   */
  try_registration: z.boolean().optional(),
});

// ─── connections (docs/api.md §5) ─────────────────────────────────────────────────────────────

/** Body of `POST /api/oauth/authorize/<provider_id>` (docs/api.md §5). */
export const AuthorizeBody = z.strictObject({
  connection_id: z.string(),
  scopes: z
    .array(
      z
        .string()
        .regex(
          /^[\x21\x23-\x5b\x5d-\x7e]+$/,
          'a scope is printable ASCII without spaces, quotes or backslashes',
        ),
    )
    .max(64)
    .optional(),
  redirect_to: z.string().optional(),
  /** Hold the completed consent until the app confirms it (docs/api.md §5 user verification). */
  verify_user: z.boolean().optional(),
  /**
   * Mode `enterprise` (docs/api.md §14): the user's identity assertion (an ID token of the
   * enterprise identity provider), exchanged once and never stored.
   */
  subject_token: z.string().min(1).max(16384).optional(),
});

/** Body of `POST /api/oauth/verify` (docs/api.md §5 user verification). */
export const VerifyBody = z.strictObject({ flow_id: z.string().min(1).max(200) });

// ─── connect sessions (docs/api.md §19) ─────────────────────────────────────────────────────

/** The longest lifetime of a connect session, seconds (docs/api.md §19). */
const MAX_CONNECT_SESSION = 86_400;

const connectText = (field: string, max: number) =>
  z
    .string({ error: `"${field}" must be a string` })
    .min(1, { error: `"${field}" must not be empty` })
    .max(max, { error: `"${field}" must be at most ${max} characters` });

/** A CSS color the page may use as its accent: `#rgb` or `#rrggbb`, nothing to inject. */
const accent = z
  .string()
  .regex(/^#(?:[0-9a-fA-F]{3}){1,2}$/, { error: '"branding.accent" must be a color like #0a7cff' });

/** Body of `POST /api/admin/connect-sessions` (docs/api.md §19). */
export const ConnectSessionBody = z.strictObject({
  namespace: z.string({ error: '"namespace" must be a resource path' }),
  providers: z
    .array(z.string({ error: '"providers" must be provider ids' }))
    .min(1, { error: '"providers" must name at least one provider, or be left out' })
    .max(50, { error: '"providers" may name at most 50 providers' })
    .optional(),
  end_user: z
    .strictObject({
      id: connectText('end_user.id', 200),
      name: connectText('end_user.name', 200).optional(),
      email: connectText('end_user.email', 320).optional(),
    })
    .optional(),
  redirect_uri: z.string({ error: '"redirect_uri" must be a URL' }).optional(),
  verify: z.boolean({ error: '"verify" must be true or false' }).optional(),
  allow_disconnect: z.boolean({ error: '"allow_disconnect" must be true or false' }).optional(),
  expires_in: z
    .number({ error: '"expires_in" must be a number of seconds' })
    .int({ error: '"expires_in" must be a whole number of seconds' })
    .min(60, { error: '"expires_in" must be at least 60 seconds' })
    .max(MAX_CONNECT_SESSION, {
      error: `"expires_in" must be at most ${MAX_CONNECT_SESSION} seconds`,
    })
    .optional(),
  branding: z
    .strictObject({
      name: connectText('branding.name', 80).optional(),
      logo_url: z
        .url({ protocol: /^https$/, error: '"branding.logo_url" must be an https URL' })
        .max(2000)
        .optional(),
      accent: accent.optional(),
    })
    .optional(),
});

/** `GET /api/admin/connect-sessions` (docs/api.md §19). */
export const ConnectSessionListQuery = z.strictObject({
  /** Only the sessions of this namespace and below. */
  namespace: z.string().optional(),
});

/** Body of `POST /connect/api/authorize` (docs/api.md §19): the page starts a connection. */
export const ConnectStartBody = z.strictObject({
  provider_id: z.string({ error: '"provider_id" must be an offered provider id' }),
});

// ─── secrets (docs/api.md §7) ─────────────────────────────────────────────────────────────────

/** Body of `PUT /api/vault/secrets/<path>`. */
export const PutSecretBody = z.strictObject({ value: z.string() });

// ─── response bodies ─────────────────────────────────────────────────────────────────────

export * from './response-schemas.js';

// ─── the input types, as callers write them ──────────────────────────────────────────────

/**
 * The query of every list: `{ limit?, cursor? }`.
 *
 * @see [docs/api.md §1.4](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#14-timestamps-lists)
 */
export type ListQuery = z.input<typeof TokenListQuery>;
/**
 * What to mint: a name, scopes and an optional lifetime in seconds.
 *
 * @example
 * await broker.tokens.mint(rootPrincipal(), { name: 'ci', scopes: ['acme/**'], expires_in: 3600 });
 * @see [docs/api.md §3.3](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#33-endpoints)
 */
export type MintTokenInput = Omit<z.input<typeof MintTokenBody>, 'expires_in'> & {
  /** Seconds, 60–2592000; default 3600. */
  expires_in?: number;
};
/**
 * How to narrow a token: equal or narrower scopes, an equal or earlier expiry.
 *
 * @see [docs/api.md §3.3](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#33-endpoints) (PATCH)
 */
export type NarrowTokenInput = Omit<z.input<typeof NarrowTokenBody>, 'expires_in'> & {
  expires_in?: number;
};
/**
 * What the portal reads of a connection, to set or clear (`null`): its alias and its tool
 * policy.
 *
 * @see [docs/api.md §18](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#18-the-portal) (PATCH /api/oauth/connections/{id})
 */
export type UpdateConnectionInput = z.input<typeof UpdateConnectionBody>;
/**
 * A provider to create or replace, from the `mcp` template.
 *
 * @example
 * await broker.providers.put(rootPrincipal(), 'linear', {
 *   template: 'mcp',
 *   configuration: { resource_url: 'https://mcp.linear.app/mcp' },
 * });
 * @see [docs/api.md §4](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#4-providers), §6
 */
export type ProviderInput = z.input<typeof ProviderBody>;
export type OAuth2ProviderInput = z.output<typeof OAuth2ProviderBody>;
/**
 * The resource URL to run discovery for, without storing anything.
 *
 * @see [docs/api.md §6](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#6-mcp-discovery), §8
 */
export type DiscoverInput = z.input<typeof DiscoverBody>;
/**
 * What to authorize: the connection, optionally the scopes, where to send the user after
 * consent, and whether the app confirms the user first.
 *
 * @example
 * const { authorization_url } = await broker.connections.authorize(principal, 'linear', {
 *   connection_id: 'acme/users/alice/linear',
 *   redirect_to: 'https://app.example.com/settings',
 * });
 * @see [docs/api.md §5](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#5-connections) "Authorize"
 */
export type AuthorizeInput = z.input<typeof AuthorizeBody>;
/**
 * The flow id of a user-verification flow to confirm.
 *
 * @see [docs/api.md §5](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#5-connections) "User verification"
 */
export type VerifyInput = z.input<typeof VerifyBody>;
/**
 * A secret's new value.
 *
 * @see [docs/api.md §7](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#7-vault)
 */
export type PutSecretInput = z.input<typeof PutSecretBody>;
/**
 * The provider list's query: `{ prefix?, limit?, cursor? }`.
 *
 * @see [docs/api.md §4](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#4-providers), §1.4
 */
export type ProviderListQueryInput = z.input<typeof ProviderListQuery>;
/**
 * The secret list's query: `{ prefix?, limit?, cursor? }`.
 *
 * @see [docs/api.md §7](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#7-vault), §1.4
 */
export type SecretListQueryInput = z.input<typeof SecretListQuery>;
/**
 * The connection list's query: `{ prefix?, provider_id?, status?, limit?, cursor? }`.
 *
 * @see [docs/api.md §5](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#5-connections), §1.4
 */
export type ConnectionListQueryInput = z.input<typeof ConnectionListQuery>;
/**
 * The audit log's query: `{ prefix?, type?, since?, limit?, cursor? }`.
 *
 * @see [docs/api.md §11](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#11-events-webhooks-audit-log), §1.4
 */
export type AuditListQueryInput = z.input<typeof AuditListQuery>;
/**
 * The webhook deliveries' query: `{ status?, limit?, cursor? }`.
 *
 * @see [docs/api.md §11](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#11-events-webhooks-audit-log), §1.4
 */
export type DeliveryListQueryInput = z.input<typeof DeliveryListQuery>;
/**
 * The credentials query: `{ force_refresh? }`.
 *
 * @see [docs/api.md §5](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#5-connections) "Credentials"
 */
export type CredentialsQueryInput = z.input<typeof CredentialsQuery>;
