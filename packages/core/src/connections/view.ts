import { type ConnectionFailure, connectionFailure } from '../contract/connection-failure.js';
import { isoTime, isoTimeOrNull } from '../contract/time.js';
import { setBounded } from '../platform/bounded.js';
import type { ConnectionStatus } from '../storage/contract.js';
import type { ConnectionRecord } from '../storage/record-types.js';
import {
  type ConnectionState,
  connectionState,
  GrantedScopesSchema,
  readStored,
} from '../storage/states.js';

/*
 * A connection as the API shows it (API.md §5 "Connection view"), and the failures it
 * records.
 */

/** {@link ConnectionView.token_response}: a token response described, never a token. */
export interface TokenResponseView {
  received_at: string;
  grant_type: string;
  token_type: string;
  expires_in: number | null;
  scope: string | null;
  refresh_token: 'present' | 'absent';
  /** The refresh token's lifetime in seconds, where the server said. */
  refresh_token_expires_in?: number;
  fields: string[];
}

/**
 * A connection as the API shows it (API.md §5): never a token.
 *
 * @see API.md §5 "Connection view"
 */
export interface ConnectionView {
  connection_id: string;
  provider_id: string;
  status: ConnectionStatus;
  scopes: string[];
  /**
   * Whether a refresh token is held. `false`: the server gave none, and the connection
   * needs a new consent when its access token expires (its `error` says so then).
   */
  refreshable: boolean;
  /** How the connection obtains its tokens (API.md §5). */
  grant: 'authorization_code' | 'client_credentials' | 'jwt_bearer' | 'enterprise';
  /**
   * What an `oauth2` provider's profile keeps from the authorization (docs/api.md §15):
   * Salesforce's `instance_url`, QuickBooks' `realmId`, Slack's `team_id`. Never a secret;
   * `{}` when none.
   */
  metadata: Record<string, string>;
  /**
   * The last token response without its tokens (the inspector's OAuth debugger): whether a
   * refresh token came, what `expires_in` and `scope` said, every field by name. `null`
   * before the first one, and for connections authorized before it was kept.
   */
  token_response: TokenResponseView | null;
  /**
   * The account the server said the connection is for (its ID token's `email`,
   * `preferred_username` or `name`), a label for people; `null` when it said none.
   */
  account: string | null;
  token_expires_at: string | null;
  created_at: string;
  updated_at: string;
  authorized_at: string | null;
  last_refreshed_at: string | null;
  error: ConnectionFailure | null;
  /** The name the portal gives its tools, as set (docs/api.md §18); `null`: its last segment. */
  alias: string | null;
  /** The portal's tool policy (docs/api.md §18); `null`: every tool. */
  tools: ConnectionToolPolicy | null;
}

/**
 * Which of a connection's tools the portal lists and calls (docs/api.md §18): globs over
 * the tools' names at the server, `read_only` for those annotated `readOnlyHint: true` only.
 */
export interface ConnectionToolPolicy {
  allow?: string[];
  deny?: string[];
  read_only?: boolean;
}

/** The scopes granted to a connection, read and validated alone (a hand-out's fallback). */
export function grantedScopes(record: ConnectionRecord): string[] {
  return readStored(GrantedScopesSchema, record.state, `state of connection ${record.id}`).scopes;
}

/** The error an active connection without a refresh token shows once its token expired. */
export function expiredWithoutRefresh(expiredAt: number): ConnectionFailure {
  return {
    code: 'token_expired',
    description:
      `the access token expired at ${isoTime(expiredAt)} and the authorization server gave no refresh ` +
      `token: a new consent is needed (authorize again)`,
  };
}

/**
 * A connection as the API shows it, at `now` (epoch ms): an active connection whose access
 * token expired without a refresh token shows why it cannot be used.
 */
export function connectionView(record: ConnectionRecord, now: number): ConnectionView {
  return viewOf(record, connectionState(record), now);
}

/**
 * When the view of an active connection without a refresh token changes by time alone:
 * once its access token has expired it shows `token_expired` (`null`: never by time).
 */
function expiresUnrefreshed(record: ConnectionRecord, state: ConnectionState): number | null {
  return record.status === 'active' && state.error === null && state.refreshable === false
    ? state.token_expires_at
    : null;
}

function viewOf(record: ConnectionRecord, state: ConnectionState, now: number): ConnectionView {
  const expires = expiresUnrefreshed(record, state);
  const stuck = expires !== null && expires <= now;
  return {
    connection_id: record.id,
    provider_id: record.providerId,
    status: record.status,
    scopes: state.scopes,
    refreshable: state.refreshable === true,
    grant: state.grant ?? 'authorization_code',
    metadata: { ...state.metadata },
    token_response:
      state.token_response === undefined
        ? null
        : { ...state.token_response, received_at: isoTime(state.token_response.received_at) },
    account: state.account ?? null,
    token_expires_at: isoTimeOrNull(state.token_expires_at),
    created_at: isoTime(record.createdAt),
    updated_at: isoTime(record.updatedAt),
    authorized_at: isoTimeOrNull(state.authorized_at),
    last_refreshed_at: isoTimeOrNull(state.last_refreshed_at),
    error:
      state.error !== null
        ? connectionFailure(state.error)
        : stuck
          ? expiredWithoutRefresh(expires)
          : null,
    alias: state.alias ?? null,
    tools: state.tools === undefined ? null : { ...state.tools },
  };
}

/** How many connections' views a broker keeps as JSON ({@link ConnectionViewCache}). */
const VIEW_LIMIT = 1_000;

/** A view as JSON, and the record it was made of. */
interface MadeView {
  version: number;
  createdAt: number;
  updatedAt: number;
  incarnation: unknown;
  /** When time alone changes it (epoch ms; `Infinity`: never). */
  until: number;
  json: string;
}

/**
 * Connections' views as JSON (what `GET /api/oauth/connections/<path>` answers), each made
 * once per stored record and served again while the record read is the same one: the same
 * `version`, times and incarnation (a connection deleted and created again is another). A
 * view that time alone changes (a token expiring without a refresh token) is made again
 * from then on. Every write of a connection gives it a new version, so a view is never
 * older than the record read with it; at most {@link VIEW_LIMIT} are kept, the oldest
 * dropped first.
 */
export class ConnectionViewCache {
  readonly #made = new Map<string, MadeView>();

  /** The view of `record` at `now`, as JSON. */
  json(record: ConnectionRecord, now: number): string {
    const incarnation = (record.state as { incarnation?: unknown }).incarnation;
    const made = this.#made.get(record.id);
    if (
      made !== undefined &&
      made.version === record.version &&
      made.updatedAt === record.updatedAt &&
      made.createdAt === record.createdAt &&
      made.incarnation === incarnation &&
      now < made.until
    ) {
      return made.json;
    }
    const state = connectionState(record);
    const json = JSON.stringify(viewOf(record, state, now));
    const expires = expiresUnrefreshed(record, state);
    setBounded(
      this.#made,
      record.id,
      {
        version: record.version,
        createdAt: record.createdAt,
        updatedAt: record.updatedAt,
        incarnation,
        until: expires !== null && expires > now ? expires : Number.POSITIVE_INFINITY,
        json,
      },
      VIEW_LIMIT,
    );
    return json;
  }
}
