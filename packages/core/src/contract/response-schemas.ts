import { z } from 'zod';
import {
  CONNECTION_ERROR_CODES,
  CONNECTION_STATUSES,
  DELIVERY_STATUSES,
  EVENT_TYPES,
} from './codes.js';
import { ERROR_STATUS } from './errors.js';
import {
  AuthorizationServerInfoSchema,
  ResourceInfoSchema,
  TokenAnswerSchema,
} from './metadata.js';

/*
 * The response schemas of the HTTP contract, one per answer body: with the request schemas
 * of `schemas.ts`, the source of the OpenAPI document (docs/api.md §10). A test holds each one
 * to the TypeScript type the operations return, so the two cannot drift apart.
 */

/** ISO 8601 UTC with milliseconds, as every time of the contract is written. */
const time = z.string().meta({ format: 'date-time' });

/** The body of every error (docs/api.md §1.2). */
export const ErrorBody = z.object({
  error: z.enum(Object.keys(ERROR_STATUS) as [keyof typeof ERROR_STATUS]),
  error_description: z.string(),
  details: z.array(z.record(z.string(), z.unknown())).optional(),
});

/**
 * A connection's tool policy for the portal (docs/api.md §18): allow and deny globs over its
 * server's tool names, `read_only` for tools annotated `readOnlyHint: true` only.
 */
export const ToolPolicyBody = z.object({
  allow: z.array(z.string()).optional(),
  deny: z.array(z.string()).optional(),
  read_only: z.boolean().optional(),
});

/** A page of a list (docs/api.md §1.4). */
export function PageOf<T extends z.ZodType>(item: T) {
  return z.object({ items: z.array(item), next_cursor: z.string().nullable() });
}

/** `POST /api/admin/tokens` (docs/api.md §3.3): the only time the token is shown. */
export const IssuedTokenBody = z.object({
  name: z.string(),
  access_token: z.string(),
  token_type: z.literal('Bearer'),
  scopes: z.array(z.string()),
  expires_at: time,
  /** The portal's tools the token may list and call (docs/api.md §18); absent: any. */
  tools: z.array(z.string()).optional(),
});

/** A token as lists and reads show it (docs/api.md §3.3): never the token itself. */
export const TokenViewBody = z.object({
  name: z.string(),
  scopes: z.array(z.string()),
  expires_at: time,
  created_at: time,
  created_by: z.string(),
  /** The portal's tools the token may list and call (docs/api.md §18); absent: any. */
  tools: z.array(z.string()).optional(),
});

/** A grant of an MCP client that signed in (docs/api.md §17): never a token. */
export const GrantViewBody = z.object({
  id: z.string(),
  client_id: z.string(),
  client_name: z.string().nullable(),
  /** The host the client's metadata document proved; `null`: registered, unverified. */
  verified_host: z.string().nullable(),
  /** `mcp/<connection path>`. */
  endpoint: z.string(),
  /** Who signed in: a broker token's name, or the user at the identity provider. */
  user: z.string(),
  created_at: time,
  expires_at: time,
  /** When the client last obtained an access token. */
  last_used_at: time,
});

const nullableStrings = z.array(z.string()).nullable();

/** The provider view (docs/api.md §4): never a secret. */
export const ProviderViewBody = z.object({
  id: z.string(),
  template: z.enum(['mcp', 'oauth2']),
  /** `oauth2`: its catalog profile; `null` for named endpoints, and for `mcp`. */
  profile: z.string().nullable(),
  label: z.string(),
  /** `false`: inject-only (docs/api.md §13). */
  hand_out: z.boolean(),
  dpop: z.boolean(),
  configuration: z.object({
    resource_url: z.string().optional(),
    scopes: z.array(z.string()),
    params: z.record(z.string(), z.string()).optional(),
    authorization_params: z.record(z.string(), z.string()).optional(),
    token_params: z.record(z.string(), z.string()).optional(),
    pkce: z.literal('assume_s256').optional(),
  }),
  credentials: z.object({
    mode: z.enum(['register', 'custom', 'client_credentials', 'jwt_bearer', 'enterprise']),
    assertion_source: z.string().optional(),
    assertion_file: z.string().optional(),
    /** Mode `register`: the client metadata the operator set for registration (docs/api.md §4). */
    client_metadata: z.record(z.string(), z.union([z.string(), z.array(z.string())])).optional(),
    /** Mode `enterprise`: the identity provider and Keyway's client there (never its secret). */
    identity_provider: z
      .object({
        issuer: z.string(),
        token_endpoint: z.string(),
        client_id: z.string(),
        client_secret_set: z.boolean(),
      })
      .optional(),
    client_id: z.string(),
    registration: z.enum(['dynamic', 'metadata_document', 'manual']),
    token_endpoint_auth_method: z.enum([
      'client_secret_basic',
      'client_secret_post',
      'private_key_jwt',
      'none',
    ]),
    client_secret_set: z.boolean(),
    client_secret_expires_at: time.nullable(),
    /** Dynamic registration: the server's answer, its secrets masked (docs/api.md §4). */
    registration_response: z.record(z.string(), z.unknown()).nullable(),
    redirect_uri: z.string().nullable(),
  }),
  resource: z
    .object({
      resource: z.string(),
      resource_metadata_url: z.string().nullable(),
      scopes_supported: nullableStrings,
    })
    .nullable(),
  /** `oauth2`: where the API proxy forwards; `null` when none, and for `mcp`. */
  api_base_url: z.string().nullable(),
  authorization_server: AuthorizationServerInfoSchema.pick({
    issuer: true,
    authorization_endpoint: true,
    token_endpoint: true,
    registration_endpoint: true,
    revocation_endpoint: true,
    scopes_supported: true,
  }),
  last_party_change: z
    .object({
      at: time,
      previous_issuer: z.string(),
      previous_client_id: z.string(),
      previous_resource_url: z.string().nullable(),
      connections_reauthorization_required: z.number().int().nonnegative(),
    })
    .nullable(),
  created_at: time,
  updated_at: time,
});

/** A profile of the `oauth2` template's catalog (docs/api.md §15). */
export const ProfileViewBody = z.object({
  id: z.string(),
  /** `oauth2`: a classic API; `mcp`: a hosted MCP server (docs/servers.md). */
  template: z.enum(['oauth2', 'mcp']),
  label: z.string(),
  docs_url: z.string(),
  /** `mcp`: the day its facts were read at `docs_url`. */
  checked: z.string().nullable(),
  /** `mcp`: the MCP endpoint. */
  resource_url: z.string().nullable(),
  /** The credentials mode that works: `custom` needs an application registered by hand. */
  credentials: z.enum(['register', 'custom']),
  scopes_example: z.array(z.string()),
  /** The names of its parameters, given in `configuration.params`. */
  params: z.array(z.string()),
  api_base_url: z.string().nullable(),
  refresh: z.enum(['rotating', 'stable', 'none', 'unknown']),
  /** What an operator should know, each fact from `docs_url`. */
  notes: z.array(z.string()),
});

const ModeVerdictBody = z.object({
  /** `null`: not tried. */
  works: z.boolean().nullable(),
  how: z.enum(['metadata_document', 'dynamic', 'by_hand']).nullable(),
  note: z.string(),
});

/** The report on a server: which credentials mode will work and why (docs/api.md §6). */
export const DoctorReportBody = z.object({
  ok: z.boolean(),
  recommended: z.enum(['register', 'custom']).nullable(),
  register: ModeVerdictBody,
  custom: ModeVerdictBody,
  /** The redirect URI to register an application with; `null` without a base URL. */
  callback_url: z.string().nullable(),
  /** The RFC 8707 `resource` Keyway sends, as published. */
  resource: z.string().nullable(),
  profile: z
    .object({
      id: z.string(),
      label: z.string(),
      docs_url: z.string(),
      checked: z.string(),
      credentials: z.enum(['register', 'custom']),
      notes: z.array(z.string()),
    })
    .nullable(),
  findings: z.array(z.string()),
});

/** One step of a discovery trace (docs/api.md §6, §8). */
export const DiscoveryStepBody = z.object({
  step: z.string(),
  url: z.string().nullable(),
  status: z.number().int().nullable(),
  ok: z.boolean(),
  note: z.string(),
  /**
   * The public document this step read, as the server sent it: the protected-resource
   * metadata (RFC 9728) or the authorization-server metadata (RFC 8414). Only on the step
   * that found it.
   */
  document: z.record(z.string(), z.unknown()).optional(),
});

/** A discovery trace (docs/api.md §6): what `POST /api/admin/discover` answers. */
export const DiscoveryTraceBody = z.object({
  ok: z.boolean(),
  steps: z.array(DiscoveryStepBody),
  resource: ResourceInfoSchema.nullable(),
  authorization_server: AuthorizationServerInfoSchema.nullable(),
  challenge_scope: z.string().nullable(),
  scopes: z.array(z.string()),
  legacy: z.boolean(),
  error: z.enum(['discovery_failed', 'unsupported_authorization_server']).nullable(),
});

/** `POST /api/admin/discover`: the trace, and what will work in plain words (`keyway doctor`). */
export const DiscoveryReportBody = DiscoveryTraceBody.extend({ report: DoctorReportBody });

const ConnectionFailureBody = z.object({
  code: z.enum(CONNECTION_ERROR_CODES),
  description: z.string(),
});

/** A connection as the API shows it (docs/api.md §5): never a token. */
export const ConnectionViewBody = z.object({
  connection_id: z.string(),
  provider_id: z.string(),
  status: z.enum(CONNECTION_STATUSES),
  scopes: z.array(z.string()),
  refreshable: z.boolean(),
  /** How its tokens are obtained: a user's consent, or the client's own (docs/api.md §14). */
  grant: z.enum(['authorization_code', 'client_credentials', 'jwt_bearer', 'enterprise']),
  /** `oauth2`: what the profile keeps from the authorization; `{}` when none. */
  metadata: z.record(z.string(), z.string()),
  /** The last token response without its tokens (the inspector's OAuth debugger). */
  token_response: TokenAnswerSchema.extend({ received_at: time }).nullable(),
  /** The account the server said the connection is for (a label); `null`: it said none. */
  account: z.string().nullable(),
  token_expires_at: time.nullable(),
  created_at: time,
  updated_at: time,
  authorized_at: time.nullable(),
  last_refreshed_at: time.nullable(),
  error: ConnectionFailureBody.nullable(),
  /** The name the portal gives its tools, as set (docs/api.md §18); `null`: its last segment. */
  alias: z.string().nullable(),
  /** The portal's tool policy (docs/api.md §18); `null`: every tool. */
  tools: ToolPolicyBody.nullable(),
});

/** The answer of an authorize call (docs/api.md §5). */
export const AuthorizeResultBody = z.object({
  connection_id: z.string(),
  provider_id: z.string(),
  authorization_url: z.string(),
  expires_at: time,
});

/**
 * The answer of `POST /api/oauth/authorize/<provider>`: the consent URL, or — for a provider
 * of the client credentials grant (docs/api.md §14) — the connection, already active.
 */
export const AuthorizeAnswerBody = z.union([AuthorizeResultBody, ConnectionViewBody]);

/** `GET /api/oauth/credentials/<path>` (docs/api.md §5). */
export const CredentialsBody = z.object({
  connection_id: z.string(),
  access_token: z.string(),
  token_type: z.literal('Bearer'),
  expires_at: time.nullable(),
  scopes: z.array(z.string()),
});

/** A secret without its value (docs/api.md §7). */
export const SecretViewBody = z.object({
  path: z.string(),
  version: z.number().int().positive(),
  created_at: time,
  updated_at: time,
});

/** A secret with its value (docs/api.md §7). */
export const SecretWithValueBody = SecretViewBody.extend({ value: z.string() });

/** The client-ID metadata document of the deployment (docs/api.md §6). */
export const ClientMetadataBody = z.looseObject({
  client_id: z.string(),
  client_name: z.string(),
  redirect_uris: z.array(z.string()),
});

/** `POST /api/oauth/probe/<path>` (docs/api.md §8): never the token. */
export const ProbeResultBody = z.object({
  ok: z.boolean(),
  server: z
    .object({ name: z.string(), version: z.string(), protocol_version: z.string() })
    .nullable(),
  tools: z.array(z.object({ name: z.string(), description: z.string() })),
  steps: z.array(
    z.object({
      step: z.enum(['discover', 'initialize', 'initialized', 'tools/list', 'close']),
      status: z.number().int().nullable(),
      ok: z.boolean(),
      note: z.string(),
    }),
  ),
});

/** An event of the audit log and of webhooks (docs/api.md §11): never a secret. */
export const EventBody = z.object({
  id: z.string(),
  type: z.enum(EVENT_TYPES),
  time,
  actor: z.string(),
  resource: z.string(),
  data: z.record(z.string(), z.unknown()),
});

/** A webhook delivery (docs/api.md §11). */
export const DeliveryViewBody = z.object({
  id: z.string(),
  event: EventBody,
  url: z.string(),
  status: z.enum(DELIVERY_STATUSES),
  attempts: z.number().int().nonnegative(),
  next_attempt_at: time.nullable(),
  last_attempt_at: time.nullable(),
  last_status: z.number().int().nullable(),
  last_error: z.string().nullable(),
  created_at: time,
});

/** The branding of a connect page (docs/api.md §19). */
const BrandingBody = z.object({
  name: z.string().optional(),
  logo_url: z.string().optional(),
  accent: z.string().optional(),
});

/** `POST /api/admin/connect-sessions` (docs/api.md §19): the page's URL, its secret once. */
export const CreatedConnectSessionBody = z.object({
  id: z.string(),
  /** `{base}/connect#<secret>`: the secret in the fragment, shown this once. */
  url: z.string(),
  expires_at: time,
});

/** A connect session as the API shows it (docs/api.md §19): never its secret. */
export const ConnectSessionViewBody = z.object({
  id: z.string(),
  namespace: z.string(),
  /** The offered providers; `null`: every provider the creator covered. */
  providers: z.array(z.string()).nullable(),
  end_user: z
    .object({ id: z.string(), name: z.string().optional(), email: z.string().optional() })
    .nullable(),
  redirect_uri: z.string().nullable(),
  verify: z.boolean(),
  allow_disconnect: z.boolean(),
  branding: BrandingBody,
  created_by: z.string(),
  created_at: time,
  expires_at: time,
  status: z.enum(['active', 'expired', 'revoked']),
  /** The connections it completed. */
  completed: z.array(z.string()),
});

/** `GET /api/admin/connect-sessions`: newest first, at most 500, in one page. */
export const ConnectSessionListBody = PageOf(ConnectSessionViewBody);

/** What a connect page reads of its session (docs/api.md §19): never a token or a secret. */
export const ConnectPageViewBody = z.object({
  branding: BrandingBody,
  end_user: z.object({ name: z.string() }).nullable(),
  expires_at: time,
  allow_disconnect: z.boolean(),
  redirect_uri: z.string().nullable(),
  /** The origins the page may tell its opener how a connection ended. */
  opener_origins: z.array(z.string()),
  providers: z.array(
    z.object({
      provider_id: z.string(),
      label: z.string(),
      connection_id: z.string(),
      status: z.enum(CONNECTION_STATUSES).nullable(),
      /** The account the server said the connection is for. */
      account: z.string().nullable(),
      /** The host of the consent page. */
      signs_in_at: z.string(),
      error: z.object({ code: z.string(), description: z.string() }).nullable(),
    }),
  ),
});

/** `POST /connect/api/authorize`: the consent address of the connection it started. */
export const ConnectStartedBody = z.object({
  connection_id: z.string(),
  authorization_url: z.string(),
});
