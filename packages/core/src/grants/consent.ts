import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import { selectScopes } from '../discovery/index.js';
import { utf8 } from '../platform/bytes.js';
import type {
  AuthorizationServerInfo,
  ConnectionState,
  PendingState,
  ProviderState,
} from '../storage/states.js';

/*
 * The pieces of a consent request (API.md §5 "Authorize", RFC 6749 §4.1.1, RFC 7636 §4.3,
 * RFC 8707 §2): the scopes asked for, the authorization URL, and the one-way names under
 * which its state and a verification flow are stored.
 */

/** The key of a pending authorization: SHA-256 of its `state`, in hex. */
export const hashState = (state: string) => bytesToHex(sha256(utf8(state)));

/**
 * The key of a user-verification flow: in another domain than states, so a flow id is
 * never taken as a state, nor a state as a flow id.
 */
export const hashFlowId = (flowId: string) => bytesToHex(sha256(utf8(`keyway-flow:${flowId}`)));

/** An OpenID provider: metadata from `openid-configuration`, or `openid` among its scopes. */
const isOpenIdProvider = (server: AuthorizationServerInfo): boolean =>
  server.openid === true || server.scopes_supported?.includes('openid') === true;

/**
 * The scopes to ask for: those of the call, else the provider's, chosen against what the
 * resource and server support (API.md §6 item 7). Without `scopes`, a connection that
 * already holds granted scopes asks for them too, so a step-up never loses one (item 12).
 */
export function requestedScopes(
  asked: string[] | undefined,
  provider: ProviderState,
  connection: ConnectionState | null,
): string[] {
  const chosen = selectScopes(
    asked ?? provider.configuration.scopes,
    provider.challenge_scope,
    provider.resource?.scopes_supported ?? null,
    provider.authorization_server.scopes_supported,
  );
  const granted =
    asked === undefined && connection !== null && connection.authorized_at !== null
      ? connection.scopes
      : [];
  // A profile's scopes every authorization needs (Microsoft's `offline_access`).
  const always = provider.oauth2?.scopes_always ?? [];
  return [...new Set([...chosen, ...granted, ...always])];
}

/** The consent URL at the provider's authorization endpoint (checked by the caller). */
export function consentUrl(
  provider: ProviderState,
  party: PendingState['party'],
  request: { redirectUri: string; state: string; challenge: string; scopes: string[] },
): string {
  const server = provider.authorization_server;
  const quirks = provider.oauth2;
  const url = new URL(server.authorization_endpoint);
  url.searchParams.set('response_type', 'code');
  url.searchParams.set('client_id', party.client_id);
  url.searchParams.set('redirect_uri', request.redirectUri);
  url.searchParams.set('state', request.state);
  if (quirks?.pkce !== 'none') {
    url.searchParams.set('code_challenge', request.challenge);
    url.searchParams.set('code_challenge_method', 'S256');
  }
  if (request.scopes.length > 0) {
    // A profile may want them comma-separated, or in Slack's `user_scope`.
    const separator = quirks?.scope_separator ?? ' ';
    url.searchParams.set(quirks?.scope_param ?? 'scope', request.scopes.join(separator));
  }
  if (party.resource !== null) url.searchParams.set('resource', party.resource);
  // The profile's parameters, then the provider's own (API.md §4): never one of the
  // above, checked when the catalog loads and at PUT.
  const extra = {
    ...quirks?.authorization_params,
    ...provider.configuration.authorization_params,
  };
  for (const [name, value] of Object.entries(extra)) url.searchParams.set(name, value);
  // OpenID Connect Core §11: an OpenID provider issues a refresh token for
  // `offline_access` only after an explicit consent (API.md §6 step 5).
  if (
    request.scopes.includes('offline_access') &&
    isOpenIdProvider(server) &&
    !('prompt' in extra)
  ) {
    url.searchParams.set('prompt', 'consent');
  }
  return url.href;
}
