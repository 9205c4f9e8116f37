export {
  DEFAULT_DATABASE,
  DEFAULT_HOST,
  DEFAULT_SERVER_LIMITS,
  defaultVaultKeys,
  generateRootKey,
  openStorage,
  type RunningServer,
  type ServeOptions,
  type ServerLimits,
  serve,
  serveOptionsFromEnv,
} from './serve.js';
