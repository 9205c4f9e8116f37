import type { Scope } from '../scope.js';

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
  /** Unique among live tokens; see API.md §3.2. */
  name: string;
  /** Canonical scope set (API.md §3.1). */
  scopes: Scope[];
  expiresAt: number;
  createdAt: number;
  /** `root` or `token:<name>` of the minting principal. */
  createdBy: string;
}

/** The changes a token-tree update writes, all in one transaction. */
export interface TokenTreeChanges {
  /** Records to overwrite, matched by `idHash`. */
  update: TokenRecord[];
  /** `idHash` of records to delete. */
  delete: string[];
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
 * A provider (API.md §4). Core owns the shape of `state` (template configuration,
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
 * Connection status (API.md §5).
 *
 * @see API.md §5
 */
export type ConnectionStatus = 'pending' | 'active' | 'error';

/**
 * A connection (API.md §5). Its OAuth tokens are a vault entry, never part of the record.
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
