/**
 * `@keyway/core/storage`: what a storage adapter's author needs — the {@link Storage}
 * contract, its record types, and the reference semantics of its orderings and subtrees.
 * An embedding app never imports from here; it passes an adapter to `createBroker`.
 *
 * @see docs/storage.md, "Writing an adapter".
 * @module
 */
export { compareCodePoints } from '../auth/resource-path.js';
export { CONNECTION_STATUSES, DELIVERY_STATUSES } from '../contract/codes.js';
export * from './contract.js';
