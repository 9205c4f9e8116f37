import type { Scope } from './scope.js';

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
  /** Epoch milliseconds. */
  expiresAt: number;
  /** Epoch milliseconds. */
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
  /** Epoch milliseconds: records that expire at or before it are not live. */
  now: number;
}

/**
 * Broker-token storage. Adapters hold no policy: they store and fetch, and keep the
 * promises written on each method. `@keyway/storage-conformance` proves every promise.
 *
 * A token is *live* while `expiresAt > now`. A *tree* of name `N` is the live token named
 * `N` and every live token whose name starts with `N.`.
 */
export interface TokenStorage {
  /**
   * Inserts a token record unless a live token already has its name. An expired record with
   * the same name is replaced. Atomic: of concurrent inserts of one name, exactly one wins,
   * across every process sharing the storage.
   *
   * @returns `true` when inserted, `false` when the name is taken.
   */
  insertToken(record: TokenRecord, now: number): Promise<boolean>;

  /**
   * The record with this identifier hash, live or expired, or `null`. The hot path of every
   * authenticated request: one point read on the primary key.
   */
  findTokenByIdHash(idHash: string): Promise<TokenRecord | null>;

  /** The live token with this name, or `null`. */
  findLiveTokenByName(name: string, now: number): Promise<TokenRecord | null>;

  /** Live tokens ordered by name in code point order, served by an index on the name. */
  listLiveTokens(query: ListTokensQuery): Promise<TokenRecord[]>;

  /**
   * Reads the tree of `name` (its root first, then descendants in name order), passes it to
   * `plan`, and writes the changes `plan` returns, all in one transaction: no other writer
   * sees or interleaves with a half-applied tree, and if `plan` or a write throws nothing
   * is written. `plan` is a pure, synchronous function.
   *
   * @returns `false` (without calling `plan`) when no live token has this name.
   */
  updateTokenTree(
    name: string,
    now: number,
    plan: (tree: TokenRecord[]) => TokenTreeChanges,
  ): Promise<boolean>;

  /**
   * When a live token is named `name`, deletes every record named `name` or `name.…`, live
   * or expired, in one transaction, and answers `true`. Otherwise deletes nothing and
   * answers `false`.
   */
  deleteTokenTree(name: string, now: number): Promise<boolean>;
}

/** Everything a Keyway storage adapter provides. Grows with the record kinds of later issues. */
export interface Storage extends TokenStorage {
  /** Releases connections or handles. Optional. */
  close?(): Promise<void>;
}
