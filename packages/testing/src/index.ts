export {
  connectInWorld,
  createTestBroker,
  gatewayFetch,
  TEST_ROOT_KEY,
} from './broker.js';
export {
  type AuthorizationServerMetadataLocation,
  type ClassicQuirks,
  createTestWorld,
  type Endpoint,
  type Failure,
  type MetadataLocation,
  type RegisteredClient,
  type TestWorld,
  type TestWorldOptions,
  type TokenResponseQuirks,
  type WorldStats,
} from './world.js';
