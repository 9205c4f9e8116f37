import { z } from 'zod';
import {
  type ConnectSessionBody,
  ConnectSessionViewBody,
  type ConnectStartBody,
} from '../contract/schemas.js';

/*
 * Connect sessions (docs/api.md §19): what an application asks for, and what is kept of a
 * session (sealed in the vault, as sign-in grants are).
 */

/** Default lifetime of a session, seconds. */
export const DEFAULT_EXPIRES_IN = 1800;

/** The vault kind of a session's entry; its key is the session id. */
export const SESSION_KIND = 'connect_session';

/** What `ConnectSessionBody` reads. */
export type ConnectSessionInput = z.input<typeof ConnectSessionBody>;

/** What `ConnectStartBody` reads: the page starts an offered provider's connection. */
export type ConnectStartInput = z.input<typeof ConnectStartBody>;

/** A session as it is kept. */
export const SessionEntrySchema = z.object({
  id: z.string(),
  /** SHA-256 of the secret, base64url. */
  secret_hash: z.string(),
  namespace: z.string(),
  /** The offered providers' ids; `null`: every provider the creator covered. */
  providers: z.array(z.string()).nullable(),
  end_user: ConnectSessionViewBody.shape.end_user,
  redirect_uri: z.string().nullable(),
  verify: z.boolean(),
  allow_disconnect: z.boolean(),
  branding: ConnectSessionViewBody.shape.branding,
  /** Who created it (`root`, `token:<name>`), and the creator's scopes then. */
  created_by: z.string(),
  /** The stored key of the creator's token (`null`: the root key): the session lives with it. */
  creator: z.string().nullable(),
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
