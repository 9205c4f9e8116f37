/**
 * `@keyway/http`: the broker's HTTP contract as a Web-standard handler, `Request` in and
 * `Response` out, for any runtime that speaks `fetch`; guards for an app's own routes; the
 * OpenAPI document. Node's `http` glue is in `@keyway/http/node`.
 *
 * @module
 */
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
  type RequestRecord,
} from './handler.js';
export { OPERATIONS, openApiDocument } from './openapi.js';
export { DEFAULT_MAX_BODY_BYTES } from './request.js';
