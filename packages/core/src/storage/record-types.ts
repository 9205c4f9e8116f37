import type { Scope } from '../auth/scope.js';
import type { ConnectionStatus, WebhookDeliveryStatus } from '../contract/codes.js';

/*
 * The records of the storage contract and the queries over them: what adapters store and
 * hand back. The promises on the methods that read and write them are in `contract.ts`.
 */

/** A JSON value, as adapters store it (in a JSON or text column). */
export type JsonValue =
  | string
  | number
  | boolean
  | null
  | JsonValue[]
  | { [key: string]: JsonValue };
/** A JSON object. */
export type JsonObject = { [key: string]: JsonValue };

/**
 * The `state` of a provider, connection or pending authorization: a JSON object whose shape
 * core owns. Adapters store it as JSON text and hand back what they read; core checks it
 * against its schema on every read.
 */
export type StoredState = { [key: string]: unknown };

// ─── Broker tokens ──────────────────────────────────────────────────────────────────────

/**
 * The stored record of a broker token. The token itself is never stored: only the SHA-256
 * of its random identifier, which is useless to someone who reads the database.
 */
export interface TokenRecord {
  /** Hex SHA-256 of the token's random identifier; the primary key. */
  idHash: string;
  /** Unique among live tokens; see docs/api.md §3.2. */
  name: string;
  /** Canonical scope set (docs/api.md §3.1). */
  scopes: Scope[];
  expiresAt: number;
  createdAt: number;
  /** `root` or `token:<name>` of the minting principal. */
  createdBy: string;
  /**
   * The one endpoint the token is accepted at (`mcp/<connection path>`, `portal/<prefix>`):
   * a token issued to an MCP client that signed in (docs/api.md §17). Absent for a token
   * every route takes; an adapter stores and answers it as written.
   */
  audience?: string;
  /**
   * Globs over the portal's tool names the token may list and call (docs/api.md §18);
   * absent for a token that any tool its policy allows is open to.
   */
  tools?: string[];
}

/**
 * What a token check reads of a {@link TokenRecord}: its name, scopes, expiry, audience and
 * tool globs (the `findTokenByIdHashSync` lookup answers these, or the whole record).
 */
export type TokenCheckRecord = Pick<
  TokenRecord,
  'name' | 'scopes' | 'expiresAt' | 'audience' | 'tools'
>;

/** The changes a token-tree update writes, all in one transaction. */
export interface TokenTreeChanges {
  /** Records to overwrite, matched by `idHash`. */
  update: TokenRecord[];
  /** `idHash` of records to delete. */
  delete: string[];
  /** The events that record this change, written in its transaction. */
  events?: EventWrite;
}

/** Options of {@link TokenStorage.listLiveTokens}. */
export interface ListTokensQuery {
  /** Only the token with this name and its descendants (`name.…`); all tokens when absent. */
  treeOf?: string;
  /** Only names strictly after this one in code point order (the cursor). */
  after?: string;
  /** At most this many records. */
  limit: number;
  /** Records that expire at or before this instant are not live. */
  now: number;
}

// ─── Resource-path records ──────────────────────────────────────────────────────────────

/** Options of the lists of records keyed by a resource path. */
export interface ListPathsQuery {
  /**
   * Only records in these subtrees: a root `p` selects `p` itself and every path that
   * starts with `p/`. Absent: every record. An empty array selects nothing.
   */
  within?: string[];
  /** Only keys strictly after this one in code point order (the cursor). */
  after?: string;
  /** At most this many records. */
  limit: number;
}

/** Where a vault entry lives: its kind (`secret` for the vault endpoints) and its key. */
export interface VaultKey {
  kind: string;
  key: string;
}

/** An encrypted vault entry to write. */
export interface VaultWrite extends VaultKey {
  /** The envelope: never the clear value. */
  ciphertext: string;
  /** Id of the key-ring key that encrypted it. */
  keyId: string;
}

/**
 * Vault changes that ride along with a provider or connection write, in the same
 * transaction: a record and its secrets are never out of step.
 */
export interface VaultChanges {
  /** Upserts: a new entry gets version 1, an existing one its version plus one. */
  put?: VaultWrite[];
  delete?: VaultKey[];
}

/**
 * A provider (docs/api.md §4). Core owns the shape of `state` (template configuration,
 * non-secret credential data, discovery and registration results); adapters store it as
 * JSON.
 */
export interface ProviderRecord {
  /** The provider identifier, a resource path; the primary key. */
  id: string;
  template: string;
  state: StoredState;
  /** Starts at 1 and grows by one with each write: the compare-and-set token. */
  version: number;
  createdAt: number;
  updatedAt: number;
}

/**
 * Connection status (docs/api.md §5).
 *
 * @see [docs/api.md §5](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#5-connections)
 */
export type { ConnectionStatus } from '../contract/codes.js';

/**
 * A connection (docs/api.md §5). Its OAuth tokens are a vault entry, never part of the record.
 * Core owns the shape of `state`.
 */
export interface ConnectionRecord {
  /** The connection identifier, a resource path; the primary key. */
  id: string;
  providerId: string;
  status: ConnectionStatus;
  state: StoredState;
  /** Starts at 1 and grows by one with each write: the compare-and-set token. */
  version: number;
  createdAt: number;
  updatedAt: number;
}

/**
 * What a connection's use reads, in one read (`StorageFastPaths.readWithTokens`): the
 * connection and its sealed tokens. The gateway, the API proxy and the probe read this much
 * on every call; the provider is not read.
 */
export interface TokensRead {
  connection: ConnectionRecord;
  /** The vault entry of the kind asked, keyed by the connection's id, or `null`. */
  vaultEntry: VaultEntryRecord | null;
}

/**
 * What a credential hand-out reads, in one read (`StorageFastPaths.readForHandOut`): the
 * connection, its sealed tokens, and the one member of its provider's state a hand-out
 * needs.
 */
export interface HandOutRead extends TokensRead {
  /**
   * The connection's provider: `null` when no provider has its `providerId`; otherwise
   * `handOut`, the `hand_out` member of the provider's `state` as JSON text (`'false'`,
   * `'true'`, or whatever else is stored there), `null` when the state has no such member.
   */
  provider: { handOut: string | null } | null;
}

/** Options of {@link ConnectionStorage.listConnections}. */
export interface ListConnectionsQuery extends ListPathsQuery {
  providerId?: string;
  status?: ConnectionStatus;
}

/**
 * An authorization in flight, between the authorize call and the callback. Found only by
 * the hash of its `state` parameter, and taken exactly once.
 */
export interface PendingAuthorizationRecord {
  /** Hex SHA-256 of the OAuth `state`; the primary key. */
  stateHash: string;
  connectionId: string;
  providerId: string;
  /** Core's data: the encrypted PKCE verifier, redirect target, scopes, issuer… */
  state: StoredState;
  expiresAt: number;
  createdAt: number;
}

/** A stored vault entry. */
export interface VaultEntryRecord extends VaultWrite {
  /** Starts at 1 and grows by one with each put. */
  version: number;
  createdAt: number;
  updatedAt: number;
}

/** Options of {@link VaultStorage.listVaultEntries}. */
export interface ListVaultQuery extends ListPathsQuery {
  kind: string;
}

// ─── Events: the audit log and the webhook outbox ───────────────────────────────────────

/**
 * One event of the audit log (docs/api.md §11), as stored. Its id orders the log: `evt_`, the
 * time as 12 hex digits, then randomness, so that newer events have greater ids.
 */
export interface AuditEventRecord {
  /** The primary key, and the order of the log (code point order). */
  id: string;
  type: string;
  time: number;
  /** `root`, `token:<name>` or `system`. */
  actor: string;
  /** `token` when `resource` is a broker token's name, `path` when it is a resource path. */
  resourceKind: 'token' | 'path';
  resource: string;
  /** What happened, never a secret. */
  data: JsonObject;
  /** When the retention ends and the purge may delete it. */
  expiresAt: number;
}

/**
 * The state of a webhook delivery: `pending` until an attempt is answered with a 2xx
 * (`delivered`) or the last attempt fails (`failed`).
 */
export type { WebhookDeliveryStatus } from '../contract/codes.js';

/** One event to deliver to one webhook endpoint: a row of the outbox. */
export interface WebhookDeliveryRecord {
  /** `dlv_…`; the primary key. */
  id: string;
  /** The event's id, sent as `webhook-id`: the same on every attempt. */
  eventId: string;
  /** The endpoint's URL. */
  url: string;
  /** The event as JSON: the exact body of every attempt. */
  body: string;
  status: WebhookDeliveryStatus;
  /** Attempts made so far. */
  attempts: number;
  /** When a `pending` delivery is next due. */
  nextAttemptAt: number;
  /** When the last attempt ended; 0 before the first. */
  lastAttemptAt: number;
  /** The HTTP status of the last attempt's answer; 0 when there was none. */
  lastStatus: number;
  /** Why the last attempt failed (`HTTP 500`, `timeout`…); empty when it did not. */
  lastError: string;
  /** The instance running an attempt now; empty when none. */
  leaseOwner: string;
  /** Until when `leaseOwner` holds the delivery; 0 when no one does. */
  leaseExpiresAt: number;
  createdAt: number;
  /** When the purge may delete it: never while `pending`, the retention after it ends. */
  expiresAt: number;
}

/**
 * Events and their deliveries, written with the change they record in one transaction: a
 * change is never without its record, nor a record without its change.
 */
export interface EventWrite {
  events: AuditEventRecord[];
  deliveries: WebhookDeliveryRecord[];
}

/** Options of {@link EventStorage.listAuditEvents}: newest first. */
export interface ListAuditQuery {
  /**
   * Path events (every event whose `resourceKind` is `path`) only in these subtrees: as
   * {@link ListPathsQuery.within}. Absent: every path event; empty: none.
   */
  within?: string[];
  /**
   * Token events: absent, every one; `null`, none; a name `N`, only those of the tokens
   * named `N.…` (N's descendants, not N).
   */
  tokensBelow?: string | null;
  type?: string;
  /** Only events with `time >= since`. */
  since?: number;
  /** Only ids strictly before this one in code point order (the cursor). */
  before?: string;
  limit: number;
}

/** Options of {@link EventStorage.listWebhookDeliveries}: ordered by id. */
export interface ListDeliveriesQuery {
  status?: WebhookDeliveryStatus;
  after?: string;
  limit: number;
}

/** What an attempt leaves on a delivery (its lease then ends). */
export type WebhookAttemptOutcome = Pick<
  WebhookDeliveryRecord,
  | 'status'
  | 'attempts'
  | 'nextAttemptAt'
  | 'lastAttemptAt'
  | 'lastStatus'
  | 'lastError'
  | 'expiresAt'
>;
