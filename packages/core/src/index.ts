/**
 * `@keyway/core`: the OAuth connection broker, runtime-agnostic. An embedding app needs
 * {@link createBroker}, the principals its operations take, the errors they throw and the
 * contract's types, all exported here. Storage adapters are written against
 * `@keyway/core/storage`; the SSRF-guarded outbound fetch and its transports are in
 * `@keyway/core/outbound`; the contract's shapes as JSON Schema, for handlers and document
 * generators, in `@keyway/core/contract`.
 *
 * @see [docs/api.md](https://github.com/keyway-dev/keyway/blob/main/docs/api.md), the HTTP contract every operation implements.
 * @module
 */

export {
  type Principal,
  type RootPrincipal,
  rootPrincipal,
  type TokenPrincipal,
} from './auth/principal.js';
export type { RateLimitsConfig } from './auth/rate-limit.js';
// ─── resource paths (docs/api.md §2) ──────────────────────────────────────────────────────────
export { parseResourcePath, resourcePathFromUrl } from './auth/resource-path.js';
// ─── the broker ──────────────────────────────────────────────────────────────────────────
export { type Broker, type BrokerHealth, createBroker } from './broker/broker.js';
export type { BrokerConfig } from './broker/config.js';
// ─── MCP clients ─────────────────────────────────────────────────────────────────────────
export { type ConnectionSource, connectionFetch } from './broker/fetch-source.js';
export type { AuthorizeResult, CallbackOutcome } from './connections/authorization.js';
export type { Credentials } from './connections/service.js';
export type { ConnectionView } from './connections/view.js';
export type {
  ConnectionErrorCode,
  ConnectionStatus,
  KeywayEventType,
} from './contract/codes.js';
export type { ConnectionFailure } from './contract/connection-failure.js';
// ─── errors ──────────────────────────────────────────────────────────────────────────────
export {
  isKeywayError,
  KeywayError,
  type KeywayErrorCode,
  type KeywayErrorDetail,
} from './contract/errors.js';
export type { Page } from './contract/pagination.js';
export type {
  AuthorizeInput,
  ConnectionListQueryInput,
  CredentialsQueryInput,
  DiscoverInput,
  ListQuery,
  MintTokenInput,
  NarrowTokenInput,
  ProviderInput,
  ProviderListQueryInput,
  PutSecretInput,
  SecretListQueryInput,
  UpdateConnectionInput,
  VerifyInput,
} from './contract/schemas.js';
export type { DiscoveryStep, DiscoveryTrace } from './discovery/index.js';
// ─── events ──────────────────────────────────────────────────────────────────────────────
export type { KeywayEvent } from './events/log.js';
export { OutboundError, type OutboundFailure } from './outbound/network-failure.js';
export type { PlatformCrypto } from './platform/crypto.js';
export type { ProviderView } from './providers/state.js';
export type { Storage } from './storage/contract.js';
export type { ConnectionTokens } from './storage/states.js';
// ─── telemetry (docs/api.md §16) ─────────────────────────────────────────────────────────────
export type { Observation } from './telemetry/observation.js';
// ─── who acts ────────────────────────────────────────────────────────────────────────────
// ─── the contract's types (docs/api.md §3–§7) ─────────────────────────────────────────────────
export type { AuthenticationContext, IssuedToken, TokenView } from './tokens/service.js';
export {
  type ConnectionFetchOptions,
  type CredentialSource,
  InsufficientScopeError,
} from './upstream/connection-fetch.js';
export type { ProbeResult } from './upstream/connection-probe.js';
export type { SecretView, SecretWithValue } from './vault/secrets.js';
export { deriveVaultKey, generateVaultKey } from './vault/vault.js';
