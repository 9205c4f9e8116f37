export { ADMIN_COMMANDS, ADMIN_USAGE, type AdminIo, EXIT, runAdmin } from './admin.js';
export { SERVE_VARIABLES, serveOptionsFromEnv } from './environment.js';
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
} from './serve.js';
