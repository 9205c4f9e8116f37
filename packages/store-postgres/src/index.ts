export {
  buildPathListSql,
  migrate,
  type PostgresStorage,
  type PostgresStorageOptions,
  postgresStorage,
} from './postgres-storage.js';
export { MIGRATIONS } from './schema.js';
