/**
 * The pinned, resolving transport for Node lives in `@keyway/core` (it is the default of
 * `createBroker` on Node); it is re-exported here where it was first published.
 */
export {
  createNodeFetch,
  type ResolvingFetchOptions as NodeFetchOptions,
} from '@keyway/core/outbound';
