import type { CounterStorage } from '../auth/rate-limit.js';
import type {
  AuditEventRecord,
  ConnectionRecord,
  EventWrite,
  HandOutRead,
  ListAuditQuery,
  ListConnectionsQuery,
  ListDeliveriesQuery,
  ListPathsQuery,
  ListTokensQuery,
  ListVaultQuery,
  PendingAuthorizationRecord,
  ProviderRecord,
  TokenCheckRecord,
  TokenRecord,
  TokensRead,
  TokenTreeChanges,
  VaultChanges,
  VaultEntryRecord,
  VaultKey,
  VaultWrite,
  WebhookAttemptOutcome,
  WebhookDeliveryRecord,
} from './record-types.js';

export * from './record-types.js';

/**
 * The storage interface every Keyway adapter implements (memory, SQLite, PostgreSQL).
 *
 * Adapters hold no policy: they store and fetch records and keep the promises written on
 * each method. `@keyway/storage-conformance` proves every promise against a real engine.
 * Conventions:
 *
 * - times are epoch milliseconds (`number`);
 * - a missing record is `null`; a driver failure throws;
 * - a record a method returns is the caller's copy: changing it changes nothing stored;
 * - every list is ordered by its key in Unicode code point order (UTF-8 byte order, SQL
 *   `COLLATE "C"` / `BINARY`), is served by an index, and pages with `after` (exclusive)
 *   and `limit`;
 * - secrets never reach an adapter in clear: the vault encrypts before storage sees them;
 * - a write that takes `events` ({@link EventWrite}) appends them in its own transaction,
 *   only when it changes something (an insert that finds the key taken, a compare-and-set
 *   that finds another version, a delete of nothing write no event); if appending fails,
 *   nothing is written.
 */

/**
 * Broker-token storage. A token is *live* while `expiresAt > now`. The *tree* of name `N`
 * is the live token named `N` and every live token whose name starts with `N.`.
 */
export interface TokenStorage {
  /**
   * Inserts a token record unless a live token already has its name. An expired record with
   * the same name is replaced. Atomic: of concurrent inserts of one name, exactly one wins,
   * across every process sharing the storage.
   *
   * @returns `true` when inserted, `false` when the name is taken.
   */
  insertToken(record: TokenRecord, now: number, events?: EventWrite): Promise<boolean>;

  /**
   * The record with this identifier hash, live or expired, or `null`. The hot path of every
   * authenticated request: one point read on the primary key.
   */
  findTokenByIdHash(idHash: string): Promise<TokenRecord | null>;

  /** The live token with this name, or `null`. */
  findLiveTokenByName(name: string, now: number): Promise<TokenRecord | null>;

  /** Live tokens ordered by name, served by an index on the name. */
  listLiveTokens(query: ListTokensQuery): Promise<TokenRecord[]>;

  /**
   * Reads the tree of `name` (its root first, then descendants in name order), passes it to
   * `plan`, and writes the changes `plan` returns, all in one transaction: no other writer
   * interleaves with a half-applied tree, and if `plan` or a write throws nothing is
   * written. `plan` is a pure, synchronous function; the events it returns are written
   * with the changes.
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
  deleteTokenTree(name: string, now: number, events?: EventWrite): Promise<boolean>;
}

/** Provider storage. */
export interface ProviderStorage {
  /** The provider with this id, or `null`. One point read. */
  getProvider(id: string): Promise<ProviderRecord | null>;

  /** Providers ordered by id. */
  listProviders(query: ListPathsQuery): Promise<ProviderRecord[]>;

  /**
   * Inserts a provider (and its vault changes) unless one has its id. Atomic: of concurrent
   * inserts of one id exactly one wins.
   *
   * @returns `false`, writing nothing, when the id is taken.
   */
  insertProvider(
    record: ProviderRecord,
    vault?: VaultChanges,
    events?: EventWrite,
  ): Promise<boolean>;

  /**
   * Replaces a provider (and applies its vault changes) only while its stored version is
   * `expectedVersion`; `record.version` is written as given. All or nothing.
   *
   * @returns `false`, writing nothing, when the version differs or the provider is gone.
   */
  compareAndSetProvider(
    record: ProviderRecord,
    expectedVersion: number,
    vault?: VaultChanges,
    events?: EventWrite,
  ): Promise<boolean>;

  /**
   * Deletes a provider, and the vault entries named, unless a connection still refers to
   * it, in one transaction.
   */
  deleteProvider(
    id: string,
    vaultDeletes?: VaultKey[],
    events?: EventWrite,
  ): Promise<'deleted' | 'not_found' | 'in_use'>;
}

/** Connection storage. */
export interface ConnectionStorage {
  /** The connection with this id, or `null`. One point read. */
  getConnection(id: string): Promise<ConnectionRecord | null>;

  /** Connections ordered by id, optionally of one provider and one status. */
  listConnections(query: ListConnectionsQuery): Promise<ConnectionRecord[]>;

  /**
   * Inserts a connection (and its vault changes) unless one has its id. Atomic.
   *
   * @returns `false`, writing nothing, when the id is taken.
   */
  insertConnection(
    record: ConnectionRecord,
    vault?: VaultChanges,
    events?: EventWrite,
  ): Promise<boolean>;

  /**
   * Replaces a connection (and applies its vault changes) only while its stored version is
   * `expectedVersion`, so two writers never silently overwrite each other. All or nothing.
   *
   * @returns `false`, writing nothing, when the version differs or the connection is gone.
   */
  compareAndSetConnection(
    record: ConnectionRecord,
    expectedVersion: number,
    vault?: VaultChanges,
    events?: EventWrite,
  ): Promise<boolean>;

  /**
   * Deletes a connection, and the vault entries named, in one transaction.
   *
   * @returns whether the connection existed (the vault entries go either way; the events
   * only when it existed).
   */
  deleteConnection(id: string, vaultDeletes?: VaultKey[], events?: EventWrite): Promise<boolean>;
}

/** Pending-authorization storage. */
export interface PendingAuthorizationStorage {
  /** Stores a pending authorization. A state hash that exists already is a driver error. */
  insertPendingAuthorization(record: PendingAuthorizationRecord): Promise<void>;

  /**
   * Removes and returns the pending authorization with this state hash, if it has not
   * expired (`expiresAt > now`). Atomic: of any number of concurrent calls, from any number
   * of processes, exactly one gets the record; every other call, and every later one, gets
   * `null`. An expired record is never returned.
   */
  takePendingAuthorization(
    stateHash: string,
    now: number,
  ): Promise<PendingAuthorizationRecord | null>;
}

/** Vault storage: ciphertext only. */
export interface VaultStorage {
  /** The entry, or `null`. One point read. */
  getVaultEntry(kind: string, key: string): Promise<VaultEntryRecord | null>;

  /**
   * Creates the entry with version 1, or replaces its ciphertext and adds one to its
   * version. Atomic: concurrent puts each get a distinct version. `events`, given whether
   * the entry was created, names the events to write in the same transaction.
   *
   * @returns the stored entry and whether it was created.
   */
  putVaultEntry(
    write: VaultWrite,
    now: number,
    events?: (created: boolean) => EventWrite,
  ): Promise<{ entry: VaultEntryRecord; created: boolean }>;

  /** Deletes the entry (and writes `events` when it existed). @returns whether it existed. */
  deleteVaultEntry(kind: string, key: string, events?: EventWrite): Promise<boolean>;

  /** Entries of one kind ordered by key. */
  listVaultEntries(query: ListVaultQuery): Promise<VaultEntryRecord[]>;

  /**
   * Entries of every kind whose `keyId` is not `keyId`, ordered by (kind, key), after the
   * given position: what a re-wrap onto the active key still has to do.
   */
  listVaultEntriesNotUnderKey(
    keyId: string,
    after: VaultKey | null,
    limit: number,
  ): Promise<VaultEntryRecord[]>;

  /**
   * Replaces an entry's ciphertext and key id while its ciphertext is still `expected`,
   * keeping its version and times (a re-wrap changes no value).
   *
   * @returns `false`, writing nothing, when the entry changed or is gone.
   */
  replaceVaultCiphertext(
    kind: string,
    key: string,
    expected: string,
    next: { ciphertext: string; keyId: string },
  ): Promise<boolean>;
}

/** Leases: one holder at a time per key, across every process sharing the storage. */
export interface LeaseStorage {
  /**
   * Takes the lease on `key` for `owner` until `expiresAt` when it is free, expired
   * (`expiresAt <= now`), or already held by `owner` (which extends it). Atomic: of
   * concurrent callers for a free lease exactly one gets it.
   *
   * @returns whether `owner` holds the lease now.
   */
  acquireLease(key: string, owner: string, expiresAt: number, now: number): Promise<boolean>;

  /** Releases the lease if `owner` holds it; otherwise does nothing. */
  releaseLease(key: string, owner: string): Promise<void>;
}

export type { CounterStorage, CounterValue } from '../auth/rate-limit.js';

/**
 * The audit log and the webhook outbox (docs/api.md §11). Events are appended by the writes
 * they record (their `events` argument) or, for what changes nothing (a secret read, a
 * credential hand-out), by {@link EventStorage.appendEvents}.
 */
export interface EventStorage {
  /** Appends events and their deliveries in one transaction. An id that exists throws. */
  appendEvents(events: EventWrite): Promise<void>;

  /** Events newest first (descending id), as the query selects. */
  listAuditEvents(query: ListAuditQuery): Promise<AuditEventRecord[]>;

  /**
   * Leases up to `limit` due deliveries to `owner` until `leaseExpiresAt`: `pending` ones
   * whose `nextAttemptAt <= now` and whose lease has ended (`leaseExpiresAt <= now`), the
   * earliest due first. Atomic: across every process sharing the storage, a delivery is
   * leased to one owner at a time (on PostgreSQL `FOR UPDATE SKIP LOCKED`).
   *
   * @returns the leased deliveries, as stored after the lease.
   */
  claimWebhookDeliveries(
    owner: string,
    leaseExpiresAt: number,
    now: number,
    limit: number,
  ): Promise<WebhookDeliveryRecord[]>;

  /**
   * Records an attempt's outcome and ends the lease, only while `owner` holds it.
   *
   * @returns `false`, writing nothing, when `owner` no longer holds the lease.
   */
  finishWebhookAttempt(id: string, owner: string, outcome: WebhookAttemptOutcome): Promise<boolean>;

  /** Deliveries ordered by id, optionally of one status. */
  listWebhookDeliveries(query: ListDeliveriesQuery): Promise<WebhookDeliveryRecord[]>;
}

/** Housekeeping. */
export interface MaintenanceStorage {
  /**
   * Deletes up to `limit` expired records of each purgeable kind (broker tokens, pending
   * authorizations, leases, counters, audit events, webhook deliveries), in short transactions that never hold locks a request waits
   * on for long.
   *
   * @returns how many records were deleted.
   */
  purgeExpired(now: number, limit: number): Promise<number>;
  /**
   * What the storage says of itself, after one query to the store: a readiness probe
   * calls it. Throws when the store cannot answer.
   */
  health(): Promise<StorageHealth>;
}

/**
 * A storage's engine and, where it keeps a schema, the version it holds and the one this
 * code needs: a storage is ready when `version >= expected`.
 *
 * @see [docs/api.md §16](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#16-health-metrics-logs-shutdown)
 */
export interface StorageHealth {
  /** `memory`, `sqlite`, `postgres`, or another adapter's own name. */
  engine: string;
  /** `null` for a storage without a schema (memory). */
  schema: { version: number; expected: number } | null;
}

/**
 * The fast paths a storage may offer beside {@link Storage}'s methods, declared in its
 * `fastPaths` (a capability, never found by probing the storage's own methods): each answers
 * exactly what the methods it stands for answer, more cheaply. Core uses one where the
 * storage declares it, and the plain methods otherwise; the conformance suite holds each
 * declared one to the methods it stands for.
 */
export interface StorageFastPaths {
  /**
   * The token check's lookup, answered synchronously, for a storage that reads
   * without waiting on I/O (memory, SQLite). The token check then runs without an `await`
   * between the request and its answer. Answers, of the record {@link TokenStorage.findTokenByIdHash}
   * would answer, the fields a check reads — `name`, `scopes`, `expiresAt` — or `null`
   * exactly when it would; the whole record may be returned. Reading only those columns is
   * what makes it cheaper than the whole row on every authenticated request.
   */
  findTokenByIdHashSync?(idHash: string): TokenCheckRecord | null;

  /**
   * The same lookup for a storage that waits on I/O (PostgreSQL): what
   * {@link StorageFastPaths.findTokenByIdHashSync} answers, as a promise. Core uses the synchronous one where
   * there is one, this one otherwise, and {@link TokenStorage.findTokenByIdHash} without either.
   */
  findTokenCheckByIdHash?(idHash: string): Promise<TokenCheckRecord | null>;

  /**
   * A credential hand-out's reads in one, for a storage that can join them (SQL:
   * one statement, one read transaction, instead of three point reads, and no decoding of
   * the provider's whole state for its one member). Answers `null` exactly when
   * {@link ConnectionStorage.getConnection} would; otherwise the connection, `getVaultEntry(vaultKind, id)`,
   * and the `hand_out` member of `getProvider(connection.providerId)`'s state, as those
   * would answer them at one instant. Copies, like every record returned.
   */
  readForHandOut?(id: string, vaultKind: string): Promise<HandOutRead | null>;

  /**
   * {@link StorageFastPaths.readForHandOut} answered synchronously, for a storage that reads
   * without waiting on I/O (memory, SQLite): exactly what it would answer. The gateway, the
   * API proxy and the probe then reach a connection's opened tokens without an `await`.
   */
  readForHandOutSync?(id: string, vaultKind: string): HandOutRead | null;

  /**
   * A connection and its vault entry of `vaultKind` in one read: what
   * {@link StorageFastPaths.readForHandOut} answers without the provider, for the reads that
   * use a connection's tokens and never hand them out (the gateway, the API proxy, the probe;
   * on every call). Answers `null` exactly when {@link ConnectionStorage.getConnection} would;
   * otherwise the connection and `getVaultEntry(vaultKind, id)` as those would answer them at
   * one instant. Copies. Cheaper than `readForHandOut` where a provider's state is large
   * (discovery documents, registrations): it is not read at all.
   */
  readWithTokens?(id: string, vaultKind: string): Promise<TokensRead | null>;

  /**
   * {@link StorageFastPaths.readWithTokens} answered synchronously, for a storage that reads
   * without waiting on I/O (memory, SQLite): exactly what it would answer.
   */
  readWithTokensSync?(id: string, vaultKind: string): TokensRead | null;
}

/**
 * Everything a Keyway storage adapter provides.
 *
 * @see docs/storage.md; `@keyway/core/storage`
 */
export interface Storage
  extends TokenStorage,
    ProviderStorage,
    ConnectionStorage,
    PendingAuthorizationStorage,
    VaultStorage,
    LeaseStorage,
    CounterStorage,
    EventStorage,
    MaintenanceStorage {
  /** Releases connections or handles. */
  close(): Promise<void>;
  /** The fast paths this storage offers, if any (see {@link StorageFastPaths}). */
  readonly fastPaths?: StorageFastPaths;
}

/** The names of {@link Storage}'s methods, each required: what an adapter must have. */
type StorageMethod = {
  [K in keyof Storage]-?: undefined extends Storage[K]
    ? never
    : Storage[K] extends (...args: never[]) => unknown
      ? K
      : never;
}[keyof Storage];

/**
 * Every method of {@link Storage}, for validating an adapter passed in from JavaScript:
 * derived from the type (a record whose keys the compiler holds to exactly the methods, so
 * neither can gain one the other lacks).
 */
const METHODS: { readonly [K in StorageMethod]: true } = {
  insertToken: true,
  findTokenByIdHash: true,
  findLiveTokenByName: true,
  listLiveTokens: true,
  updateTokenTree: true,
  deleteTokenTree: true,
  getProvider: true,
  listProviders: true,
  insertProvider: true,
  compareAndSetProvider: true,
  deleteProvider: true,
  getConnection: true,
  listConnections: true,
  insertConnection: true,
  compareAndSetConnection: true,
  deleteConnection: true,
  insertPendingAuthorization: true,
  takePendingAuthorization: true,
  getVaultEntry: true,
  putVaultEntry: true,
  deleteVaultEntry: true,
  listVaultEntries: true,
  listVaultEntriesNotUnderKey: true,
  replaceVaultCiphertext: true,
  acquireLease: true,
  releaseLease: true,
  incrementCounter: true,
  getCounter: true,
  appendEvents: true,
  listAuditEvents: true,
  claimWebhookDeliveries: true,
  finishWebhookAttempt: true,
  listWebhookDeliveries: true,
  purgeExpired: true,
  health: true,
  close: true,
};

/** The methods of {@link Storage}, as names. */
export const STORAGE_METHODS = Object.keys(METHODS) as readonly StorageMethod[];

/**
 * Whether `path` lies in the subtree rooted at `root` (`root` itself or below it). The
 * reference semantics of {@link ListPathsQuery.within}; SQL adapters express it as
 * `id = root OR (id >= root || '/' AND id < root || '0')` (`'0'` follows `'/'`).
 */
export function isInSubtree(root: string, path: string): boolean {
  return path === root || (path.startsWith(root) && path.charCodeAt(root.length) === 0x2f);
}
