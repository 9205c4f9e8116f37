import { z } from 'zod';

/*
 * The shapes of what Keyway learns from remote servers, as it keeps them and as the
 * contract's views show them: the protected resource, the authorization server, and a token
 * answer described without its tokens.
 */

const nullableStrings = z.array(z.string()).nullable();

/** What Keyway keeps of the protected resource (RFC 9728). */
export const ResourceInfoSchema = z.object({
  /** The RFC 8707 `resource`: the metadata's, byte for byte; the resource URL when legacy. */
  resource: z.string(),
  /** `null` for a 2025-03-26 server, which publishes no protected-resource metadata. */
  resource_metadata_url: z.string().nullable(),
  scopes_supported: nullableStrings,
  authorization_servers: z.array(z.string()),
});

/** What Keyway keeps of the authorization server (RFC 8414 / OpenID Connect discovery). */
export const AuthorizationServerInfoSchema = z.object({
  issuer: z.string(),
  authorization_endpoint: z.string(),
  token_endpoint: z.string(),
  registration_endpoint: z.string().nullable(),
  revocation_endpoint: z.string().nullable(),
  scopes_supported: nullableStrings,
  code_challenge_methods_supported: z.array(z.string()),
  token_endpoint_auth_methods_supported: nullableStrings,
  client_id_metadata_document_supported: z.boolean(),
  authorization_response_iss_parameter_supported: z.boolean(),
  /**
   * An OpenID provider: its metadata came from `openid-configuration`, or its
   * `scopes_supported` lists `openid`. Asking it for `offline_access` needs
   * `prompt=consent` (OpenID Connect Core §11). Absent in records made before it was kept.
   */
  openid: z.boolean().optional(),
  /** RFC 9449 §5.1: the DPoP proof algorithms it takes; absent: none advertised. */
  dpop_signing_alg_values_supported: z.array(z.string()).optional(),
});

/**
 * What the last token response looked like, for a person debugging a connection (the
 * inspector's OAuth debugger): the values that are not secrets, whether a refresh token came,
 * and the names of every field. Never a token.
 */
export const TokenAnswerSchema = z.object({
  received_at: z.number(),
  /** The `grant_type` of the request it answered. */
  grant_type: z.string(),
  token_type: z.string(),
  expires_in: z.number().nullable(),
  scope: z.string().nullable(),
  refresh_token: z.enum(['present', 'absent']),
  /**
   * The refresh token's lifetime in seconds, where the server says
   * (`refresh_token_expires_in`: GitHub Apps, Slack with rotation). Absent: it did not.
   */
  refresh_token_expires_in: z.number().optional(),
  /** Every field of the answer, by name. */
  fields: z.array(z.string()),
});
