import type { ResourceServer } from 'oauth4webapi';
import type { OutboundFetch } from '../outbound/fetch.js';
import { allowedHostSet } from '../outbound/hosts.js';
import { inSpan, PROVIDER } from '../telemetry/tracing.js';
import { probeRequest, processProbeAnswer } from './probe.js';
import { checkRequirements, selectScopes } from './requirements.js';
import {
  processResourceMetadataResponse,
  resourceMetadataRequest,
  resourceMetadataUrls,
} from './resource-metadata.js';
import {
  authorizationServerMetadataUrls,
  legacyDefaults,
  processServerMetadataResponse,
  serverMetadataRequest,
} from './server-metadata.js';
import {
  type Discovery,
  type DiscoveryTrace,
  emptyTrace,
  failureNote,
  quoted,
  stringArray,
  throwUnlessDiscovered,
} from './trace.js';

/*
 * Discovery (docs/api.md §6): each step a request and the processing of its answer, in the
 * manner of oauth4webapi (`probe.ts`, `resource-metadata.ts`, `server-metadata.ts`,
 * `requirements.ts`); here they run in order and record the trace.
 */

export { checkRequirements, selectScopes } from './requirements.js';
export { resourceMatches, resourceMetadataUrls } from './resource-metadata.js';
export { authorizationServerMetadataUrls, issuerAccepted } from './server-metadata.js';
export {
  type Discovery,
  type DiscoveryStep,
  type DiscoveryTrace,
  quoted,
  resourceMismatched,
  throwUnlessDiscovered,
} from './trace.js';

/** Options of {@link discover}. */
export interface DiscoverOptions {
  /** Configured scopes (provider configuration or an authorize call). */
  scopes?: readonly string[];
  /**
   * Hosts whose endpoints may use plain `http` and private addresses (development), as the
   * outbound fetch allows them. Default none.
   */
  allowedHosts?: readonly string[];
  /** `assume_s256`: S256 for a server that does it without advertising it (docs/api.md §6 item 4). */
  pkce?: 'assume_s256';
  /**
   * `client_credentials`, `jwt_bearer`: for a client that gets its own tokens (docs/api.md
   * §14): no browser is sent anywhere, so neither an authorization endpoint nor PKCE is
   * required.
   */
  grant?: 'client_credentials' | 'jwt_bearer' | 'enterprise';
  /** The provider it is for, named on its `keyway.discovery` span (docs/api.md §16). */
  providerId?: string;
}

/**
 * Discovers a remote MCP endpoint's authorization setup (docs/api.md §6 steps 1–5), recording
 * every request in a trace. Never throws for a remote failure: the trace says what failed.
 * Every request goes through the guarded `outbound` fetch.
 *
 * @example
 * const trace = await discover(outbound, 'https://mcp.linear.app/mcp');
 * if (!trace.ok) console.log(trace.steps.filter((s) => !s.ok));
 */
export async function discover(
  outbound: OutboundFetch,
  resourceUrlText: string,
  options: DiscoverOptions = {},
): Promise<DiscoveryTrace> {
  const { providerId } = options;
  return inSpan(
    'keyway.discovery',
    providerId === undefined ? {} : { [PROVIDER]: providerId },
    async () => {
      const trace = await discoverResource(outbound, resourceUrlText);
      if (trace.resource === null) return trace;
      return discoverAuthorizationServer(outbound, trace, options);
    },
    (trace) => (trace.ok ? 'ok' : (trace.error ?? 'discovery_failed')),
  );
}

/**
 * Steps 1–3 of docs/api.md §6: the probe and the protected-resource metadata, or the
 * 2025-03-26 fallback (item 9) when the resource publishes none. On success the trace has
 * `resource` (and for a legacy server, `resource.authorization_servers` is its origin).
 * This is what an authorization re-reads to notice a move to another server.
 */
export async function discoverResource(
  outbound: OutboundFetch,
  resourceUrlText: string,
): Promise<DiscoveryTrace> {
  const trace = emptyTrace();
  const { steps } = trace;
  const resourceUrl = new URL(resourceUrlText);

  const probe = processProbeAnswer(resourceUrl, await probeRequest(outbound, resourceUrl));
  steps.push(probe.step);
  trace.challenge_scope = probe.challengeScope;

  const candidates =
    probe.metadataUrl !== null ? [probe.metadataUrl] : resourceMetadataUrls(resourceUrl);
  let found: { url: string; metadata: ResourceServer } | null = null;
  let notFound = 0;
  for (const url of candidates) {
    let result: Awaited<ReturnType<typeof processResourceMetadataResponse>>;
    try {
      result = await processResourceMetadataResponse(
        url,
        resourceUrl,
        await resourceMetadataRequest(outbound, url),
      );
    } catch (error) {
      steps.push({
        step: 'resource_metadata',
        url,
        status: null,
        ok: false,
        note: failureNote(error),
      });
      continue;
    }
    steps.push(...result.steps);
    if (result.outcome === 'mismatch') return trace;
    if (result.outcome === 'found') {
      found = { url, metadata: result.metadata };
      const read = result.steps.find((step) => step.step === 'resource_metadata' && step.ok);
      if (read !== undefined) read.document = { ...result.metadata };
      break;
    }
    if (result.notFound) notFound++;
  }
  if (found === null) {
    // docs/api.md §6 item 9: no challenge naming metadata, and every well-known URL answered 404:
    // a server of the 2025-03-26 revision, whose authorization server is at its origin.
    // Any other failure (an error, a 5xx) is not a reason to fall back.
    if (probe.metadataUrl === null && notFound === candidates.length) {
      trace.legacy = true;
      trace.resource = {
        resource: resourceUrl.href,
        resource_metadata_url: null,
        scopes_supported: null,
        authorization_servers: [resourceUrl.origin],
      };
      steps.push({
        step: 'legacy',
        url: null,
        status: null,
        ok: true,
        note: `no protected-resource metadata: a 2025-03-26 server, authorization at ${resourceUrl.origin}`,
      });
    }
    return trace;
  }
  const { metadata } = found;
  const servers = stringArray(metadata.authorization_servers) ?? [];
  if (servers.length === 0) {
    steps.push({
      step: 'resource_metadata',
      url: found.url,
      status: 200,
      ok: false,
      note: 'the metadata names no authorization server',
    });
    return trace;
  }
  trace.resource = {
    resource: metadata.resource,
    resource_metadata_url: found.url,
    scopes_supported: stringArray(metadata.scopes_supported),
    authorization_servers: servers,
  };
  return trace;
}

/**
 * Step 4 and the requirements of docs/api.md §6, after {@link discoverResource}: the first
 * authorization server's metadata (its `issuer` exactly the server's URL), the endpoints
 * and S256 that Keyway requires, every endpoint checked; then the scopes (step 5). For a
 * 2025-03-26 server, the metadata at its origin, else its default endpoints.
 */
export async function discoverAuthorizationServer(
  outbound: OutboundFetch,
  found: DiscoveryTrace,
  options: DiscoverOptions = {},
): Promise<DiscoveryTrace> {
  const trace: DiscoveryTrace = { ...found, steps: [...found.steps] };
  const { steps } = trace;
  const resource = trace.resource;
  const serverUrl = resource?.authorization_servers[0];
  if (resource === null || serverUrl === undefined) return trace;
  if (!URL.canParse(serverUrl)) {
    steps.push({
      step: 'authorization_server_metadata',
      url: null,
      status: null,
      ok: false,
      note: `the authorization server ${quoted(serverUrl)} is not a URL`,
    });
    return trace;
  }
  const issuer = new URL(serverUrl);
  const urls = trace.legacy
    ? [`${issuer.origin}/.well-known/oauth-authorization-server`]
    : authorizationServerMetadataUrls(issuer);
  let server = null;
  let foundAt: string | null = null;
  let notFound = 0;
  for (const url of urls) {
    let result: Awaited<ReturnType<typeof processServerMetadataResponse>>;
    try {
      result = await processServerMetadataResponse(
        url,
        serverUrl,
        trace.legacy,
        await serverMetadataRequest(outbound, url),
      );
    } catch (error) {
      const step = trace.legacy ? 'legacy' : 'authorization_server_metadata';
      steps.push({ step, url, status: null, ok: false, note: failureNote(error) });
      continue;
    }
    steps.push(result.step);
    if (result.outcome === 'refused') return trace;
    if (result.outcome === 'found') {
      result.step.document = { ...result.server };
      server = result.server;
      foundAt = url;
      break;
    }
    if (result.notFound) notFound++;
  }
  if (server === null && trace.legacy && notFound === urls.length) {
    server = legacyDefaults(issuer.origin);
    steps.push({
      step: 'legacy',
      url: issuer.origin,
      status: null,
      ok: true,
      note: 'no authorization-server metadata: the default endpoints /authorize, /token, /register',
    });
  }
  if (server === null) return trace;

  const checked = checkRequirements(
    server,
    allowedHostSet(options.allowedHosts),
    options.pkce,
    options.grant,
  );
  if (checked.warning !== undefined) steps.push(checked.warning);
  steps.push(checked.step);
  if (checked.info === null) {
    trace.error = 'unsupported_authorization_server';
    return trace;
  }
  const openid =
    foundAt?.includes('/.well-known/openid-configuration') === true ||
    checked.info.scopes_supported?.includes('openid') === true;
  trace.authorization_server = { ...checked.info, ...(openid ? { openid } : {}) };
  trace.scopes = selectScopes(
    options.scopes ?? [],
    trace.challenge_scope,
    resource.scopes_supported,
    checked.info.scopes_supported,
  );
  trace.ok = true;
  trace.error = null;
  return trace;
}

/**
 * Runs {@link discover} and throws unless it succeeded.
 *
 * @throws {KeywayError} `discovery_failed` (502) or `unsupported_authorization_server` (422),
 *   with the trace in `details`.
 */
export async function discoverOrThrow(
  outbound: OutboundFetch,
  resourceUrl: string,
  options: DiscoverOptions = {},
): Promise<Discovery> {
  return throwUnlessDiscovered(await discover(outbound, resourceUrl, options));
}
