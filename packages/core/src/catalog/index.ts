/**
 * `@keyway/core/catalog`: the profiles of the `oauth2` template (docs/api.md §15), for an app
 * that writes its own or shows the built-in ones.
 *
 * @module
 */

export {
  BUILT_IN_PROFILES,
  catalogOf,
  mcpProfileView,
  type ProfileView,
  profileView,
} from './catalog.js';
export {
  BUILT_IN_MCP_PROFILES,
  type McpProfile,
  mcpCatalog,
  mcpProfileFor,
} from './mcp-profiles.js';
export { checkProfile, RESERVED_PARAMS } from './resolve.js';
export type { Profile, ProfileInput, ProfileParam, TokenResponseQuirks } from './schema.js';
