export {
  DEFAULT_DATABASE,
  generateRootKey,
  openStorage,
  type RunningServer,
  type ServeOptions,
  serve,
  serveOptionsFromEnv,
} from './serve.js';
