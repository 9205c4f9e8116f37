export { type AddressClass, classifyAddress, isIpLiteral } from './address.js';
export { type Broker, createBroker } from './broker.js';
export {
  type BrokerConfig,
  MIN_ROOT_KEY_BITS,
  MIN_ROOT_KEY_LENGTH,
  rootKeyWeakness,
} from './config.js';
export {
  type AuthorizeInput,
  type AuthorizeResult,
  type CallbackOutcome,
  CONNECTION_TOKENS_KIND,
  ConnectionService,
  type ConnectionState,
  type ConnectionTokens,
  type ConnectionView,
  type Credentials,
  PENDING_AUTHORIZATION_TTL_MS,
  PKCE_VERIFIER_KIND,
} from './connections.js';
export {
  type AuthorizationServerInfo,
  authorizationServerMetadataUrls,
  type DiscoverOptions,
  type Discovery,
  type DiscoveryStep,
  type DiscoveryTrace,
  discover,
  discoverOrThrow,
  type ResourceInfo,
  resourceMatches,
  resourceMetadataUrls,
  selectScopes,
} from './discovery.js';
export {
  ERROR_STATUS,
  isKeywayError,
  KeywayError,
  type KeywayErrorCode,
  type KeywayErrorDetail,
  type KeywayErrorOptions,
} from './errors.js';
export type { EmitEvent, KeywayEvent, KeywayEventType } from './events.js';
export {
  type ConnectionFetchOptions,
  type CredentialSource,
  connectionFetch,
  createConnectionFetch,
  InsufficientScopeError,
  remoteConnectionFetch,
} from './mcp-fetch.js';
export {
  assertOutboundUrl,
  createOutboundFetch,
  normalizeHost,
  OutboundError,
  type OutboundFailure,
  type OutboundFetch,
  type OutboundOptions,
  type Transport,
} from './outbound.js';
export { LIST_LIMIT, type ListOptions, type Page } from './pagination.js';
export {
  actorOf,
  assertCoversPath,
  assertManagesToken,
  type Principal,
  type RootPrincipal,
  rootPrincipal,
  type TokenPrincipal,
} from './principal.js';
export {
  CLIENT_SECRET_KIND,
  type ProviderInput,
  ProviderService,
  type ProviderState,
  type ProviderView,
  REGISTRATION_TOKEN_KIND,
  type ResolvedProvider,
} from './providers.js';
export {
  clientAddressKey,
  DEFAULT_RATE_LIMITS,
  instanceCounters,
  parseRateLimits,
  type RateLimit,
  RateLimiter,
  type RateLimitsConfig,
} from './rate-limit.js';
export {
  applicationType,
  type ClientProfile,
  type ClientRegistration,
  clientMetadataDocument,
  customAuthMethod,
  type RegisteredClient,
  type RegistrationKind,
  registerClient,
  strongestAuthMethod,
  type TokenEndpointAuthMethod,
} from './registration.js';
export {
  compareCodePoints,
  MAX_RESOURCE_PATH_LENGTH,
  parseResourcePath,
  type ResourcePathRule,
  resourcePathFromUrl,
} from './resource-path.js';
export {
  canonicalizeScopes,
  coversPath,
  coversScope,
  intersectScopes,
  isNarrowerOrEqual,
  MAX_SCOPES,
  parseScope,
  ROOT_SCOPE,
  reduceScopes,
  type Scope,
  setCoversPath,
} from './scope.js';
export {
  type ListSecretsOptions,
  listableSubtrees,
  MAX_SECRET_BYTES,
  type PutSecretInput,
  SECRET_KIND,
  SecretService,
  type SecretView,
  type SecretWithValue,
} from './secrets.js';
export {
  type ConnectionRecord,
  type ConnectionStatus,
  type ConnectionStorage,
  type CounterStorage,
  type CounterValue,
  isInSubtree,
  type JsonObject,
  type JsonValue,
  type LeaseStorage,
  type ListConnectionsQuery,
  type ListPathsQuery,
  type ListTokensQuery,
  type ListVaultQuery,
  type MaintenanceStorage,
  type PendingAuthorizationRecord,
  type PendingAuthorizationStorage,
  type ProviderRecord,
  type ProviderStorage,
  STORAGE_METHODS,
  type Storage,
  type TokenRecord,
  type TokenStorage,
  type TokenTreeChanges,
  type VaultChanges,
  type VaultEntryRecord,
  type VaultKey,
  type VaultStorage,
  type VaultWrite,
} from './storage/contract.js';
export {
  createRootKeyCheck,
  createTokenCodec,
  hashTokenId,
  TOKEN_ID_BYTES,
  TOKEN_PREFIX,
  type TokenCodec,
} from './token-format.js';
export {
  isDescendantName,
  MAX_TOKEN_LABEL_LENGTH,
  MAX_TOKEN_NAME_LENGTH,
  parseLifetime,
  parseTokenName,
  TOKEN_LIFETIME,
} from './token-name.js';
export {
  type AuthenticationContext,
  type IssuedToken,
  type MintTokenInput,
  type NarrowTokenInput,
  TokenService,
  type TokenView,
} from './tokens.js';
export {
  createNodeFetch,
  createResolvingFetch,
  defaultTransport,
  type Resolve,
  type ResolvedAddress,
  type ResolvingFetchOptions,
  type RuntimeGlobals,
} from './transport.js';
export { generateVaultKey, parseVaultKeys, Vault } from './vault.js';
