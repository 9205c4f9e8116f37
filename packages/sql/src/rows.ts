import {
  type AuditEventRecord,
  CONNECTION_STATUSES,
  type ConnectionRecord,
  DELIVERY_STATUSES,
  type PendingAuthorizationRecord,
  type ProviderRecord,
  type TokenCheckRecord,
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
  /**
   * `SELECT <columns> FROM {table}`: the columns named in {@link RowCodec.columns} order, so
   * that a statement that answers values (`values: true`) can be read by {@link fromValues}.
   */
  readonly select: string;
  /** The column values of a record, in {@link RowCodec.columns} order. */
  toRow(record: R): unknown[];
  /** A row as a record, every column checked. @throws {StoredRowError} */
  fromRow(row: Row): R;
  /**
   * A row answered as its values in {@link RowCodec.columns} order (the point reads: no
   * object with a property per column is built for it), every column checked.
   * @throws {StoredRowError}
   */
  fromValues(values: readonly unknown[]): R;
}

/**
 * How one column holds its field: text, a 64-bit integer, a JSON object, a JSON array of
 * strings, text that is one of a closed list, or optional text (an absent field is stored
 * as `''`, since every column is `NOT NULL`, and read back absent).
 */
type ColumnKind =
  | 'text'
  | 'integer'
  | 'object'
  | 'strings'
  | 'optional'
  | 'optional-strings'
  | { oneOf: readonly string[] };

/** A table declared once: each field of the record, its column, and how it is held. */
type Columns<R> = { [F in keyof R]: readonly [column: string, kind: ColumnKind] };

function parseJson(table: string, column: string, text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new StoredRowError(table, column, 'is not JSON');
  }
}

/** Reads one column's value as its kind says, checked. @throws {StoredRowError} */
function readColumn(table: string, value: unknown, column: string, kind: ColumnKind): unknown {
  if (kind === 'integer') {
    // Drivers answer 64-bit integers as strings (node-postgres) or numbers (SQLite).
    const number =
      typeof value === 'number' ? value : typeof value === 'string' ? Number(value) : NaN;
    if (!Number.isSafeInteger(number)) throw new StoredRowError(table, column, 'is not an integer');
    return number;
  }
  if (typeof value !== 'string') throw new StoredRowError(table, column, 'is not text');
  if (kind === 'text') return value;
  if (kind === 'optional') return value === '' ? undefined : value;
  if (kind === 'optional-strings' && value === '') return undefined;
  if (kind === 'object') {
    const parsed = parseJson(table, column, value);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw new StoredRowError(table, column, 'is not a JSON object');
    }
    return parsed;
  }
  if (kind === 'strings' || kind === 'optional-strings') {
    const parsed = parseJson(table, column, value);
    if (!Array.isArray(parsed) || !parsed.every((item) => typeof item === 'string')) {
      throw new StoredRowError(table, column, 'is not a JSON array of strings');
    }
    return parsed;
  }
  if (!kind.oneOf.includes(value)) {
    const { oneOf } = kind;
    throw new StoredRowError(
      table,
      column,
      `is not ${oneOf.slice(0, -1).join(', ')} or ${oneOf.at(-1)}`,
    );
  }
  return value;
}

/** A JSON object column's value, checked (a point read of one column). @throws {StoredRowError} */
export function objectColumn(
  table: string,
  column: string,
  value: unknown,
): Record<string, unknown> {
  return readColumn(table, value, column, 'object') as Record<string, unknown>;
}

/**
 * The codec of a table declared once: its columns in declaration order, a record's row,
 * and a row's record with every column checked.
 */
function table<R>(name: string, fields: Columns<R>): RowCodec<R> {
  const entries = Object.entries(fields) as [keyof R & string, readonly [string, ColumnKind]][];
  // Parallel arrays, read by index on every row (the point reads' hot path).
  const names = entries.map(([field]) => field);
  const columns = entries.map(([, [column]]) => column);
  const kinds = entries.map(([, [, kind]]) => kind);
  const fromValues = (values: readonly unknown[]): R => {
    const record: Partial<Record<keyof R, unknown>> = {};
    for (let i = 0; i < names.length; i++) {
      const value = readColumn(name, values[i], columns[i] as string, kinds[i] as ColumnKind);
      // An optional field stored empty is left out, as the record was written.
      if (value !== undefined) record[names[i] as keyof R] = value;
    }
    return record as R;
  };
  return {
    table: name,
    columns,
    select: `SELECT ${columns.join(', ')} FROM {${name}}`,
    toRow: (record) =>
      entries.map(([field, [, kind]]) =>
        kind === 'object' || kind === 'strings'
          ? JSON.stringify(record[field])
          : kind === 'optional-strings'
            ? record[field] === undefined
              ? ''
              : JSON.stringify(record[field])
            : kind === 'optional'
              ? (record[field] ?? '')
              : record[field],
      ),
    fromRow: (row) => fromValues(columns.map((column) => row[column])),
    fromValues,
  };
}

export const TOKENS = table<TokenRecord>('tokens', {
  idHash: ['id_hash', 'text'],
  name: ['name', 'text'],
  scopes: ['scopes', 'strings'],
  expiresAt: ['expires_at', 'integer'],
  createdAt: ['created_at', 'integer'],
  createdBy: ['created_by', 'text'],
  audience: ['audience', 'optional'],
  tools: ['tools', 'optional-strings'],
});

/**
 * The token check's projection of a token row (`findTokenByIdHashSync`): the four columns
 * a check reads, not the whole row. Read only; not one of {@link CODECS}, which write rows.
 */
export const TOKEN_CHECKS = table<TokenCheckRecord>('tokens', {
  name: ['name', 'text'],
  scopes: ['scopes', 'strings'],
  expiresAt: ['expires_at', 'integer'],
  audience: ['audience', 'optional'],
  tools: ['tools', 'optional-strings'],
});

export const PROVIDERS = table<ProviderRecord>('providers', {
  id: ['id', 'text'],
  template: ['template', 'text'],
  state: ['state', 'object'],
  version: ['version', 'integer'],
  createdAt: ['created_at', 'integer'],
  updatedAt: ['updated_at', 'integer'],
});

export const CONNECTIONS = table<ConnectionRecord>('connections', {
  id: ['id', 'text'],
  providerId: ['provider_id', 'text'],
  status: ['status', { oneOf: CONNECTION_STATUSES }],
  state: ['state', 'object'],
  version: ['version', 'integer'],
  createdAt: ['created_at', 'integer'],
  updatedAt: ['updated_at', 'integer'],
});

export const PENDING_AUTHORIZATIONS = table<PendingAuthorizationRecord>('pending_authorizations', {
  stateHash: ['state_hash', 'text'],
  connectionId: ['connection_id', 'text'],
  providerId: ['provider_id', 'text'],
  state: ['state', 'object'],
  expiresAt: ['expires_at', 'integer'],
  createdAt: ['created_at', 'integer'],
});

export const VAULT_ENTRIES = table<VaultEntryRecord>('vault_entries', {
  kind: ['kind', 'text'],
  key: ['key', 'text'],
  ciphertext: ['ciphertext', 'text'],
  keyId: ['key_id', 'text'],
  version: ['version', 'integer'],
  createdAt: ['created_at', 'integer'],
  updatedAt: ['updated_at', 'integer'],
});

export const AUDIT_EVENTS = table<AuditEventRecord>('audit_events', {
  id: ['id', 'text'],
  type: ['type', 'text'],
  time: ['time', 'integer'],
  actor: ['actor', 'text'],
  resourceKind: ['resource_kind', { oneOf: ['token', 'path'] }],
  resource: ['resource', 'text'],
  data: ['data', 'object'],
  expiresAt: ['expires_at', 'integer'],
});

export const WEBHOOK_DELIVERIES = table<WebhookDeliveryRecord>('webhook_deliveries', {
  id: ['id', 'text'],
  eventId: ['event_id', 'text'],
  url: ['url', 'text'],
  body: ['body', 'text'],
  status: ['status', { oneOf: DELIVERY_STATUSES }],
  attempts: ['attempts', 'integer'],
  nextAttemptAt: ['next_attempt_at', 'integer'],
  lastAttemptAt: ['last_attempt_at', 'integer'],
  lastStatus: ['last_status', 'integer'],
  lastError: ['last_error', 'text'],
  leaseOwner: ['lease_owner', 'text'],
  leaseExpiresAt: ['lease_expires_at', 'integer'],
  createdAt: ['created_at', 'integer'],
  expiresAt: ['expires_at', 'integer'],
});

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
