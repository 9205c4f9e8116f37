/**
 * `@keyway/core/sign-in`: what a server adapter needs of Keyway as the authorization server
 * of its MCP endpoints (docs/api.md §17) — the steps the authorization endpoint answers, the
 * OAuth endpoints' refusals, grants and token answers. `broker.signIn` is the service.
 *
 * @see [docs/api.md §17](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#17-sign-in-for-mcp-clients)
 */
export type { GrantView, TokenAnswer } from './grants.js';
export type { ClientShown, SignInAnswer, SignInStep } from './pages.js';
export type { GrantListQueryInput, SignInService } from './service.js';
export type { SignInConfig } from './settings.js';
export { OAuthError, type OAuthErrorCode } from './token-requests.js';
