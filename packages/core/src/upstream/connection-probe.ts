import * as oauth from 'oauth4webapi';
import { assertCoversPath, type Principal } from '../auth/principal.js';
import { parseResourcePath } from '../auth/resource-path.js';
import type { ProbeResult, ProbeStep } from '../contract/probe-result.js';
import { quoted } from '../discovery/index.js';
import { OutboundError } from '../outbound/network-failure.js';
import { RESOURCE_CHANGED } from '../providers/party.js';
import { renewable } from '../storage/states.js';
import { inSpan, PROVIDER } from '../telemetry/tracing.js';
import { createConnectionFetch, InsufficientScopeError } from './connection-fetch.js';
import type { UpstreamDeps } from './deps.js';
import { usableFor } from './send.js';

/*
 * The connection probe (docs/api.md §8): an MCP conversation with the provider's server using
 * the connection's token, reported step by step. It speaks both wires: the stateless one of
 * revision 2026-07-28 (`server/discover`, then requests that carry the protocol version in
 * a header and `params._meta`), and, when the server does not know `server/discover`, the
 * stateful one (`initialize`, `notifications/initialized`, requests in the session, the
 * session closed at the end).
 */

export type { ProbeResult, ProbeStep } from '../contract/probe-result.js';

type McpFetch = (input: string, init: RequestInit) => Promise<Response>;

const STATELESS = '2026-07-28';
const STATEFUL = '2025-11-25';
const CLIENT = { name: 'keyway-probe', version: '1' };
/** At most this many tools are reported. */
const MAX_TOOLS = 200;

interface RpcOutcome {
  status: number;
  session: string | null;
  result: Record<string, unknown> | null;
  error: { code: number; message: string } | null;
}

/** The JSON-RPC message answering `id`, in a JSON body or a `text/event-stream` one. */
function answerTo(id: number, contentType: string, body: string): Record<string, unknown> | null {
  const candidates: unknown[] = [];
  if (contentType.includes('text/event-stream')) {
    for (const event of body.split(/\r?\n\r?\n/)) {
      const data = event
        .split(/\r?\n/)
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).trimStart())
        .join('\n');
      if (data === '') continue;
      try {
        candidates.push(JSON.parse(data));
      } catch {
        // An event that is not JSON is not an answer.
      }
    }
  } else {
    try {
      const parsed: unknown = JSON.parse(body);
      candidates.push(...(Array.isArray(parsed) ? parsed : [parsed]));
    } catch {
      return null;
    }
  }
  for (const candidate of candidates) {
    if (typeof candidate === 'object' && candidate !== null && 'id' in candidate) {
      if (candidate.id === id) return candidate as Record<string, unknown>;
    }
  }
  return null;
}

const objectOr = (value: unknown): Record<string, unknown> | null =>
  typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : null;

/** Why a request failed, in words for a step: never a token. */
function failureNote(error: unknown): string {
  if (error instanceof InsufficientScopeError) {
    const named = error.scopes.length ? `: ${error.scopes.join(' ')}` : '';
    return `the server needs more scope (HTTP 403 insufficient_scope${named})`;
  }
  if (error instanceof OutboundError) return error.message;
  if (error instanceof oauth.OperationProcessingError) return error.message;
  return error instanceof Error ? error.message : 'the request failed';
}

/** The step each method of the probe belongs to. */
const STEP_OF: Record<string, ProbeStep['step']> = {
  'server/discover': 'discover',
  initialize: 'initialize',
  'notifications/initialized': 'initialized',
  'tools/list': 'tools/list',
};

/** What a server says of itself (`serverInfo`), with the protocol version spoken. */
function serverOf(
  result: Record<string, unknown>,
  protocol: string,
): NonNullable<ProbeResult['server']> {
  const info = objectOr(result.serverInfo);
  return {
    name: String(info?.name ?? ''),
    version: String(info?.version ?? ''),
    protocol_version: protocol,
  };
}

/** Runs the probe against `resourceUrl` through `fetchMcp` (the token is added by it). */
export async function probeMcp(fetchMcp: McpFetch, resourceUrl: string): Promise<ProbeResult> {
  const steps: ProbeStep[] = [];
  let nextId = 1;
  let session: string | null = null;
  /** The protocol version of the requests: `STATELESS` while on the stateless wire. */
  let version: string | null = null;
  /** The step the request in flight belongs to: a failure is reported there. */
  let stage: ProbeStep['step'] = 'discover';

  const send = async (
    method: string,
    params: Record<string, unknown> | null,
    notification = false,
  ): Promise<RpcOutcome> => {
    stage = STEP_OF[method] ?? stage;
    const id = nextId++;
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    };
    if (version !== null) headers['mcp-protocol-version'] = version;
    if (session !== null) headers['mcp-session-id'] = session;
    const meta =
      version === STATELESS
        ? {
            _meta: {
              'io.modelcontextprotocol/protocolVersion': STATELESS,
              'io.modelcontextprotocol/clientCapabilities': {},
              'io.modelcontextprotocol/clientInfo': CLIENT,
            },
          }
        : {};
    const message = notification
      ? { jsonrpc: '2.0', method, ...(params === null ? {} : { params }) }
      : { jsonrpc: '2.0', id, method, params: { ...(params ?? {}), ...meta } };
    const response = await fetchMcp(resourceUrl, {
      method: 'POST',
      headers,
      body: JSON.stringify(message),
    });
    const text = await response.text();
    const answer = notification
      ? null
      : answerTo(id, response.headers.get('content-type') ?? '', text);
    const error = objectOr(answer?.error);
    return {
      status: response.status,
      session: response.headers.get('mcp-session-id'),
      result: objectOr(answer?.result),
      error:
        error === null
          ? null
          : { code: Number(error.code), message: String(error.message ?? '').slice(0, 200) },
    };
  };
  const httpNote = (outcome: RpcOutcome) =>
    outcome.status === 401
      ? 'the server refused the token (HTTP 401), also after a refresh'
      : outcome.error !== null
        ? `JSON-RPC error ${outcome.error.code}: ${outcome.error.message}`
        : `HTTP ${outcome.status}, no answer to the request`;
  const failed = (step: ProbeStep['step'], status: number | null, note: string): ProbeResult => {
    steps.push({ step, status, ok: false, note });
    return { ok: false, server: null, tools: [], steps };
  };

  let server: ProbeResult['server'] = null;
  try {
    // The stateless wire first: a 2026-07-28 server answers server/discover.
    version = STATELESS;
    const discovered = await send('server/discover', {});
    if (discovered.status === 401) return failed('discover', 401, httpNote(discovered));
    if (discovered.status === 200 && discovered.result !== null) {
      server = serverOf(discovered.result, STATELESS);
      steps.push({
        step: 'discover',
        status: 200,
        ok: true,
        note: `a ${STATELESS} server: ${quoted(server.name)} ${quoted(server.version)}`,
      });
    } else {
      steps.push({
        step: 'discover',
        status: discovered.status,
        ok: true,
        note: `no server/discover (${httpNote(discovered)}): the stateful wire`,
      });
      version = null;
      const initialized = await send('initialize', {
        protocolVersion: STATEFUL,
        capabilities: {},
        clientInfo: CLIENT,
      });
      if (initialized.result === null) {
        return failed('initialize', initialized.status, httpNote(initialized));
      }
      session = initialized.session;
      const negotiated = String(initialized.result.protocolVersion ?? STATEFUL);
      version = negotiated;
      server = serverOf(initialized.result, negotiated);
      steps.push({
        step: 'initialize',
        status: initialized.status,
        ok: true,
        note:
          `${quoted(server.name)} ${quoted(server.version)}, protocol ` +
          `${negotiated}${session === null ? '' : ', in a session'}`,
      });
      const notified = await send('notifications/initialized', null, true);
      steps.push({
        step: 'initialized',
        status: notified.status,
        ok: notified.status < 300,
        note: notified.status < 300 ? 'acknowledged' : `HTTP ${notified.status}`,
      });
    }
    const listed = await send('tools/list', {});
    if (listed.result === null)
      return { ...failed('tools/list', listed.status, httpNote(listed)), server };
    const tools = (Array.isArray(listed.result.tools) ? listed.result.tools : [])
      .map(objectOr)
      .filter(
        (tool): tool is Record<string, unknown> => tool !== null && typeof tool.name === 'string',
      )
      .slice(0, MAX_TOOLS)
      .map((tool) => ({
        name: String(tool.name),
        description: typeof tool.description === 'string' ? tool.description.slice(0, 500) : '',
      }));
    steps.push({
      step: 'tools/list',
      status: listed.status,
      ok: true,
      note: `${tools.length} tool${tools.length === 1 ? '' : 's'}`,
    });
    if (session !== null) {
      const closing = await fetchMcp(resourceUrl, {
        method: 'DELETE',
        headers: {
          'mcp-session-id': session,
          ...(version ? { 'mcp-protocol-version': version } : {}),
        },
      }).catch(() => null);
      await closing?.body?.cancel().catch(() => {});
      steps.push({
        step: 'close',
        status: closing?.status ?? null,
        ok: true,
        note: closing === null ? 'the session could not be closed (best effort)' : 'session closed',
      });
    }
    return { ok: true, server, tools, steps };
  } catch (error) {
    return {
      ...failed(stage, error instanceof InsufficientScopeError ? 403 : null, failureNote(error)),
      server,
    };
  }
}

/**
 * Checks that a connection really works (docs/api.md §8): an MCP conversation with its
 * provider's server using the connection's token (refreshed first when due, and once more
 * on a `401`), through the guarded outbound fetch, reported step by step, in a
 * `keyway.probe` span. The token never appears in the answer.
 *
 * @throws {KeywayError} `invalid_path`, `insufficient_scope`, `not_found`,
 *   `connection_not_active`, `reauthorization_required`, `upstream_error`.
 */
export async function probeConnection(
  deps: UpstreamDeps,
  principal: Principal,
  id: string,
): Promise<ProbeResult> {
  const connectionId = parseResourcePath(id);
  // The token is read (and refreshed when due) before anything is sent: a connection
  // that cannot hand one out fails here, with its own error. The first request uses it;
  // only a 401 asks for another, forced.
  assertCoversPath(principal, connectionId);
  const first = await usableFor(deps, connectionId, false);
  const providerId = first.record.providerId;
  // The token goes to the endpoint it was authorized for, never to the provider's
  // current one: a provider re-pointed by whoever manages it must not receive it.
  const target = await deps.records.resourceUrlOf(providerId, first.tokens.party);
  if (target === null) {
    throw await deps.records.requireReauthorization(
      connectionId,
      RESOURCE_CHANGED,
      RESOURCE_CHANGED.description,
    );
  }
  // A token the server refused is refreshed once, when there is a refresh token. The
  // token never leaves the broker here, so no hand-out is recorded.
  const refreshable = renewable(first.tokens);
  const fetchMcp = createConnectionFetch(
    async ({ forceRefresh }) =>
      forceRefresh && refreshable
        ? (await usableFor(deps, connectionId, true)).tokens
        : first.tokens,
    { fetch: (url, init) => deps.outbound(url, init) },
  );
  return inSpan(
    'keyway.probe',
    { [PROVIDER]: providerId },
    () => probeMcp((url, init) => fetchMcp(url, init), target),
    (result) => (result.ok ? 'ok' : 'failed'),
  );
}
