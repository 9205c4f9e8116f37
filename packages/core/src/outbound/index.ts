/**
 * `@keyway/core/outbound`: the SSRF-guarded fetch every outbound request of Keyway goes
 * through, and the transports under it (a resolving, address-pinning fetch for Node, Deno
 * and Bun). For apps that want the same guard on their own outbound calls, and for runtime
 * adapters.
 *
 * @see docs/security.md, "Outbound requests".
 * @module
 */

export type { AddressClass } from '../platform/address.js';
export { classifyAddress, isIpLiteral } from '../platform/address.js';
export type { BoundedReadErrors } from '../platform/bytes.js';
export { readBounded } from '../platform/bytes.js';
export { withHeaders } from '../platform/headers.js';
export {
  assertOutboundUrl,
  createOutboundFetch,
  type OutboundFetch,
  type OutboundOptions,
} from './fetch.js';
export { normalizeHost } from './hosts.js';
export { OutboundError, type OutboundFailure } from './network-failure.js';
export {
  type PipedAnswer,
  type PipedBody,
  type PipedFetch,
  type PipedInit,
  type PipedSink,
  pipedHeader,
  pipedResponse,
  pipedStream,
  RELAYED,
  type RelayedAnswer,
} from './piped.js';
export {
  createStreamingFetch,
  type StreamingFetch,
  type StreamingFetchOptions,
  whenBodySettled,
} from './stream.js';
export type { Transport } from './transport.js';
export {
  createNodeFetch,
  createResolvingFetch,
  defaultTransport,
  type Resolve,
  type ResolvedAddress,
  type ResolvingFetchOptions,
  type RuntimeGlobals,
} from './transport.js';
