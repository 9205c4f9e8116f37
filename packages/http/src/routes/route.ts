import {
  type Broker,
  type KeywayErrorCode,
  type Principal,
  resourcePathFromUrl,
} from '@keyway/core';
import type { ContractShape, JsonSchema, QueryShape } from '@keyway/core/contract';
import type { Incoming } from '../incoming.js';
import type { Reply } from '../responses.js';

/*
 * One declaration per operation of the HTTP contract: the dispatcher routes by it and the
 * OpenAPI document (docs/api.md §10) is written from it, so the two can never disagree.
 */

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** What a route's handler gets. */
export interface RouteContext {
  broker: Broker;
  incoming: Incoming;
  /** The authenticated caller (a public route has none: reading it throws). */
  readonly principal: Principal;
  /** The path parameter, still percent-encoded (`''` without one). */
  param: string;
  /**
   * The JSON body, read on demand with the size and media-type checks. A handler passes it
   * on as the operation's input type: core parses every input (the type is what a
   * TypeScript caller writes; the parse is for every caller, this one included).
   */
  body(): Promise<unknown>;
  /** The form body (`application/x-www-form-urlencoded`), read on demand with the same checks. */
  form(): Promise<URLSearchParams>;
  /** The query parameters, typed for the route's `query` schema. */
  query(): Record<string, unknown>;
  /** Whether the inspector is served: the callback page then loads its script. */
  inspector: boolean;
  /** Origins that may frame the connect page (docs/api.md §19); none by default. */
  connectFrameAncestors: readonly string[];
  /** The client's address (for the limit of failed authentications), or `null`. */
  clientAddress(): string | null;
  /** The OpenAPI document, as text (built once). */
  document(): string;
}

/** One operation: how it is called, what it answers, and its handler. */
export interface Route {
  method: Method;
  /** The OpenAPI path template, e.g. `/api/admin/tokens/{name}`: a parameter is the rest. */
  path: string;
  /** The OpenAPI `operationId`. */
  id: string;
  summary: string;
  /** The section of docs/api.md it implements, and any RFC: `§5; RFC 7009`. */
  see: string;
  /** Reached without a credential. */
  public?: boolean;
  /** Left out of the OpenAPI document (the inspector's page and assets). */
  undocumented?: boolean;
  /** The path parameter: its name and what it holds. */
  param?: { name: string; description: string };
  /**
   * The endpoint a request of this route is for, from its path parameter: a token bound to
   * one endpoint (an MCP client's, docs/api.md §17) is accepted only where this names it.
   * Routes without it refuse such tokens.
   */
  audience?: (param: string) => string;
  /** The query string's shape in core's contract. */
  query?: QueryShape;
  /** The JSON body's shape in core's contract (core parses the body with it). */
  body?: ContractShape;
  /**
   * Success answers: the body's shape in core's contract, a JSON Schema of its own, or
   * `null` for a body that is not JSON (or none).
   */
  ok: Record<number, { description: string; schema: ContractShape | JsonSchema | null }>;
  /** The error codes this operation answers with, besides those of every route. */
  errors: KeywayErrorCode[];
  /**
   * A body that is not Keyway's JSON (the gateway's MCP messages): the media types of the
   * request and of the success answers, for the document.
   */
  passThrough?: { request: string[]; response: string[] };
  /** Answers of another media type the document names (the callback's HTML page). */
  pages?: Record<number, string>;
  /**
   * Statuses at which an MCP server of Keyway's own (the portal) refuses a message by MCP's
   * transport rules, with a JSON-RPC error body: a missing or unknown session, a media
   * type it does not take.
   */
  rpcErrors?: Record<number, string>;
  handle(context: RouteContext): Promise<Reply>;
}

/**
 * The endpoint a request to one of Keyway's MCP servers is for, as a sign-in token names it
 * (§17): `mcp/<connection path>` (the gateway) or `portal/<prefix>` (the portal). A path
 * that is no resource path names no endpoint (the route then answers `invalid_path` to any
 * other token).
 */
export function endpointAudience(kind: 'mcp' | 'portal'): (param: string) => string {
  return (param) => {
    try {
      return `${kind}/${resourcePathFromUrl(param)}`;
    } catch {
      return '';
    }
  };
}

/** The refusal every MCP endpoint (§13, §18) documents: DNS rebinding protection. */
export const FOREIGN_ORIGIN = {
  403: 'the `Origin` header names another origin than the broker’s (DNS rebinding protection)',
};

const RESOURCE_PATH =
  'A resource path (docs/api.md §2): slash-delimited segments, sent as they are in the URL path.';

/** A path parameter that is a resource path (slashes included). */
export const resourcePath = (name: string) => ({ name, description: RESOURCE_PATH });

/**
 * A path parameter decoded (`%2F` and the like); one that is not percent-decodable is kept
 * as sent, for core to refuse as the name or id it is not.
 */
export function decodedParam(param: string): string {
  try {
    return decodeURIComponent(param);
  } catch {
    return param;
  }
}

/** The errors of every route that reads a JSON body. */
export const BODY_ERRORS: KeywayErrorCode[] = [
  'invalid_request',
  'payload_too_large',
  'unsupported_media_type',
];
