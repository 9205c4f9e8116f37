import type {
  ConnectionRecord,
  ConnectionStatus,
  JsonObject,
  PendingAuthorizationRecord,
  ProviderRecord,
  TokenRecord,
  VaultEntryRecord,
} from '@keyway/core/storage';
import type { Row } from './program.js';

/**
 * A row that is not what the schema promises: a column of the wrong type, JSON that does
 * not parse. The message names the table and column, never the value.
 */
export class StoredRowError extends Error {
  override readonly name = 'StoredRowError';
  constructor(table: string, column: string, what: string) {
    super(`keyway_${table}.${column} ${what}`);
  }
}

/** Reads and writes one record type as a row of its table, in the table's column order. */
export interface RowCodec<R> {
  readonly table: string;
  readonly columns: readonly string[];
  /** The column values of a record, in {@link RowCodec.columns} order. */
  toRow(record: R): unknown[];
  /** A row as a record, every column checked. @throws {StoredRowError} */
  fromRow(row: Row): R;
}

/** Checked column readers of one table. */
function reader(table: string, row: Row) {
  const text = (column: string): string => {
    const value = row[column];
    if (typeof value !== 'string') throw new StoredRowError(table, column, 'is not text');
    return value;
  };
  return {
    text,
    /** Drivers answer 64-bit integers as strings (node-postgres) or numbers (SQLite). */
    integer(column: string): number {
      const value = row[column];
      const number =
        typeof value === 'number' ? value : typeof value === 'string' ? Number(value) : NaN;
      if (!Number.isSafeInteger(number)) {
        throw new StoredRowError(table, column, 'is not an integer');
      }
      return number;
    },
    object(column: string): JsonObject {
      const value = parseJson(table, column, text(column));
      if (typeof value !== 'object' || value === null || Array.isArray(value)) {
        throw new StoredRowError(table, column, 'is not a JSON object');
      }
      return value as JsonObject;
    },
    strings(column: string): string[] {
      const value = parseJson(table, column, text(column));
      if (!Array.isArray(value) || !value.every((item) => typeof item === 'string')) {
        throw new StoredRowError(table, column, 'is not a JSON array of strings');
      }
      return value;
    },
  };
}

function parseJson(table: string, column: string, text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new StoredRowError(table, column, 'is not JSON');
  }
}

const STATUSES: readonly string[] = ['pending', 'active', 'error'] satisfies ConnectionStatus[];

export const TOKENS: RowCodec<TokenRecord> = {
  table: 'tokens',
  columns: ['id_hash', 'name', 'scopes', 'expires_at', 'created_at', 'created_by'],
  toRow: (r) => [r.idHash, r.name, JSON.stringify(r.scopes), r.expiresAt, r.createdAt, r.createdBy],
  fromRow(row) {
    const read = reader('tokens', row);
    return {
      idHash: read.text('id_hash'),
      name: read.text('name'),
      scopes: read.strings('scopes'),
      expiresAt: read.integer('expires_at'),
      createdAt: read.integer('created_at'),
      createdBy: read.text('created_by'),
    };
  },
};

export const PROVIDERS: RowCodec<ProviderRecord> = {
  table: 'providers',
  columns: ['id', 'template', 'state', 'version', 'created_at', 'updated_at'],
  toRow: (r) => [r.id, r.template, JSON.stringify(r.state), r.version, r.createdAt, r.updatedAt],
  fromRow(row) {
    const read = reader('providers', row);
    return {
      id: read.text('id'),
      template: read.text('template'),
      state: read.object('state'),
      version: read.integer('version'),
      createdAt: read.integer('created_at'),
      updatedAt: read.integer('updated_at'),
    };
  },
};

export const CONNECTIONS: RowCodec<ConnectionRecord> = {
  table: 'connections',
  columns: ['id', 'provider_id', 'status', 'state', 'version', 'created_at', 'updated_at'],
  toRow: (r) => [
    r.id,
    r.providerId,
    r.status,
    JSON.stringify(r.state),
    r.version,
    r.createdAt,
    r.updatedAt,
  ],
  fromRow(row) {
    const read = reader('connections', row);
    const status = read.text('status');
    if (!STATUSES.includes(status)) {
      throw new StoredRowError('connections', 'status', 'is not pending, active or error');
    }
    return {
      id: read.text('id'),
      providerId: read.text('provider_id'),
      status: status as ConnectionStatus,
      state: read.object('state'),
      version: read.integer('version'),
      createdAt: read.integer('created_at'),
      updatedAt: read.integer('updated_at'),
    };
  },
};

export const PENDING_AUTHORIZATIONS: RowCodec<PendingAuthorizationRecord> = {
  table: 'pending_authorizations',
  columns: ['state_hash', 'connection_id', 'provider_id', 'state', 'expires_at', 'created_at'],
  toRow: (r) => [
    r.stateHash,
    r.connectionId,
    r.providerId,
    JSON.stringify(r.state),
    r.expiresAt,
    r.createdAt,
  ],
  fromRow(row) {
    const read = reader('pending_authorizations', row);
    return {
      stateHash: read.text('state_hash'),
      connectionId: read.text('connection_id'),
      providerId: read.text('provider_id'),
      state: read.object('state'),
      expiresAt: read.integer('expires_at'),
      createdAt: read.integer('created_at'),
    };
  },
};

export const VAULT_ENTRIES: RowCodec<VaultEntryRecord> = {
  table: 'vault_entries',
  columns: ['kind', 'key', 'ciphertext', 'key_id', 'version', 'created_at', 'updated_at'],
  toRow: (r) => [r.kind, r.key, r.ciphertext, r.keyId, r.version, r.createdAt, r.updatedAt],
  fromRow(row) {
    const read = reader('vault_entries', row);
    return {
      kind: read.text('kind'),
      key: read.text('key'),
      ciphertext: read.text('ciphertext'),
      keyId: read.text('key_id'),
      version: read.integer('version'),
      createdAt: read.integer('created_at'),
      updatedAt: read.integer('updated_at'),
    };
  },
};

/** Every codec, for the test that holds them to the schema. */
export const CODECS = [TOKENS, PROVIDERS, CONNECTIONS, PENDING_AUTHORIZATIONS, VAULT_ENTRIES];
