import { z } from 'zod';

/*
 * What sign-in keeps (docs/api.md §17), each shape checked when it is read back: the
 * single-use records of a pending request, a code, a refresh token and the spent mark a
 * used one leaves, and a grant's entry in the vault.
 */

/** Who signed in: a pasted broker token, or a user of the upstream OpenID provider. */
export const SignedInSchema = z.discriminatedUnion('method', [
  z.object({
    method: z.literal('token'),
    /** The pasted token's name: the grant is its delegated child. */
    name: z.string(),
    /** Its record's key, so that a token deleted and minted again under the name is not it. */
    id_hash: z.string(),
  }),
  z.object({
    method: z.literal('oidc'),
    /** `<issuer> <sub>`: who the user is at the provider. */
    subject: z.string(),
    /** The namespace the user's claims filled. */
    namespace: z.string(),
    /** How the user is shown: email, preferred username or subject. */
    display: z.string(),
  }),
]);
export type SignedIn = z.infer<typeof SignedInSchema>;

/** An authorization request between its pages. */
export const RequestStateSchema = z.object({
  kind: z.literal('sign_in_request'),
  client_id: z.string(),
  redirect_uri: z.string(),
  state: z.string().nullable(),
  code_challenge: z.string(),
  /** The resource URL as the client named it. */
  resource: z.string(),
  /** `mcp/<connection path>`: the endpoint the tokens will be accepted at. */
  endpoint: z.string(),
  /** Hex SHA-256 of the browser's binding cookie: the pages' forms need that browser. */
  binding: z.string(),
  signed_in: SignedInSchema.nullable(),
  /** The upstream sign-in's PKCE verifier and nonce, while the user is at the provider. */
  upstream: z.object({ verifier: z.string(), nonce: z.string() }).nullable(),
});
export type RequestState = z.infer<typeof RequestStateSchema>;

/** A code, between consent and its redemption. */
export const CodeStateSchema = z.object({
  kind: z.literal('sign_in_code'),
  client_id: z.string(),
  client_name: z.string().nullable(),
  verified_host: z.string().nullable(),
  redirect_uri: z.string(),
  code_challenge: z.string(),
  resource: z.string(),
  endpoint: z.string(),
  signed_in: SignedInSchema,
});
export type CodeState = z.infer<typeof CodeStateSchema>;

/** A refresh token of a grant. */
export const RefreshStateSchema = z.object({
  kind: z.literal('sign_in_refresh'),
  grant: z.string(),
  client_id: z.string(),
  generation: z.number().int().min(1),
});
export type RefreshState = z.infer<typeof RefreshStateSchema>;

/** What a used code or rotated refresh token leaves: presented again, it revokes `grant`. */
export const SpentStateSchema = z.object({
  kind: z.literal('sign_in_spent'),
  grant: z.string(),
});
export type SpentState = z.infer<typeof SpentStateSchema>;

/** A grant: what a client may do at one endpoint for whoever signed in. */
export const GrantEntrySchema = z.object({
  id: z.string(),
  client_id: z.string(),
  client_name: z.string().nullable(),
  /** The host the client's metadata document proved, or `null` (registered). */
  verified_host: z.string().nullable(),
  endpoint: z.string(),
  resource: z.string(),
  signed_in: SignedInSchema,
  /** The broker token the grant's access tokens are children of. */
  anchor: z.string(),
  created_at: z.number(),
  expires_at: z.number(),
  /** When the client last obtained an access token. */
  last_used_at: z.number(),
  /** The generation of the grant's current refresh token. */
  generation: z.number().int().min(1),
});
export type GrantEntry = z.infer<typeof GrantEntrySchema>;

/** The vault kind of grants, keyed by grant id. */
export const GRANT_KIND = 'sign_in_grant';
