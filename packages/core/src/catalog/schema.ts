import { z } from 'zod';
import { ConnectionValueSchema, responsePath, TokenResponseSchema } from '../storage/quirks.js';

export { ConnectionValueSchema, TokenResponseSchema } from '../storage/quirks.js';

/*
 * The shape of a profile of the `oauth2` template (docs/api.md §15): a classic OAuth 2 API
 * described as data — endpoints with `{placeholders}`, every quirk a field — so that one
 * code path serves every provider. Checked when a catalog loads (the built-in one in its
 * test, an app's own at `createBroker`): a profile that breaks a rule here is refused
 * before any broker starts.
 */

/**
 * A `{placeholder}` in an endpoint or the API base URL: a parameter's name, or in
 * `api_base_url` a connection value's (`realmId`).
 */
export const PLACEHOLDER = /\{([A-Za-z][A-Za-z0-9_]*)\}/g;

/** The names of the placeholders in a text, in order of appearance. */
export function placeholdersOf(text: string): string[] {
  return [...text.matchAll(PLACEHOLDER)].map((match) => match[1] as string);
}

/**
 * What no parameter value may hold, whatever its pattern says: a value fills a label of a
 * host or one path segment, never more (no `/`, `\`, `?`, `#`, `@`, `%`, `:`, whitespace).
 */
export const UNSAFE_VALUE = /[/\\?#@%:\s]/;

/** A parameter or header name. */
const name = z.string().regex(/^[A-Za-z][A-Za-z0-9_.-]{0,63}$/, 'a name of 1 to 64 characters');

const stringRecord = z.record(name, z.string().max(2048));

/** A profile's parameter: what an operator gives in `configuration.params`. */
export const ProfileParamSchema = z.strictObject({
  name: z.string().regex(/^[a-z][a-z0-9_]*$/, 'lower case letters, digits and `_`'),
  description: z.string().min(1),
  /**
   * What a value may be, matched in full. Whatever it says, a value holding a character of
   * {@link UNSAFE_VALUE}, or `.`/`..`, is refused: a tenant or a shop fills its own place in
   * a host or a path segment, never a host or a path of its choosing.
   */
  pattern: z.string().min(1),
  /** The value when the operator gives none (`common` for Microsoft's tenant). */
  default: z.string().optional(),
});

/**
 * Endpoint text: `https://`, `{placeholders}` inside labels of the host or whole path
 * segments, no query or fragment.
 */
const endpoint = z
  .string()
  .regex(/^https:\/\/[^\s?#@]+$/, 'an https URL without query or fragment');

/**
 * A request made once a connection is authorized (Atlassian's sites): `GET url` with the
 * new access token, through the guarded fetch; values of its JSON answer are kept as
 * metadata. When it fails, the connection is kept without them.
 */
export const AfterConnectSchema = z.strictObject({
  url: endpoint,
  /** Metadata name → path into the answer (`0.id`: the first item's `id`). */
  metadata: z.record(name, responsePath),
});

export const ProfileSchema = z.strictObject({
  id: z.string().regex(/^[a-z][a-z0-9-]{0,62}$/, 'lower case letters, digits and `-`'),
  label: z.string().min(1).max(200),
  /** The provider's own documentation of the facts below. */
  docs_url: z.string().regex(/^https:\/\/\S+$/, 'an https URL'),
  /**
   * The issuer an `iss` in the redirect back must equal (RFC 9207), where the server sends
   * one. Default: the authorization endpoint's origin.
   */
  issuer: endpoint.optional(),
  authorization_endpoint: endpoint,
  token_endpoint: endpoint,
  /** Where the refresh grant goes when not to the token endpoint (Figma). */
  refresh_endpoint: endpoint.optional(),
  revocation_endpoint: endpoint.optional(),
  params: z.array(ProfileParamSchema).max(8).default([]),
  scopes_example: z.array(z.string().min(1)),
  /** Scopes every authorization asks for (Microsoft's `offline_access`). */
  scopes_always: z.array(z.string().min(1)).default([]),
  scope_separator: z.enum([' ', ',']).default(' '),
  /** The authorization parameter the scopes go in: `user_scope` for Slack's user tokens. */
  scope_param: z.enum(['scope', 'user_scope']).default('scope'),
  /** `none` only where the server cannot do PKCE. */
  pkce: z.enum(['S256', 'none']).default('S256'),
  token_endpoint_auth_method: z
    .enum(['client_secret_basic', 'client_secret_post'])
    .default('client_secret_post'),
  /** How token requests are encoded: `json` for servers documented with JSON bodies. */
  token_request_format: z.enum(['form', 'json']).default('form'),
  /** Headers of every token request (`Accept: application/json` for GitHub). */
  token_request_headers: stringRecord.default({}),
  authorization_params: stringRecord.default({}),
  token_params: stringRecord.default({}),
  token_response: TokenResponseSchema.default(TokenResponseSchema.parse({})),
  /** Parameters of the redirect back kept with the connection (QuickBooks' `realmId`). */
  redirect_params: z.array(name).max(8).default([]),
  /** Where the API proxy forwards (docs/api.md §13), with placeholders; `null`: no proxy. */
  api_base_url: endpoint.nullable(),
  /** The values of each connection `api_base_url` is built from, with their patterns. */
  connection_values: z.array(ConnectionValueSchema).max(4).default([]),
  /** A request that gives a connection metadata once it is authorized. */
  after_connect: AfterConnectSchema.optional(),
  /** Headers the proxy adds to every API request (Notion's `Notion-Version`). */
  api_headers: stringRecord.default({}),
  /**
   * `rotating`: each refresh answers a new refresh token; `stable`: the same one is used
   * again; `none`: no refresh token (the access token lasts until revoked, or the
   * connection is authorized again when it expires).
   */
  refresh: z.enum(['rotating', 'stable', 'none']),
  /** What an operator should know, each fact from `docs_url`. */
  notes: z.array(z.string().min(1)).default([]),
});

/** A profile as the catalog holds it, defaults filled. */
export type Profile = z.output<typeof ProfileSchema>;
/** A profile as written in a catalog's data. */
export type ProfileInput = z.input<typeof ProfileSchema>;
export type ProfileParam = z.output<typeof ProfileParamSchema>;
export type TokenResponseQuirks = z.output<typeof TokenResponseSchema>;
export type ConnectionValue = z.output<typeof ConnectionValueSchema>;
export type AfterConnect = z.output<typeof AfterConnectSchema>;
