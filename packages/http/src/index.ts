export {
  brokerTokenMiddleware,
  guardErrorResponse,
  type HonoContextLike,
  honoBrokerToken,
  type NodeRequestLike,
  type NodeResponseLike,
  requireBrokerToken,
} from './guard.js';
export {
  createHandler,
  type HandlerOptions,
  type KeywayHandler,
} from './handler.js';
export {
  type NodeHandlerOptions,
  toNodeHandler,
  toWebRequest,
  writeWebResponse,
} from './node.js';
export { nodeCrypto } from './node-crypto.js';
export { createNodeFetch, type NodeFetchOptions } from './node-fetch.js';
export { OPERATIONS, openApiDocument } from './openapi.js';
export { DEFAULT_MAX_BODY_BYTES } from './request.js';
