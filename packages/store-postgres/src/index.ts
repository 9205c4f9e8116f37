export {
  MIGRATIONS,
  migrate,
  type PostgresStorage,
  type PostgresStorageOptions,
  postgresStorage,
} from './postgres-storage.js';
