export {
  generateRootKey,
  type RunningServer,
  type ServeOptions,
  serve,
  serveOptionsFromEnv,
} from './serve.js';
