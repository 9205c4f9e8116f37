export {
  driverOf,
  type SqliteConnection,
  type SqliteStatement,
  type SqliteValuesStatement,
  wrapSqlite,
} from './driver.js';
export {
  MIGRATIONS,
  migrate,
  type SqliteStorage,
  type SqliteStorageOptions,
  sqliteStorage,
} from './sqlite-storage.js';
