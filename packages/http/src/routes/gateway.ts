import { type KeywayErrorCode, resourcePathFromUrl } from '@keyway/core';
import { RELAYED } from '@keyway/core/outbound';
import type { Reply } from '../responses.js';
import {
  endpointAudience,
  FOREIGN_ORIGIN,
  type Method,
  type Route,
  type RouteContext,
  resourcePath,
} from './route.js';

/*
 * The MCP gateway (docs/api.md §13): `{base}/mcp/<connection>` is a Streamable HTTP MCP
 * endpoint; core forwards each request and this route hands its answer on, body streamed.
 */

const GATEWAY_ERRORS: KeywayErrorCode[] = [
  'invalid_request',
  'invalid_path',
  'insufficient_scope',
  'not_found',
  'reauthorization_required',
  'payload_too_large',
  'rate_limited',
  'upstream_error',
];

/**
 * Core's answer is already a {@link Reply}'s shape: no Web `Response` between. Core's promise
 * itself, not one of an `async` function around it (a turn less for every call); what throws
 * before it is made is caught by the dispatcher as a rejection would be.
 */
function forward({ broker, principal, param, incoming }: RouteContext): Promise<Reply> {
  const request = incoming.forwarded();
  // Relayed: on Node the upstream's answer is piped to the socket, never a Web stream.
  return broker.gateway[RELAYED](principal, resourcePathFromUrl(param), request);
}

const gatewayRoute = (method: Method, id: string, summary: string, ok: string): Route => ({
  method,
  path: '/mcp/{connection_id}',
  id,
  summary,
  see: '§13',
  param: resourcePath('connection_id'),
  audience: endpointAudience('mcp'),
  passThrough: {
    request: method === 'POST' ? ['application/json'] : [],
    response: method === 'DELETE' ? [] : ['application/json', 'text/event-stream'],
  },
  ok: { 200: { description: ok, schema: null } },
  errors: GATEWAY_ERRORS,
  rpcErrors: FOREIGN_ORIGIN,
  handle: forward,
});

export const GATEWAY_ROUTES: Route[] = [
  gatewayRoute(
    'POST',
    'gatewayPost',
    'MCP gateway: send a JSON-RPC message to the connection’s MCP server.',
    'The MCP server’s answer as it came: JSON, or an event stream passed on as it arrives; or a JSON-RPC error ' +
      '-32042 with an authorization URL when the connection needs consent.',
  ),
  gatewayRoute(
    'GET',
    'gatewayGet',
    'MCP gateway: open the MCP server’s event stream (the stateful wire).',
    'The MCP server’s event stream, passed on as it arrives (or its 405).',
  ),
  gatewayRoute(
    'DELETE',
    'gatewayDelete',
    'MCP gateway: end an MCP session (`Mcp-Session-Id`).',
    'The MCP server’s answer.',
  ),
];

/**
 * The API proxy's path: what follows `/proxy/`, still encoded, checked and split in core.
 * Core's promise, as {@link forward} answers it.
 */
function proxy({ broker, principal, param, incoming }: RouteContext): Promise<Reply> {
  const request = incoming.forwarded();
  // The query as the caller wrote it: `%20` and `+` are not the same to every API.
  const query = incoming.search();
  // Its fields one by one: a Web `Request`'s are getters, which a spread would drop.
  const { method, headers, body, signal } = request;
  return broker.proxy[RELAYED](principal, {
    method,
    headers,
    body,
    ...(signal === undefined ? {} : { signal }),
    path: param,
    query,
  });
}

const PROXY_ERRORS: KeywayErrorCode[] = [
  ...GATEWAY_ERRORS.filter((code) => code !== 'insufficient_scope'),
];

const proxyRoute = (method: Method): Route => ({
  method,
  path: '/proxy/{connection_path}',
  id: `proxy${method[0]}${method.slice(1).toLowerCase()}`,
  summary: `API proxy: ${method} the connection's API (its provider's api_base_url) at the rest of the path.`,
  see: '§13',
  param: {
    name: 'connection_path',
    description:
      'A connection id (docs/api.md §2), then the path under the API base: the longest prefix that is a connection ' +
      'the credential covers is the connection.',
  },
  passThrough: {
    request: method === 'GET' || method === 'DELETE' ? [] : ['*/*'],
    response: ['*/*'],
  },
  ok: { 200: { description: "The API's answer as it came, its body streamed.", schema: null } },
  errors: PROXY_ERRORS,
  handle: proxy,
});

export const PROXY_ROUTES: Route[] = (['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const).map(
  proxyRoute,
);
