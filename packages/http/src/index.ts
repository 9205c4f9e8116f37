/**
 * `@keyway/http`: the broker's HTTP contract as a Web-standard handler, `Request` in and
 * `Response` out, for any runtime that speaks `fetch`; a guard for an app's own fetch-style
 * routes; the OpenAPI document. Node's `http` glue is in `@keyway/http/node`; the guard as
 * Express and Hono middleware in `@keyway/http/express` and `@keyway/http/hono`.
 *
 * @module
 */
export { guardErrorResponse, requireBrokerToken } from './guard.js';
export {
  createHandler,
  type HandlerOptions,
  type KeywayHandler,
  type RequestRecord,
} from './handler.js';
export { OPERATIONS, openApiDocument } from './openapi.js';
export { DEFAULT_MAX_BODY_BYTES } from './request.js';
