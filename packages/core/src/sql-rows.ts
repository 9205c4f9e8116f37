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

/*
 * Row writers: the column values of each record in the reference schema's column order,
 * so an adapter's INSERT and its row-value UPDATE (`SET (cols…) = (…)`) take one list.
 */

/** `keyway_tokens` columns: id_hash, name, scopes, expires_at, created_at, created_by. */
export const TOKEN_COLUMNS = 'id_hash, name, scopes, expires_at, created_at, created_by';
export function tokenRowValues(record: TokenRecord): unknown[] {
  return [
    record.idHash,
    record.name,
    JSON.stringify(record.scopes),
    record.expiresAt,
    record.createdAt,
    record.createdBy,
  ];
}

/** `keyway_providers` columns: id, template, state, version, created_at, updated_at. */
export const PROVIDER_COLUMNS = 'id, template, state, version, created_at, updated_at';
export function providerRowValues(record: ProviderRecord): unknown[] {
  return [
    record.id,
    record.template,
    JSON.stringify(record.state),
    record.version,
    record.createdAt,
    record.updatedAt,
  ];
}

/** `keyway_connections` columns: id, provider_id, status, state, version, created_at, updated_at. */
export const CONNECTION_COLUMNS = 'id, provider_id, status, state, version, created_at, updated_at';
export function connectionRowValues(record: ConnectionRecord): unknown[] {
  return [
    record.id,
    record.providerId,
    record.status,
    JSON.stringify(record.state),
    record.version,
    record.createdAt,
    record.updatedAt,
  ];
}

/** `keyway_pending_authorizations` columns. */
export const PENDING_AUTHORIZATION_COLUMNS =
  'state_hash, connection_id, provider_id, state, expires_at, created_at';
export function pendingAuthorizationRowValues(record: PendingAuthorizationRecord): unknown[] {
  return [
    record.stateHash,
    record.connectionId,
    record.providerId,
    JSON.stringify(record.state),
    record.expiresAt,
    record.createdAt,
  ];
}
