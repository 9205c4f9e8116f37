import { type Dialect, tableName } from './dialect.js';
import { get, type Program, run, script } from './program.js';

/**
 * Keyway's tables, written once for both engines. A column's type names what it holds; the
 * dialect picks the engine's type:
 *
 * | type      | SQLite  | PostgreSQL         | holds                                     |
 * | --------- | ------- | ------------------ | ----------------------------------------- |
 * | `key`     | TEXT    | text COLLATE "C"   | a key listed in code point order          |
 * | `text`    | TEXT    | text               | any other text, and JSON (see below)      |
 * | `integer` | INTEGER | integer            | a version                                 |
 * | `bigint`  | INTEGER | bigint             | epoch milliseconds, counts                |
 *
 * SQLite's BINARY collation and PostgreSQL's `COLLATE "C"` both compare UTF-8 bytes: the
 * code point order of every Keyway list, and the only one in which a `>=`/`<` range on the
 * index is a prefix scan. JSON is text: PostgreSQL's `jsonb` would refuse a `\u0000` that a
 * remote server sent. One statement reads inside it: a hand-out's read takes the `hand_out`
 * member of a provider's state with the engine's `->` operator (`readForHandOut`).
 */
export type ColumnType = 'key' | 'text' | 'integer' | 'bigint';

/** A column of a table. */
export interface Column {
  name: string;
  type: ColumnType;
  /** `UNIQUE` (a single-column constraint). */
  unique?: boolean;
}

/** One change of a migration. */
export type SchemaStep =
  | { create: string; columns: Column[]; primaryKey: string[] }
  | { index: string; on: string; columns: string[] }
  | { addColumn: Column; to: string; default: string };

const c = (name: string, type: ColumnType, unique?: boolean): Column =>
  unique ? { name, type, unique } : { name, type };

/**
 * The migrations, in order. Each runs once, in the transaction that records it. Never edit
 * one that has shipped: add the next (an `addColumn` step, the new column in its codec in
 * `rows.ts`, and nothing else).
 */
export const MIGRATION_STEPS: readonly (readonly SchemaStep[])[] = [
  [
    {
      create: 'tokens',
      columns: [
        c('id_hash', 'text'),
        c('name', 'key', true),
        c('scopes', 'text'),
        c('expires_at', 'bigint'),
        c('created_at', 'bigint'),
        c('created_by', 'text'),
      ],
      primaryKey: ['id_hash'],
    },
    { index: 'tokens_expires_at', on: 'tokens', columns: ['expires_at'] },
    {
      create: 'providers',
      columns: [
        c('id', 'key'),
        c('template', 'text'),
        c('state', 'text'),
        c('version', 'integer'),
        c('created_at', 'bigint'),
        c('updated_at', 'bigint'),
      ],
      primaryKey: ['id'],
    },
    {
      create: 'connections',
      columns: [
        c('id', 'key'),
        c('provider_id', 'key'),
        c('status', 'text'),
        c('state', 'text'),
        c('version', 'integer'),
        c('created_at', 'bigint'),
        c('updated_at', 'bigint'),
      ],
      primaryKey: ['id'],
    },
    { index: 'connections_provider', on: 'connections', columns: ['provider_id', 'id'] },
    {
      create: 'pending_authorizations',
      columns: [
        c('state_hash', 'text'),
        c('connection_id', 'text'),
        c('provider_id', 'text'),
        c('state', 'text'),
        c('expires_at', 'bigint'),
        c('created_at', 'bigint'),
      ],
      primaryKey: ['state_hash'],
    },
    {
      index: 'pending_authorizations_expires_at',
      on: 'pending_authorizations',
      columns: ['expires_at'],
    },
    {
      create: 'vault_entries',
      columns: [
        c('kind', 'key'),
        c('key', 'key'),
        c('ciphertext', 'text'),
        c('key_id', 'text'),
        c('version', 'integer'),
        c('created_at', 'bigint'),
        c('updated_at', 'bigint'),
      ],
      primaryKey: ['kind', 'key'],
    },
    { index: 'vault_entries_key_id', on: 'vault_entries', columns: ['key_id', 'kind', 'key'] },
    {
      create: 'leases',
      columns: [c('key', 'text'), c('owner', 'text'), c('expires_at', 'bigint')],
      primaryKey: ['key'],
    },
    { index: 'leases_expires_at', on: 'leases', columns: ['expires_at'] },
  ],
  [
    {
      create: 'counters',
      columns: [c('key', 'text'), c('count', 'bigint'), c('expires_at', 'bigint')],
      primaryKey: ['key'],
    },
    { index: 'counters_expires_at', on: 'counters', columns: ['expires_at'] },
  ],
  [
    {
      create: 'audit_events',
      columns: [
        c('id', 'key'),
        c('type', 'text'),
        c('time', 'bigint'),
        c('actor', 'text'),
        c('resource_kind', 'text'),
        c('resource', 'key'),
        c('data', 'text'),
        c('expires_at', 'bigint'),
      ],
      primaryKey: ['id'],
    },
    { index: 'audit_events_expires_at', on: 'audit_events', columns: ['expires_at'] },
    {
      index: 'audit_events_resource',
      on: 'audit_events',
      columns: ['resource_kind', 'resource', 'id'],
    },
    {
      create: 'webhook_deliveries',
      columns: [
        c('id', 'key'),
        c('event_id', 'text'),
        c('url', 'text'),
        c('body', 'text'),
        c('status', 'text'),
        c('attempts', 'integer'),
        c('next_attempt_at', 'bigint'),
        c('last_attempt_at', 'bigint'),
        c('last_status', 'integer'),
        c('last_error', 'text'),
        c('lease_owner', 'text'),
        c('lease_expires_at', 'bigint'),
        c('created_at', 'bigint'),
        c('expires_at', 'bigint'),
      ],
      primaryKey: ['id'],
    },
    {
      index: 'webhook_deliveries_due',
      on: 'webhook_deliveries',
      columns: ['status', 'next_attempt_at'],
    },
    { index: 'webhook_deliveries_status', on: 'webhook_deliveries', columns: ['status', 'id'] },
    { index: 'webhook_deliveries_expires_at', on: 'webhook_deliveries', columns: ['expires_at'] },
  ],
  // The one MCP endpoint a sign-in token is accepted at (docs/api.md §17); '' for the rest.
  [{ addColumn: c('audience', 'text'), to: 'tokens', default: "''" }],
  // The portal's tool globs of a token (docs/api.md §18), a JSON array; '' for none.
  [{ addColumn: c('tools', 'text'), to: 'tokens', default: "''" }],
];

function columnType(dialect: Dialect, type: ColumnType): string {
  if (dialect.engine === 'sqlite') return type === 'key' || type === 'text' ? 'TEXT' : 'INTEGER';
  return type === 'key' ? 'text COLLATE "C"' : type;
}

function columnDdl(dialect: Dialect, column: Column, primary: boolean): string {
  const parts = [column.name, columnType(dialect, column.type)];
  parts.push(primary ? 'PRIMARY KEY' : 'NOT NULL');
  if (column.unique) parts.push('UNIQUE');
  return parts.join(' ');
}

/** The DDL of one step in a dialect. */
export function stepDdl(dialect: Dialect, step: SchemaStep): string {
  if ('create' in step) {
    const single = step.primaryKey.length === 1 ? step.primaryKey[0] : undefined;
    const lines = step.columns.map((column) => columnDdl(dialect, column, column.name === single));
    if (single === undefined) lines.push(`PRIMARY KEY (${step.primaryKey.join(', ')})`);
    const rowid = dialect.engine === 'sqlite' ? ' WITHOUT ROWID' : '';
    return `CREATE TABLE ${tableName(dialect, step.create)} (\n  ${lines.join(',\n  ')}\n)${rowid}`;
  }
  if ('index' in step) {
    return `CREATE INDEX keyway_${step.index} ON ${tableName(dialect, step.on)} (${step.columns.join(', ')})`;
  }
  const column = `${step.addColumn.name} ${columnType(dialect, step.addColumn.type)}`;
  return `ALTER TABLE ${tableName(dialect, step.to)} ADD COLUMN ${column} NOT NULL DEFAULT ${step.default}`;
}

/** The SQL of each migration in a dialect, in order: migration `n` is element `n - 1`. */
export function migrations(dialect: Dialect): string[] {
  return MIGRATION_STEPS.map((steps) =>
    steps.map((step) => `${stepDdl(dialect, step)};`).join('\n'),
  );
}

/** The columns of each table after every migration, in order. */
export function schemaColumns(): Map<string, string[]> {
  const tables = new Map<string, string[]>();
  for (const step of MIGRATION_STEPS.flat()) {
    if ('create' in step)
      tables.set(
        step.create,
        step.columns.map((column) => column.name),
      );
    else if ('addColumn' in step) tables.get(step.to)?.push(step.addColumn.name);
  }
  return tables;
}

/** Key of the PostgreSQL advisory lock that serializes migrations across every process. */
const MIGRATION_LOCK = 7_301_999_001;

/**
 * Applies the migrations the database lacks, recording each. Run it as one transaction:
 * on PostgreSQL it first takes a transaction-scoped advisory lock (instances that start
 * together apply each migration once); SQLite's `BEGIN IMMEDIATE` serializes it.
 */
export function* migrate(dialect: Dialect, now: number): Program<number> {
  if (dialect.engine === 'postgres') {
    yield* get('SELECT pg_advisory_xact_lock(?)', [MIGRATION_LOCK]);
    yield* script(`CREATE SCHEMA IF NOT EXISTS "${dialect.schema}"`);
  }
  const versionType = dialect.engine === 'sqlite' ? 'INTEGER' : 'integer';
  const timeType = dialect.engine === 'sqlite' ? 'INTEGER' : 'bigint';
  yield* script(
    `CREATE TABLE IF NOT EXISTS ${tableName(dialect, 'migrations')} (version ${versionType} PRIMARY KEY, applied_at ` +
      `${timeType} NOT NULL)`,
  );
  const row = yield* get('SELECT MAX(version) AS version FROM {migrations}');
  const current = row?.version === null || row?.version === undefined ? 0 : Number(row.version);
  const all = migrations(dialect);
  for (let version = current + 1; version <= all.length; version++) {
    yield* script(all[version - 1] as string);
    yield* run('INSERT INTO {migrations} (version, applied_at) VALUES (?, ?)', [version, now]);
  }
  return Math.max(0, all.length - current);
}
