import { z } from 'zod';

/*
 * Connect sessions (docs/api.md §19): what an application asks for, and what is kept of a
 * session (sealed in the vault, as sign-in grants are).
 */

/** The vault kind of a session's entry; its key is the session id. */
export const SESSION_KIND = 'connect_session';

/** Default and longest lifetime of a session, seconds. */
export const DEFAULT_EXPIRES_IN = 1800;
export const MAX_EXPIRES_IN = 86_400;

const text = (field: string, max: number) =>
  z
    .string({ error: `"${field}" must be a string` })
    .min(1, { error: `"${field}" must not be empty` })
    .max(max, { error: `"${field}" must be at most ${max} characters` });

/** A CSS color the page may use as its accent: `#rgb` or `#rrggbb`, nothing to inject. */
const accent = z
  .string()
  .regex(/^#(?:[0-9a-fA-F]{3}){1,2}$/, { error: '"branding.accent" must be a color like #0a7cff' });

/** `POST /api/admin/connect-sessions`. */
export const ConnectSessionBody = z.strictObject({
  namespace: z.string({ error: '"namespace" must be a resource path' }),
  providers: z
    .array(z.string({ error: '"providers" must be provider ids' }))
    .min(1, { error: '"providers" must name at least one provider, or be left out' })
    .max(50, { error: '"providers" may name at most 50 providers' })
    .optional(),
  end_user: z
    .strictObject({
      id: text('end_user.id', 200),
      name: text('end_user.name', 200).optional(),
      email: text('end_user.email', 320).optional(),
    })
    .optional(),
  redirect_uri: z.string({ error: '"redirect_uri" must be a URL' }).optional(),
  verify: z.boolean({ error: '"verify" must be true or false' }).optional(),
  allow_disconnect: z.boolean({ error: '"allow_disconnect" must be true or false' }).optional(),
  expires_in: z
    .number({ error: '"expires_in" must be a number of seconds' })
    .int({ error: '"expires_in" must be a whole number of seconds' })
    .min(60, { error: '"expires_in" must be at least 60 seconds' })
    .max(MAX_EXPIRES_IN, { error: `"expires_in" must be at most ${MAX_EXPIRES_IN} seconds` })
    .optional(),
  branding: z
    .strictObject({
      name: text('branding.name', 80).optional(),
      logo_url: z
        .url({ protocol: /^https$/, error: '"branding.logo_url" must be an https URL' })
        .max(2000)
        .optional(),
      accent: accent.optional(),
    })
    .optional(),
});

/** What {@link ConnectSessionBody} reads. */
export type ConnectSessionInput = z.input<typeof ConnectSessionBody>;

/** A session as it is kept. */
export const SessionEntrySchema = z.object({
  id: z.string(),
  /** SHA-256 of the secret, base64url. */
  secret_hash: z.string(),
  namespace: z.string(),
  /** The offered providers' ids; `null`: every provider the creator covered. */
  providers: z.array(z.string()).nullable(),
  end_user: z
    .object({ id: z.string(), name: z.string().optional(), email: z.string().optional() })
    .nullable(),
  redirect_uri: z.string().nullable(),
  verify: z.boolean(),
  allow_disconnect: z.boolean(),
  branding: z.object({
    name: z.string().optional(),
    logo_url: z.string().optional(),
    accent: z.string().optional(),
  }),
  /** Who created it (`root`, `token:<name>`), and the creator's scopes then. */
  created_by: z.string(),
  scopes: z.array(z.string()),
  created_at: z.number(),
  expires_at: z.number(),
  /** Ended by `DELETE` before its expiry. */
  revoked_at: z.number().nullable(),
  /** Authorizations the page started, by connection id: when. */
  started: z.record(z.string(), z.number()),
  /** Connections it completed (each told once, `connect_session.completed`): when. */
  completed: z.record(z.string(), z.number()),
});

export type SessionEntry = z.infer<typeof SessionEntrySchema>;

/**
 * A session as `GET /api/admin/connect-sessions` shows it: never its secret.
 *
 * @see [docs/api.md §19](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#19-connect-sessions-and-the-hosted-connect-page)
 */
export interface ConnectSessionView {
  id: string;
  namespace: string;
  providers: string[] | null;
  end_user: { id: string; name?: string; email?: string } | null;
  redirect_uri: string | null;
  verify: boolean;
  allow_disconnect: boolean;
  branding: { name?: string; logo_url?: string; accent?: string };
  created_by: string;
  created_at: string;
  expires_at: string;
  /** `active`, `expired`, or `revoked`. */
  status: 'active' | 'expired' | 'revoked';
  /** The connections the session completed. */
  completed: string[];
}

/** The answer of `POST /api/admin/connect-sessions`: the page's URL holds the secret, once. */
export interface CreatedConnectSession {
  id: string;
  /** `{base}/connect#<secret>`: the secret in the fragment, never sent to a server. */
  url: string;
  expires_at: string;
}
