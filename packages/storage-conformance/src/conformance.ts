import type { Storage } from '@keyway/core/storage';
import { afterEach, describe } from 'vitest';
import { eventStorageCases } from './event-cases.js';
import { handOutReadCases } from './hand-out-cases.js';
import { connectionStorageCases, providerStorageCases } from './path-record-cases.js';
import {
  counterStorageCases,
  leaseStorageCases,
  maintenanceCases,
  pendingAuthorizationCases,
  vaultStorageCases,
} from './state-cases.js';
import { tokenStorageCases } from './token-cases.js';

/** How the suite reaches the adapter under test. */
export interface ConformanceTarget {
  /** Creates a fresh, empty storage for one test. */
  create(): Storage | Promise<Storage>;
  /**
   * Opens another, independent handle on the same database as `storage` (a second
   * connection to the same SQLite file, another pool on the same PostgreSQL database), so
   * concurrency cases run across connections for real. Omit it where there is only one
   * handle (memory): those cases then run on the one handle.
   */
  connectAgain?(storage: Storage): Storage | Promise<Storage>;
  /** Drops what `create` made. Every handle the suite opened is closed before this. */
  destroy?(storage: Storage): void | Promise<void>;
  /**
   * Reads raw rows behind the adapter's back (omit for memory), so the suite can check what
   * is really stored: that a take deleted its row, that a purge removed expired rows.
   */
  readBehind?(storage: Storage): ReadBehind;
}

/** Raw access to an adapter's tables, by record kind. */
export interface ReadBehind {
  rows(table: StoredTable): Promise<Record<string, unknown>[]>;
}

/** The record kinds every adapter stores, named as their SQL tables (without `keyway_`). */
export type StoredTable =
  | 'tokens'
  | 'providers'
  | 'connections'
  | 'pending_authorizations'
  | 'vault_entries'
  | 'leases'
  | 'counters'
  | 'audit_events'
  | 'webhook_deliveries';

/** What each group of cases receives. */
export interface CaseContext {
  /** A fresh storage, plus any extra handles, all closed after the test. */
  open(): Promise<Storage>;
  /** Another handle on the same database as `storage` (or `storage` itself). */
  connectAgain(storage: Storage): Promise<Storage>;
  /** Raw rows behind the adapter, or `null` where the target offers none. */
  readBehind(storage: Storage): ReadBehind | null;
}

/**
 * Runs every storage promise of `@keyway/core`'s `Storage` interface against an adapter.
 * Call it from a test file of the adapter's package:
 *
 * @example
 * import { runStorageConformance } from '@keyway/storage-conformance';
 * import { memoryStorage } from '@keyway/store-memory';
 *
 * runStorageConformance('memoryStorage()', { create: () => memoryStorage() });
 */
export function runStorageConformance(name: string, target: ConformanceTarget): void {
  describe(`storage conformance: ${name}`, () => {
    const primaries: Storage[] = [];
    const extras: Storage[] = [];

    afterEach(async () => {
      for (const handle of extras.splice(0)) await handle.close?.();
      for (const storage of primaries.splice(0)) {
        await storage.close?.();
        await target.destroy?.(storage);
      }
    });

    const context: CaseContext = {
      async open() {
        const storage = await target.create();
        primaries.push(storage);
        return storage;
      },
      async connectAgain(storage) {
        if (target.connectAgain === undefined) return storage;
        const handle = await target.connectAgain(storage);
        extras.push(handle);
        return handle;
      },
      readBehind(storage) {
        return target.readBehind?.(storage) ?? null;
      },
    };

    tokenStorageCases(context);
    providerStorageCases(context);
    connectionStorageCases(context);
    handOutReadCases(context);
    pendingAuthorizationCases(context);
    vaultStorageCases(context);
    leaseStorageCases(context);
    counterStorageCases(context);
    eventStorageCases(context);
    maintenanceCases(context);
  });
}
