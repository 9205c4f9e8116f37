import type {
  ConnectionRecord,
  ConnectionStatus,
  JsonObject,
  PendingAuthorizationRecord,
  ProviderRecord,
  TokenRecord,
  VaultEntryRecord,
} from './storage.js';

/**
 * Row readers for SQL adapters that use the reference schema of docs/storage.md
 * (snake_case columns, JSON kept as text, times as integers). Numbers go through `Number()`
 * because drivers return 64-bit integers as strings (node-postgres) or numbers (SQLite).
 */
export type SqlRow = Record<string, unknown>;

const json = (value: unknown) => JSON.parse(value as string);

/** A `keyway_tokens` row as a {@link TokenRecord}. */
export function tokenFromRow(row: SqlRow): TokenRecord {
  return {
    idHash: row.id_hash as string,
    name: row.name as string,
    scopes: json(row.scopes),
    expiresAt: Number(row.expires_at),
    createdAt: Number(row.created_at),
    createdBy: row.created_by as string,
  };
}

/** A `keyway_providers` row as a {@link ProviderRecord}. */
export function providerFromRow(row: SqlRow): ProviderRecord {
  return {
    id: row.id as string,
    template: row.template as string,
    state: json(row.state) as JsonObject,
    version: Number(row.version),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
}

/** A `keyway_connections` row as a {@link ConnectionRecord}. */
export function connectionFromRow(row: SqlRow): ConnectionRecord {
  return {
    id: row.id as string,
    providerId: row.provider_id as string,
    status: row.status as ConnectionStatus,
    state: json(row.state) as JsonObject,
    version: Number(row.version),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
}

/** A `keyway_pending_authorizations` row as a {@link PendingAuthorizationRecord}. */
export function pendingAuthorizationFromRow(row: SqlRow): PendingAuthorizationRecord {
  return {
    stateHash: row.state_hash as string,
    connectionId: row.connection_id as string,
    providerId: row.provider_id as string,
    state: json(row.state) as JsonObject,
    expiresAt: Number(row.expires_at),
    createdAt: Number(row.created_at),
  };
}

/** A `keyway_vault_entries` row as a {@link VaultEntryRecord}. */
export function vaultEntryFromRow(row: SqlRow): VaultEntryRecord {
  return {
    kind: row.kind as string,
    key: row.key as string,
    ciphertext: row.ciphertext as string,
    keyId: row.key_id as string,
    version: Number(row.version),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
}
