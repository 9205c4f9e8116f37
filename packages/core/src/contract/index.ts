/**
 * `@keyway/core/contract`: the shapes of the HTTP contract (query strings, request and
 * answer bodies, pages) as JSON Schema, by name, for what serves or documents the contract
 * (`@keyway/http`, an OpenAPI generator, a client's validator). Core parses every input
 * itself; nothing here is needed to call the broker.
 *
 * @module
 */
export {
  type ContractShape,
  contractSchema,
  type JsonSchema,
  type QueryParameterKind,
  type QueryShape,
  queryParameters,
} from './document.js';
export { gatewayForwards } from './gateway-headers.js';
export { CONNECTION_VIEW_JSON } from './view-json.js';
