export {
  DEFAULT_DATABASE,
  defaultVaultKeys,
  generateRootKey,
  openStorage,
  type RunningServer,
  type ServeOptions,
  serve,
  serveOptionsFromEnv,
} from './serve.js';
