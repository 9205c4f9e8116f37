import {
  discoverAuthorizationServer,
  discoverResource,
  resourceMismatched,
  throwUnlessDiscovered,
} from '../discovery/index.js';
import type { OutboundFetch } from '../outbound/fetch.js';
import type { ProviderState } from '../storage/states.js';
import { inSpan, PROVIDER } from '../telemetry/tracing.js';

/**
 * A provider's state with its protected-resource metadata read again, before a new
 * authorization (API.md §6 item 4): the resource's current metadata and challenge scope,
 * and when it names another authorization server, that server's metadata. A read that
 * fails for a transient reason keeps what is stored; a legacy provider (no metadata) is
 * left as it is. Registrations are copied, for the caller to add to.
 *
 * @throws {KeywayError} `discovery_failed` when the metadata's `resource` no longer matches,
 *   `unsupported_authorization_server` and the errors of discovering a new server.
 */
export async function rediscovered(
  outbound: OutboundFetch,
  allowedHosts: readonly string[],
  state: ProviderState,
  providerId: string,
): Promise<ProviderState> {
  return inSpan('keyway.discovery', { [PROVIDER]: providerId }, () =>
    rediscover(outbound, allowedHosts, state),
  );
}

async function rediscover(
  outbound: OutboundFetch,
  allowedHosts: readonly string[],
  state: ProviderState,
): Promise<ProviderState> {
  const next: ProviderState = { ...state, registrations: { ...state.registrations } };
  // An `oauth2` provider has no discovery: its endpoints are its profile's.
  const { resource_url: resourceUrl } = state.configuration;
  if (state.legacy === true || state.resource === null || resourceUrl === undefined) return next;
  const found = await discoverResource(outbound, resourceUrl);
  if (resourceMismatched(found)) throwUnlessDiscovered(found);
  if (found.resource === null || found.legacy) return next;
  next.resource = found.resource;
  next.challenge_scope = found.challenge_scope;
  if (found.resource.authorization_servers[0] !== state.resource.authorization_servers[0]) {
    const server = throwUnlessDiscovered(
      await discoverAuthorizationServer(outbound, found, {
        scopes: state.configuration.scopes,
        allowedHosts,
        ...(state.configuration.pkce === undefined ? {} : { pkce: state.configuration.pkce }),
        ...(state.grant === undefined ? {} : { grant: state.grant }),
      }),
    );
    next.authorization_server = server.authorization_server;
  }
  return next;
}
