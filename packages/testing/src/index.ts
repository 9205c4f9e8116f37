export {
  type AuthorizationServerMetadataLocation,
  createTestWorld,
  type Endpoint,
  type Failure,
  type MetadataLocation,
  type RegisteredClient,
  type TestWorld,
  type TestWorldOptions,
  type WorldStats,
} from './world.js';
