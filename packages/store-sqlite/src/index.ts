export {
  MIGRATIONS,
  migrate,
  type SqliteStorage,
  type SqliteStorageOptions,
  sqliteStorage,
} from './sqlite-storage.js';
