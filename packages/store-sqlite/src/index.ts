export { MIGRATIONS } from './schema.js';
export {
  buildPathListSql,
  migrate,
  type SqliteStorage,
  type SqliteStorageOptions,
  sqliteStorage,
} from './sqlite-storage.js';
