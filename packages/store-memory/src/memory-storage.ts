import {
  type ConnectionRecord,
  compareCodePoints,
  type HandOutRead,
  isInSubtree,
  type ListPathsQuery,
  type PendingAuthorizationRecord,
  type ProviderRecord,
  type Storage,
  type TokenRecord,
  type TokensRead,
  type VaultChanges,
  type VaultEntryRecord,
  type VaultWrite,
} from '@keyway/core/storage';
import { copy, memoryEventLog } from './memory-events.js';

/** Storage held in this process's memory. */
export interface MemoryStorage extends Storage {}

function isInTree(root: string, name: string): boolean {
  return name === root || (name.startsWith(root) && name.charCodeAt(root.length) === 0x2e);
}

/** A token record's copy, field by field: it is read on every authenticated request. */
const copyToken = (record: TokenRecord): TokenRecord => ({ ...record, scopes: [...record.scopes] });

/** The records of a path-keyed map that a list query selects, in code point order. */
function selectPaths<T>(map: Map<string, T>, query: ListPathsQuery, keep: (record: T) => boolean) {
  const { within, after, limit } = query;
  const keys = [...map.keys()]
    .filter((key) => within === undefined || within.some((root) => isInSubtree(root, key)))
    .filter((key) => after === undefined || compareCodePoints(key, after) > 0)
    .sort(compareCodePoints);
  const result: T[] = [];
  for (const key of keys) {
    const record = map.get(key) as T;
    if (!keep(record)) continue;
    result.push(copy(record));
    if (result.length >= limit) break;
  }
  return result;
}

/**
 * Storage in process memory: for unit tests, development and single-process deployments
 * that may lose everything on restart. Each method runs to completion without awaiting, so
 * on one event loop every operation is atomic. Records are copied in and out, so a caller
 * never holds a reference into the store.
 *
 * @example
 * import { createBroker } from '@keyway/core';
 * import { memoryStorage } from '@keyway/store-memory';
 * const broker = createBroker({ rootKey, storage: memoryStorage() });
 */
export function memoryStorage(): MemoryStorage {
  const tokens = new Map<string, TokenRecord>();
  /** name → idHashes of every record with that name (one live at most, plus expired ones). */
  const tokensByName = new Map<string, Set<string>>();
  const providers = new Map<string, ProviderRecord>();
  const connections = new Map<string, ConnectionRecord>();
  const pending = new Map<string, PendingAuthorizationRecord>();
  const vault = new Map<string, VaultEntryRecord>();
  const leases = new Map<string, { owner: string; expiresAt: number }>();
  const counters = new Map<string, { count: number; expiresAt: number }>();
  const log = memoryEventLog();
  const { auditEvents, deliveries } = log;
  const checkEvents = log.check;
  const writeEvents = log.write;

  const vaultId = (kind: string, key: string) => `${kind}\u0000${key}`;

  function putToken(record: TokenRecord): void {
    tokens.set(record.idHash, copy(record));
    const ids = tokensByName.get(record.name) ?? new Set<string>();
    ids.add(record.idHash);
    tokensByName.set(record.name, ids);
  }

  function removeToken(idHash: string): void {
    const record = tokens.get(idHash);
    if (record === undefined) return;
    tokens.delete(idHash);
    const ids = tokensByName.get(record.name);
    ids?.delete(idHash);
    if (ids?.size === 0) tokensByName.delete(record.name);
  }

  /** A connection and its vault entry at one instant (`readWithTokens`), copies. */
  function tokensRead(id: string, vaultKind: string): TokensRead | null {
    const record = connections.get(id);
    if (record === undefined) return null;
    const entry = vault.get(vaultId(vaultKind, id));
    return { connection: copy(record), vaultEntry: entry === undefined ? null : copy(entry) };
  }

  /** A hand-out's three reads at one instant (`readForHandOut`), copies. */
  function handOutRead(id: string, vaultKind: string): HandOutRead | null {
    const read = tokensRead(id, vaultKind);
    if (read === null) return null;
    const provider = providers.get(read.connection.providerId);
    const handOut = provider?.state.hand_out;
    return {
      connection: read.connection,
      vaultEntry: read.vaultEntry,
      provider:
        provider === undefined
          ? null
          : { handOut: handOut === undefined ? null : JSON.stringify(handOut) },
    };
  }

  function liveByName(name: string, now: number): TokenRecord | null {
    for (const id of tokensByName.get(name) ?? []) {
      const record = tokens.get(id);
      if (record !== undefined && record.expiresAt > now) return record;
    }
    return null;
  }

  function treeNames(root: string): string[] {
    return [...tokensByName.keys()].filter((name) => isInTree(root, name)).sort(compareCodePoints);
  }

  function putVault(write: VaultWrite, now: number) {
    const id = vaultId(write.kind, write.key);
    const existing = vault.get(id);
    const entry: VaultEntryRecord = {
      kind: write.kind,
      key: write.key,
      ciphertext: write.ciphertext,
      keyId: write.keyId,
      version: (existing?.version ?? 0) + 1,
      createdAt: existing?.createdAt ?? now,
      updatedAt: now,
    };
    vault.set(id, entry);
    return { entry: copy(entry), created: existing === undefined };
  }

  function applyVault(changes: VaultChanges | undefined, now: number): void {
    for (const write of changes?.put ?? []) putVault(write, now);
    for (const { kind, key } of changes?.delete ?? []) vault.delete(vaultId(kind, key));
  }

  return {
    // ─── tokens ───
    async insertToken(record, now, events) {
      if (liveByName(record.name, now) !== null) return false;
      checkEvents(events);
      writeEvents(events);
      for (const id of [...(tokensByName.get(record.name) ?? [])]) removeToken(id);
      putToken(record);
      return true;
    },

    async findTokenByIdHash(idHash) {
      const record = tokens.get(idHash);
      return record === undefined ? null : copyToken(record);
    },

    // Reads without I/O: the token check's synchronous lookup, and a hand-out's reads in one
    // (as a promise, and synchronously).
    fastPaths: {
      findTokenByIdHashSync(idHash: string) {
        const record = tokens.get(idHash);
        return record === undefined ? null : copyToken(record);
      },
      async readForHandOut(id: string, vaultKind: string) {
        return handOutRead(id, vaultKind);
      },
      readForHandOutSync(id: string, vaultKind: string) {
        return handOutRead(id, vaultKind);
      },
      async readWithTokens(id: string, vaultKind: string) {
        return tokensRead(id, vaultKind);
      },
      readWithTokensSync(id: string, vaultKind: string) {
        return tokensRead(id, vaultKind);
      },
    },

    async findLiveTokenByName(name, now) {
      const record = liveByName(name, now);
      return record === null ? null : copy(record);
    },

    async listLiveTokens({ treeOf, after, limit, now }) {
      const names =
        treeOf === undefined ? [...tokensByName.keys()].sort(compareCodePoints) : treeNames(treeOf);
      const result: TokenRecord[] = [];
      for (const name of names) {
        if (after !== undefined && compareCodePoints(name, after) <= 0) continue;
        const record = liveByName(name, now);
        if (record !== null) result.push(copy(record));
        if (result.length >= limit) break;
      }
      return result;
    },

    async updateTokenTree(name, now, plan) {
      if (liveByName(name, now) === null) return false;
      const tree = treeNames(name)
        .map((treeName) => liveByName(treeName, now))
        .filter((record): record is TokenRecord => record !== null)
        .map(copy);
      // plan may throw: nothing has been written yet. Every write is checked before the
      // first is made, so the writes below cannot fail half-way.
      const changes = plan(tree);
      checkEvents(changes.events);
      for (const record of changes.update) {
        for (const id of tokensByName.get(record.name) ?? []) {
          if (id !== record.idHash) throw new Error(`token name "${record.name}" is taken`);
        }
      }
      for (const record of changes.update) {
        if (tokens.has(record.idHash)) {
          removeToken(record.idHash);
          putToken(record);
        }
      }
      for (const idHash of changes.delete) removeToken(idHash);
      writeEvents(changes.events);
      return true;
    },

    async deleteTokenTree(name, now, events) {
      if (liveByName(name, now) === null) return false;
      checkEvents(events);
      writeEvents(events);
      for (const treeName of treeNames(name)) {
        for (const id of [...(tokensByName.get(treeName) ?? [])]) removeToken(id);
      }
      return true;
    },

    // ─── providers ───
    async getProvider(id) {
      const record = providers.get(id);
      return record === undefined ? null : copy(record);
    },

    async listProviders(query) {
      return selectPaths(providers, query, () => true);
    },

    async insertProvider(record, changes, events) {
      if (providers.has(record.id)) return false;
      checkEvents(events);
      writeEvents(events);
      providers.set(record.id, copy(record));
      applyVault(changes, record.updatedAt);
      return true;
    },

    async compareAndSetProvider(record, expectedVersion, changes, events) {
      if (providers.get(record.id)?.version !== expectedVersion) return false;
      checkEvents(events);
      writeEvents(events);
      providers.set(record.id, copy(record));
      applyVault(changes, record.updatedAt);
      return true;
    },

    async deleteProvider(id, vaultDeletes, events) {
      if (!providers.has(id)) return 'not_found';
      for (const connection of connections.values()) {
        if (connection.providerId === id) return 'in_use';
      }
      checkEvents(events);
      writeEvents(events);
      providers.delete(id);
      for (const { kind, key } of vaultDeletes ?? []) vault.delete(vaultId(kind, key));
      return 'deleted';
    },

    // ─── connections ───
    async getConnection(id) {
      const record = connections.get(id);
      return record === undefined ? null : copy(record);
    },

    async listConnections(query) {
      return selectPaths(
        connections,
        query,
        (record) =>
          (query.providerId === undefined || record.providerId === query.providerId) &&
          (query.status === undefined || record.status === query.status),
      );
    },

    async insertConnection(record, changes, events) {
      if (connections.has(record.id)) return false;
      checkEvents(events);
      writeEvents(events);
      connections.set(record.id, copy(record));
      applyVault(changes, record.updatedAt);
      return true;
    },

    async compareAndSetConnection(record, expectedVersion, changes, events) {
      if (connections.get(record.id)?.version !== expectedVersion) return false;
      checkEvents(events);
      writeEvents(events);
      connections.set(record.id, copy(record));
      applyVault(changes, record.updatedAt);
      return true;
    },

    async deleteConnection(id, vaultDeletes, events) {
      if (connections.has(id)) checkEvents(events);
      for (const { kind, key } of vaultDeletes ?? []) vault.delete(vaultId(kind, key));
      const existed = connections.delete(id);
      if (existed) writeEvents(events);
      return existed;
    },

    // ─── pending authorizations ───
    async insertPendingAuthorization(record) {
      if (pending.has(record.stateHash)) {
        throw new Error('a pending authorization with this state hash exists already');
      }
      pending.set(record.stateHash, copy(record));
    },

    async takePendingAuthorization(stateHash, now) {
      const record = pending.get(stateHash);
      if (record === undefined || record.expiresAt <= now) return null;
      pending.delete(stateHash);
      return record;
    },

    // ─── vault ───
    async getVaultEntry(kind, key) {
      const entry = vault.get(vaultId(kind, key));
      return entry === undefined ? null : copy(entry);
    },

    async putVaultEntry(write, now, events) {
      const written = events?.(!vault.has(vaultId(write.kind, write.key)));
      checkEvents(written);
      const result = putVault(write, now);
      writeEvents(written);
      return result;
    },

    async deleteVaultEntry(kind, key, events) {
      if (!vault.has(vaultId(kind, key))) return false;
      checkEvents(events);
      writeEvents(events);
      return vault.delete(vaultId(kind, key));
    },

    async listVaultEntries({ kind, ...query }) {
      const ofKind = new Map<string, VaultEntryRecord>();
      for (const entry of vault.values()) if (entry.kind === kind) ofKind.set(entry.key, entry);
      return selectPaths(ofKind, query, () => true);
    },

    async listVaultEntriesNotUnderKey(keyId, after, limit) {
      return [...vault.values()]
        .filter((entry) => entry.keyId !== keyId)
        .sort((a, b) => compareCodePoints(a.kind, b.kind) || compareCodePoints(a.key, b.key))
        .filter(
          (entry) =>
            after === null ||
            compareCodePoints(entry.kind, after.kind) > 0 ||
            (entry.kind === after.kind && compareCodePoints(entry.key, after.key) > 0),
        )
        .slice(0, limit)
        .map(copy);
    },

    async replaceVaultCiphertext(kind, key, expected, next) {
      const entry = vault.get(vaultId(kind, key));
      if (entry === undefined || entry.ciphertext !== expected) return false;
      vault.set(vaultId(kind, key), { ...entry, ciphertext: next.ciphertext, keyId: next.keyId });
      return true;
    },

    // ─── leases ───
    async acquireLease(key, owner, expiresAt, now) {
      const lease = leases.get(key);
      if (lease !== undefined && lease.expiresAt > now && lease.owner !== owner) return false;
      leases.set(key, { owner, expiresAt });
      return true;
    },

    async releaseLease(key, owner) {
      if (leases.get(key)?.owner === owner) leases.delete(key);
    },

    // ─── counters ───
    async incrementCounter(key, expiresAt, now) {
      const live = counters.get(key);
      const next =
        live === undefined || live.expiresAt <= now
          ? { count: 1, expiresAt }
          : { count: live.count + 1, expiresAt: live.expiresAt };
      counters.set(key, next);
      return { ...next };
    },

    async getCounter(key, now) {
      const live = counters.get(key);
      return live === undefined || live.expiresAt <= now ? null : { ...live };
    },

    ...log.methods,

    // ─── maintenance ───
    async health() {
      return { engine: 'memory', schema: null };
    },

    async purgeExpired(now, limit) {
      let removed = 0;
      const expiredTokens = [...tokens.values()].filter((t) => t.expiresAt <= now).slice(0, limit);
      for (const record of expiredTokens) removeToken(record.idHash);
      removed += expiredTokens.length;
      const expiredPending = [...pending.values()]
        .filter((p) => p.expiresAt <= now)
        .slice(0, limit);
      for (const record of expiredPending) pending.delete(record.stateHash);
      removed += expiredPending.length;
      const expiredLeases = [...leases].filter(([, l]) => l.expiresAt <= now).slice(0, limit);
      for (const [key] of expiredLeases) leases.delete(key);
      const expiredCounters = [...counters].filter(([, c]) => c.expiresAt <= now).slice(0, limit);
      for (const [key] of expiredCounters) counters.delete(key);
      removed += expiredLeases.length + expiredCounters.length;
      for (const map of [auditEvents, deliveries] as Map<string, { expiresAt: number }>[]) {
        const expired = [...map].filter(([, r]) => r.expiresAt <= now).slice(0, limit);
        for (const [id] of expired) map.delete(id);
        removed += expired.length;
      }
      return removed;
    },

    async close() {},
  };
}
