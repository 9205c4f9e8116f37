import {
  compareCodePoints,
  type ListTokensQuery,
  type Storage,
  type TokenRecord,
  type TokenTreeChanges,
} from '@keyway/core';

/** Storage held in this process's memory. */
export interface MemoryStorage extends Storage {}

function isInTree(root: string, name: string): boolean {
  return name === root || (name.startsWith(root) && name.charCodeAt(root.length) === 0x2e);
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

  const copy = (record: TokenRecord): TokenRecord => ({ ...record, scopes: [...record.scopes] });

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

  return {
    async insertToken(record, now) {
      if (liveByName(record.name, now) !== null) return false;
      for (const id of [...(tokensByName.get(record.name) ?? [])]) removeToken(id);
      putToken(record);
      return true;
    },

    async findTokenByIdHash(idHash) {
      const record = tokens.get(idHash);
      return record === undefined ? null : copy(record);
    },

    async findLiveTokenByName(name, now) {
      const record = liveByName(name, now);
      return record === null ? null : copy(record);
    },

    async listLiveTokens(query: ListTokensQuery) {
      const { treeOf, after, limit, now } = query;
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

    async updateTokenTree(name, now, plan: (tree: TokenRecord[]) => TokenTreeChanges) {
      const root = liveByName(name, now);
      if (root === null) return false;
      const tree = treeNames(name)
        .map((treeName) => liveByName(treeName, now))
        .filter((record): record is TokenRecord => record !== null)
        .map(copy);
      // plan may throw: nothing has been written yet, and the writes below cannot fail.
      const changes = plan(tree);
      for (const record of changes.update) {
        if (tokens.has(record.idHash)) {
          removeToken(record.idHash);
          putToken(record);
        }
      }
      for (const idHash of changes.delete) removeToken(idHash);
      return true;
    },

    async deleteTokenTree(name, now) {
      if (liveByName(name, now) === null) return false;
      for (const treeName of treeNames(name)) {
        for (const id of [...(tokensByName.get(treeName) ?? [])]) removeToken(id);
      }
      return true;
    },

    async close() {
      tokens.clear();
      tokensByName.clear();
    },
  };
}
