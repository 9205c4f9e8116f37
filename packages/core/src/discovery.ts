import * as oauth from 'oauth4webapi';
import { KeywayError } from './errors.js';
import { allowedHostSet, endpointProblem, OutboundError, type OutboundFetch } from './outbound.js';
import { oauthFetch } from './registration.js';
import type { AuthorizationServerInfo, ResourceInfo } from './stored.js';

/**
 * One step of a discovery trace, as `POST /api/admin/discover` shows it.
 *
 * @see API.md §6 steps 1–5; RFC 9728 §3; RFC 8414 §3
 */
export interface DiscoveryStep {
  /**
   * `probe`, `resource_metadata`, `resource_match`, `authorization_server_metadata`,
   * `requirements`; `legacy` for the 2025-03-26 fallback (API.md §6 item 9).
   */
  step: string;
  url: string | null;
  /** HTTP status, when there was an answer. */
  status: number | null;
  ok: boolean;
  note: string;
}

export type { AuthorizationServerInfo, ResourceInfo } from './stored.js';

/**
 * The outcome of a discovery run: a trace, and the results when it succeeded.
 *
 * @see API.md §6; RFC 9728; RFC 8414
 */
export interface DiscoveryTrace {
  ok: boolean;
  steps: DiscoveryStep[];
  resource: ResourceInfo | null;
  authorization_server: AuthorizationServerInfo | null;
  /** The `scope` of the 401 challenge, when there was one. */
  challenge_scope: string | null;
  /** Scopes to request, chosen per API.md §6 step 5. */
  scopes: string[];
  /** The server is of the 2025-03-26 revision: found by the fallback of API.md §6 item 9. */
  legacy: boolean;
  /** When not ok: the API.md code the failure answers with. */
  error: 'discovery_failed' | 'unsupported_authorization_server' | null;
}

/** A successful discovery. */
export interface Discovery extends DiscoveryTrace {
  ok: true;
  resource: ResourceInfo;
  authorization_server: AuthorizationServerInfo;
  error: null;
}

const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 0,
  method: 'initialize',
  params: {
    protocolVersion: '2025-06-18',
    capabilities: {},
    clientInfo: { name: 'keyway-discovery', version: '1' },
  },
});

/** What went wrong with a request, in words for a trace: never a body, never a secret. */
function describe(error: unknown): string {
  if (error instanceof OutboundError) return error.message;
  if (error instanceof oauth.OperationProcessingError) return error.message;
  if (error instanceof oauth.ResponseBodyError)
    return `${error.error}: ${error.error_description ?? ''}`.trim();
  if (error instanceof SyntaxError) return 'the answer is not valid JSON';
  return error instanceof Error ? error.message : 'the request failed';
}

function stringArray(value: unknown): string[] | null {
  return Array.isArray(value) && value.every((item) => typeof item === 'string') ? value : null;
}

/**
 * Whether protected-resource metadata's `resource` names the resource URL: the same origin,
 * and a path equal to, or a segment-wise prefix of, the resource URL's path (one trailing
 * `/` ignored). API.md §6 step 3.
 */
export function resourceMatches(metadataResource: string, resourceUrl: URL): boolean {
  let declared: URL;
  try {
    declared = new URL(metadataResource);
  } catch {
    return false;
  }
  if (declared.origin !== resourceUrl.origin || declared.search !== '' || declared.hash !== '')
    return false;
  const trim = (path: string) => (path.endsWith('/') ? path.slice(0, -1) : path);
  const prefix = trim(declared.pathname);
  const path = trim(resourceUrl.pathname);
  return path === prefix || path.startsWith(`${prefix}/`);
}

/** The RFC 9728 well-known URLs of a resource: path-inserted (when it has a path), then root. */
export function resourceMetadataUrls(resourceUrl: URL): string[] {
  const path = resourceUrl.pathname.replace(/\/$/, '');
  const root = `${resourceUrl.origin}/.well-known/oauth-protected-resource`;
  return path === '' ? [root] : [`${root}${path}`, root];
}

/**
 * The authorization-server metadata URLs to try, in the MCP specification's order: for an
 * issuer with a path, RFC 8414 path-inserted, OpenID path-inserted, OpenID appended; for
 * one without, RFC 8414 and OpenID at the root.
 */
export function authorizationServerMetadataUrls(issuer: URL): string[] {
  const path = issuer.pathname.replace(/\/$/, '');
  const origin = issuer.origin;
  if (path === '') {
    return [
      `${origin}/.well-known/oauth-authorization-server`,
      `${origin}/.well-known/openid-configuration`,
    ];
  }
  return [
    `${origin}/.well-known/oauth-authorization-server${path}`,
    `${origin}/.well-known/openid-configuration${path}`,
    `${origin}${path}/.well-known/openid-configuration`,
  ];
}

/**
 * The scopes to request (API.md §6 step 5): the configured ones when any, else the
 * challenge's `scope`, else the resource's `scopes_supported`, else none; `offline_access`
 * added only when the authorization server lists it.
 */
export function selectScopes(
  configured: readonly string[],
  challengeScope: string | null,
  resourceScopes: readonly string[] | null,
  serverScopes: readonly string[] | null,
): string[] {
  let scopes: string[];
  if (configured.length > 0) scopes = [...configured];
  else if (challengeScope !== null && challengeScope.trim() !== '')
    scopes = challengeScope.trim().split(/\s+/);
  else scopes = [...(resourceScopes ?? [])];
  if (serverScopes?.includes('offline_access') && !scopes.includes('offline_access')) {
    scopes.push('offline_access');
  }
  return [...new Set(scopes)];
}

/** Options of {@link discover}. */
export interface DiscoverOptions {
  /** Configured scopes (provider configuration or an authorize call). */
  scopes?: readonly string[];
  /**
   * Hosts whose endpoints may use plain `http` and private addresses (development), as the
   * outbound fetch allows them. Default none.
   */
  allowedHosts?: readonly string[];
}

/** The endpoints of authorization-server metadata that Keyway uses or sends a browser to. */
const CHECKED_ENDPOINTS = [
  'authorization_endpoint',
  'token_endpoint',
  'registration_endpoint',
  'revocation_endpoint',
  'jwks_uri',
] as const;

/**
 * Discovers a remote MCP endpoint's authorization setup (API.md §6 steps 1–5), recording
 * every request in a trace. Never throws for a remote failure: the trace says what failed.
 * Every request goes through the guarded `outbound` fetch.
 *
 * @example
 * const trace = await discover(broker.outbound, 'https://mcp.linear.app/mcp');
 * if (!trace.ok) console.log(trace.steps.filter((s) => !s.ok));
 */
export async function discover(
  outbound: OutboundFetch,
  resourceUrlText: string,
  options: DiscoverOptions = {},
): Promise<DiscoveryTrace> {
  const trace = await discoverResource(outbound, resourceUrlText);
  if (trace.resource === null) return trace;
  return discoverAuthorizationServer(outbound, trace, options);
}

/**
 * Whether discovery stopped because the metadata's `resource` names something else (step
 * 3): a definitive answer, unlike a server that could not be reached.
 */
export function resourceMismatched(trace: DiscoveryTrace): boolean {
  return trace.steps.some((step) => step.step === 'resource_match' && !step.ok);
}

/** An empty trace: nothing found yet. */
function emptyTrace(): DiscoveryTrace {
  return {
    ok: false,
    steps: [],
    resource: null,
    authorization_server: null,
    challenge_scope: null,
    scopes: [],
    legacy: false,
    error: 'discovery_failed',
  };
}

/**
 * Steps 1–3 of API.md §6: the probe and the protected-resource metadata, or the
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

  // Step 1: probe as an MCP client would, without credentials. oauth4webapi's own https
  // check is relaxed everywhere: the outbound guard decides (https, or plain http only for
  // allowed hosts).
  let metadataUrl: string | null = null;
  let probeStatus: number | null = null;
  try {
    const stripped = (url: string, init?: RequestInit) => {
      const headers = new Headers(init?.headers);
      headers.delete('authorization');
      return outbound(url, { ...init, headers });
    };
    const response = await oauth.protectedResourceRequest(
      'probe',
      'POST',
      resourceUrl,
      new Headers({
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      }),
      INITIALIZE,
      { [oauth.customFetch]: oauthFetch(stripped), [oauth.allowInsecureRequests]: true },
    );
    probeStatus = response.status;
    const session = response.headers.get('mcp-session-id');
    if (session !== null) {
      // The probe opened a session: close it (best effort).
      await stripped(resourceUrl.href, {
        method: 'DELETE',
        headers: { 'mcp-session-id': session },
      }).catch(() => {});
    }
    steps.push({
      step: 'probe',
      url: resourceUrl.href,
      status: probeStatus,
      ok: true,
      note: 'no challenge: the server let initialize through; trying well-known metadata',
    });
  } catch (error) {
    if (error instanceof oauth.WWWAuthenticateChallengeError) {
      const bearer = error.cause.find((challenge) => challenge.scheme === 'bearer');
      metadataUrl = bearer?.parameters.resource_metadata ?? null;
      trace.challenge_scope = bearer?.parameters.scope ?? null;
      steps.push({
        step: 'probe',
        url: resourceUrl.href,
        status: error.status,
        ok: true,
        note: metadataUrl
          ? `challenge names the resource metadata${trace.challenge_scope ? ` and scope "${trace.challenge_scope}"` : ''}`
          : 'challenge without resource_metadata; trying well-known metadata',
      });
    } else {
      steps.push({
        step: 'probe',
        url: resourceUrl.href,
        status: null,
        ok: false,
        note: describe(error),
      });
    }
  }

  // Step 2: the protected-resource metadata.
  const candidates = metadataUrl !== null ? [metadataUrl] : resourceMetadataUrls(resourceUrl);
  let metadata: oauth.ResourceServer | null = null;
  let foundAt: string | null = null;
  let notFound = 0;
  for (const url of candidates) {
    try {
      const response = await outbound(url, { headers: { accept: 'application/json' } });
      if (response.status !== 200) {
        await response.body?.cancel().catch(() => {});
        if (response.status === 404) notFound++;
        steps.push({
          step: 'resource_metadata',
          url,
          status: response.status,
          ok: false,
          note: `HTTP ${response.status}`,
        });
        continue;
      }
      const body = (await response.clone().json()) as { resource?: unknown };
      // Step 3 comes first: oauth4webapi compares `resource` for equality with what it is
      // given, and API.md also allows a segment-wise prefix of the resource URL.
      if (typeof body.resource !== 'string' || !resourceMatches(body.resource, resourceUrl)) {
        steps.push({ step: 'resource_metadata', url, status: 200, ok: true, note: 'fetched' });
        steps.push({
          step: 'resource_match',
          url,
          status: null,
          ok: false,
          note: `metadata resource ${quoted(body.resource ?? '')} does not match ${resourceUrl.href}`,
        });
        return trace;
      }
      metadata = await oauth.processResourceDiscoveryResponse(new URL(body.resource), response);
      foundAt = url;
      steps.push({
        step: 'resource_metadata',
        url,
        status: 200,
        ok: true,
        note: 'fetched and valid',
      });
      steps.push({
        step: 'resource_match',
        url,
        status: null,
        ok: true,
        note: `resource ${metadata.resource}`,
      });
      break;
    } catch (error) {
      steps.push({
        step: 'resource_metadata',
        url,
        status: null,
        ok: false,
        note: describe(error),
      });
    }
  }
  if (metadata === null || foundAt === null) {
    // API.md §6 item 9: no challenge naming metadata, and every well-known URL answered 404:
    // a server of the 2025-03-26 revision, whose authorization server is at its origin.
    // Any other failure (an error, a 5xx) is not a reason to fall back.
    if (metadataUrl === null && notFound === candidates.length) {
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
  const servers = stringArray(metadata.authorization_servers) ?? [];
  if (servers.length === 0) {
    steps.push({
      step: 'resource_metadata',
      url: foundAt,
      status: 200,
      ok: false,
      note: 'the metadata names no authorization server',
    });
    return trace;
  }
  const resourceScopes = stringArray(metadata.scopes_supported);
  trace.resource = {
    resource: metadata.resource,
    resource_metadata_url: foundAt,
    scopes_supported: resourceScopes,
    authorization_servers: servers,
  };

  return trace;
}

/**
 * Whether a metadata `issuer` is the authorization-server URL exactly (RFC 8414 §3.3; an
 * empty path with or without one `/`). For a 2025-03-26 server (`legacy`), which had no
 * issuer to compare with, any issuer on the server URL's own origin: servers of that time
 * publish one with a path (`…/oauth`) at their origin's metadata.
 */
export function issuerAccepted(published: unknown, serverUrl: string, legacy = false): boolean {
  if (typeof published !== 'string') return false;
  if (published === serverUrl) return true;
  if (!URL.canParse(published) || !URL.canParse(serverUrl)) return false;
  const url = new URL(serverUrl);
  if (legacy) return new URL(published).origin === url.origin;
  if (url.pathname !== '/' || url.search !== '' || url.hash !== '') return false;
  const bare = serverUrl.endsWith('/') ? serverUrl.slice(0, -1) : serverUrl;
  return published === bare || published === `${bare}/`;
}

/** Quotes a value from a remote document for a trace note or an error, shortened. */
export function quoted(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

/** The default endpoints of a 2025-03-26 server without metadata, at its origin. */
function legacyDefaults(origin: string): oauth.AuthorizationServer {
  return {
    issuer: origin,
    authorization_endpoint: `${origin}/authorize`,
    token_endpoint: `${origin}/token`,
    registration_endpoint: `${origin}/register`,
    // That revision requires PKCE of every client; S256 is what Keyway sends.
    code_challenge_methods_supported: ['S256'],
  };
}

/**
 * Step 4 and the requirements of API.md §6, after {@link discoverResource}: the first
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
  if (resource === null) return trace;
  const serverUrl = resource.authorization_servers[0] as string;
  let issuer: URL;
  try {
    issuer = new URL(serverUrl);
  } catch {
    steps.push({
      step: 'authorization_server_metadata',
      url: null,
      status: null,
      ok: false,
      note: `the authorization server ${quoted(serverUrl)} is not a URL`,
    });
    return trace;
  }
  const metadataStep = trace.legacy ? 'legacy' : 'authorization_server_metadata';
  const urls = trace.legacy
    ? [`${issuer.origin}/.well-known/oauth-authorization-server`]
    : authorizationServerMetadataUrls(issuer);
  let server: oauth.AuthorizationServer | null = null;
  let notFound = 0;
  for (const url of urls) {
    let status: number | null = null;
    try {
      const response = await outbound(url, { headers: { accept: 'application/json' } });
      status = response.status;
      if (status !== 200) {
        await response.body?.cancel().catch(() => {});
        if (status === 404) notFound++;
        steps.push({ step: metadataStep, url, status, ok: false, note: `HTTP ${status}` });
        continue;
      }
      const published = ((await response.clone().json()) as { issuer?: unknown }).issuer;
      if (!issuerAccepted(published, serverUrl, trace.legacy)) {
        // A wrong issuer is an attack or a misconfiguration, never a reason to look
        // elsewhere (RFC 8414 §3.3, mix-up).
        steps.push({
          step: metadataStep,
          url,
          status,
          ok: false,
          note: `the metadata's "issuer" is ${quoted(published)}, not ${quoted(serverUrl)} exactly: refused (RFC 8414 §3.3)`,
        });
        return trace;
      }
      // The issuer is kept as published: the callback compares `iss` with it exactly.
      server = await oauth.processDiscoveryResponse(new URL(published as string), response);
      steps.push({ step: metadataStep, url, status, ok: true, note: `issuer ${server.issuer}` });
      break;
    } catch (error) {
      steps.push({ step: metadataStep, url, status, ok: false, note: describe(error) });
    }
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

  // The seed's requirements: authorization endpoint, token endpoint, issuer, PKCE S256.
  const problems: string[] = [];
  for (const field of ['authorization_endpoint', 'token_endpoint'] as const) {
    if (typeof server[field] !== 'string')
      problems.push(
        `"${field}" is ${server[field] === undefined ? 'absent' : quoted(server[field])}`,
      );
  }
  const methods = stringArray(server.code_challenge_methods_supported) ?? [];
  if (!methods.includes('S256')) {
    problems.push(
      server.code_challenge_methods_supported === undefined
        ? '"code_challenge_methods_supported" is absent (PKCE S256 is required; absent counts as unsupported)'
        : `"code_challenge_methods_supported" is ${quoted(server.code_challenge_methods_supported)}, without "S256" (PKCE S256 is required)`,
    );
  }
  if (problems.length > 0) {
    steps.push({
      step: 'requirements',
      url: null,
      status: null,
      ok: false,
      note: problems.join('; '),
    });
    trace.error = 'unsupported_authorization_server';
    return trace;
  }
  // Every endpoint is checked before it is used: a browser is sent to the authorization
  // endpoint (a javascript: or data: URL would run there), and the others receive secrets.
  const allowedHosts = allowedHostSet(options.allowedHosts);
  for (const field of CHECKED_ENDPOINTS) {
    const value = server[field];
    if (value === undefined || value === null) continue;
    const problem =
      typeof value === 'string' ? endpointProblem(value, allowedHosts) : 'is not a string';
    if (problem !== null) {
      steps.push({
        step: 'requirements',
        url: null,
        status: null,
        ok: false,
        note: `"${field}" ${quoted(value)} ${problem}`,
      });
      trace.error = 'unsupported_authorization_server';
      return trace;
    }
  }
  steps.push({
    step: 'requirements',
    url: null,
    status: null,
    ok: true,
    note: 'authorization and token endpoints, issuer, S256; every endpoint https',
  });
  const serverScopes = stringArray(server.scopes_supported);
  trace.authorization_server = {
    issuer: server.issuer,
    authorization_endpoint: server.authorization_endpoint as string,
    token_endpoint: server.token_endpoint as string,
    registration_endpoint:
      typeof server.registration_endpoint === 'string' ? server.registration_endpoint : null,
    revocation_endpoint:
      typeof server.revocation_endpoint === 'string' ? server.revocation_endpoint : null,
    scopes_supported: serverScopes,
    code_challenge_methods_supported: methods,
    token_endpoint_auth_methods_supported: stringArray(
      server.token_endpoint_auth_methods_supported,
    ),
    client_id_metadata_document_supported: server.client_id_metadata_document_supported === true,
    authorization_response_iss_parameter_supported:
      server.authorization_response_iss_parameter_supported === true,
  };
  trace.scopes = selectScopes(
    options.scopes ?? [],
    trace.challenge_scope,
    resource.scopes_supported,
    serverScopes,
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

/**
 * A successful trace as a {@link Discovery}; otherwise the error it answers with.
 *
 * @throws {KeywayError} `discovery_failed` (502) or `unsupported_authorization_server` (422),
 *   with the trace in `details`.
 */
export function throwUnlessDiscovered(trace: DiscoveryTrace): Discovery {
  if (trace.ok) return trace as Discovery;
  const failed = [...trace.steps].reverse().find((step) => !step.ok);
  const code = trace.error ?? 'discovery_failed';
  const summary =
    code === 'unsupported_authorization_server'
      ? `the authorization server does not meet what Keyway requires (${failed?.note ?? 'unknown'})`
      : `discovery failed at ${failed?.step ?? 'an unknown step'}: ${failed?.note ?? 'no details'}`;
  throw new KeywayError(code, summary, { details: trace.steps.map((step) => ({ ...step })) });
}
