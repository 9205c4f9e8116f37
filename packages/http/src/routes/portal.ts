import { type KeywayErrorCode, resourcePathFromUrl } from '@keyway/core';
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
 * The portal (docs/api.md §18): `{base}/portal/<prefix>` is one Streamable HTTP MCP server
 * made of every `mcp` connection at or below the prefix; core (the official SDK's server and
 * client classes) answers each request, and this route hands its answer on.
 */

const PORTAL_ERRORS: KeywayErrorCode[] = ['invalid_path', 'insufficient_scope'];

async function serve({ broker, principal, param, incoming }: RouteContext): Promise<Reply> {
  const response = await broker.portal.handle(
    principal,
    resourcePathFromUrl(param),
    incoming.request(),
  );
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    headers[name] = value;
  });
  // Nothing a portal answers belongs in a cache.
  headers['cache-control'] ??= 'no-store';
  return { status: response.status, headers, body: response.body };
}

const SESSION_ERRORS: Record<number, string> = {
  ...FOREIGN_ORIGIN,
  400: 'a message the MCP transport refuses (no session yet, not JSON-RPC)',
  404: 'the session is unknown, ended, or another credential’s (`Session not found`)',
  406: 'the `Accept` header leaves out a media type the transport answers with',
};

/** The JSON-RPC refusals of the portal's MCP transport, by method. */
const RPC_ERRORS: Partial<Record<Method, Record<number, string>>> = {
  POST: {
    ...SESSION_ERRORS,
    413: 'the message is too large',
    415: 'the body is not JSON',
    503: 'as many sessions are open as the portal may hold; retry later',
  },
  GET: { ...SESSION_ERRORS, 405: 'no stream without a session', 409: 'the stream is already open' },
  DELETE: SESSION_ERRORS,
};

const portalRoute = (method: Method, id: string, summary: string, ok: string): Route => ({
  method,
  path: '/portal/{prefix}',
  id,
  summary,
  see: '§18',
  param: resourcePath('prefix'),
  audience: endpointAudience('portal'),
  passThrough: {
    request: method === 'POST' ? ['application/json'] : [],
    response: method === 'DELETE' ? [] : ['application/json', 'text/event-stream'],
  },
  ok: { 200: { description: ok, schema: null } },
  errors: PORTAL_ERRORS,
  rpcErrors: RPC_ERRORS[method] ?? {},
  handle: serve,
});

export const PORTAL_ROUTES: Route[] = [
  portalRoute(
    'POST',
    'portalPost',
    'Portal: send a JSON-RPC message to the MCP server of every connection under the prefix.',
    'The portal’s answer: JSON, or an event stream (progress, logging, a server’s sampling request) ending ' +
      'with it; a JSON-RPC error -32042 with a consent URL when a connection needs its user.',
  ),
  portalRoute(
    'GET',
    'portalGet',
    'Portal: open the session’s event stream (the stateful wire): list changes and server requests.',
    'The session’s event stream.',
  ),
  portalRoute(
    'DELETE',
    'portalDelete',
    'Portal: end a session (`Mcp-Session-Id`) and its sessions with the servers.',
    'The session ended.',
  ),
];
