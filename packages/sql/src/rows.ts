import {
  type AuditEventRecord,
  CONNECTION_STATUSES,
  type ConnectionRecord,
  DELIVERY_STATUSES,
  type JsonObject,
  type PendingAuthorizationRecord,
  type ProviderRecord,
  type TokenRecord,
  type VaultEntryRecord,
  type WebhookDeliveryRecord,
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
    return {
      id: read.text('id'),
      providerId: read.text('provider_id'),
      status: oneOf('connections', 'status', read, CONNECTION_STATUSES),
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

/** A text column that holds one of `values`. */
function oneOf<T extends string>(
  table: string,
  column: string,
  read: ReturnType<typeof reader>,
  values: readonly T[],
): T {
  const value = read.text(column);
  if (!(values as readonly string[]).includes(value)) {
    throw new StoredRowError(
      table,
      column,
      `is not ${values.slice(0, -1).join(', ')} or ${values.at(-1)}`,
    );
  }
  return value as T;
}

export const AUDIT_EVENTS: RowCodec<AuditEventRecord> = {
  table: 'audit_events',
  columns: ['id', 'type', 'time', 'actor', 'resource_kind', 'resource', 'data', 'expires_at'],
  toRow: (r) => [
    r.id,
    r.type,
    r.time,
    r.actor,
    r.resourceKind,
    r.resource,
    JSON.stringify(r.data),
    r.expiresAt,
  ],
  fromRow(row) {
    const read = reader('audit_events', row);
    return {
      id: read.text('id'),
      type: read.text('type'),
      time: read.integer('time'),
      actor: read.text('actor'),
      resourceKind: oneOf('audit_events', 'resource_kind', read, ['token', 'path'] as const),
      resource: read.text('resource'),
      data: read.object('data'),
      expiresAt: read.integer('expires_at'),
    };
  },
};

export const WEBHOOK_DELIVERIES: RowCodec<WebhookDeliveryRecord> = {
  table: 'webhook_deliveries',
  columns: [
    'id',
    'event_id',
    'url',
    'body',
    'status',
    'attempts',
    'next_attempt_at',
    'last_attempt_at',
    'last_status',
    'last_error',
    'lease_owner',
    'lease_expires_at',
    'created_at',
    'expires_at',
  ],
  toRow: (r) => [
    r.id,
    r.eventId,
    r.url,
    r.body,
    r.status,
    r.attempts,
    r.nextAttemptAt,
    r.lastAttemptAt,
    r.lastStatus,
    r.lastError,
    r.leaseOwner,
    r.leaseExpiresAt,
    r.createdAt,
    r.expiresAt,
  ],
  fromRow(row) {
    const read = reader('webhook_deliveries', row);
    return {
      id: read.text('id'),
      eventId: read.text('event_id'),
      url: read.text('url'),
      body: read.text('body'),
      status: oneOf('webhook_deliveries', 'status', read, DELIVERY_STATUSES),
      attempts: read.integer('attempts'),
      nextAttemptAt: read.integer('next_attempt_at'),
      lastAttemptAt: read.integer('last_attempt_at'),
      lastStatus: read.integer('last_status'),
      lastError: read.text('last_error'),
      leaseOwner: read.text('lease_owner'),
      leaseExpiresAt: read.integer('lease_expires_at'),
      createdAt: read.integer('created_at'),
      expiresAt: read.integer('expires_at'),
    };
  },
};

/** Every codec, for the test that holds them to the schema. */
export const CODECS = [
  TOKENS,
  PROVIDERS,
  CONNECTIONS,
  PENDING_AUTHORIZATIONS,
  VAULT_ENTRIES,
  AUDIT_EVENTS,
  WEBHOOK_DELIVERIES,
];
