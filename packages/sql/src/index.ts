/**
 * `@keyway/sql` (private): the SQL layer of Keyway's SQLite and PostgreSQL adapters. The
 * schema and its migrations, the row codecs, the statements and their placeholders are
 * written here once; an adapter is a driver that runs programs on its engine. Bundled into
 * each adapter at build time, never published.
 */
export { compile, type Dialect, marks, postgresDialect, SQLITE, tableName } from './dialect.js';
export {
  all,
  get,
  type Program,
  type Row,
  run,
  runAsync,
  runSync,
  type SqlDriver,
  type Statement,
  script,
} from './program.js';
export { CODECS, type RowCodec, StoredRowError } from './rows.js';
export {
  type Column,
  type ColumnType,
  MIGRATION_STEPS,
  migrate,
  migrations,
  type SchemaStep,
  schemaColumns,
  stepDdl,
} from './schema.js';
export {
  CONNECTION_BY_ID,
  connectionListQuery,
  handOutStatement,
  pathListQuery,
  type SqlQuery,
  TOKEN_BY_ID_HASH,
  TOKEN_CHECK_BY_ID_HASH,
} from './statements.js';
export { sqlStorage } from './storage.js';
