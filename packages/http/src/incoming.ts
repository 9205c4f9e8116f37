import type { Broker } from '@keyway/core';

/** What the MCP gateway takes as a request: a Web `Request`, or its parts (core's `GatewayRequest`). */
export type Forwarded = Parameters<Broker['gateway']['mcp']>[2];

/* A request as the handler reads it, whatever runtime delivered it. */

/**
 * What the handler reads of a request: a Web `Request` wrapped, or a Node request read
 * directly by `toNodeHandler`, which then never builds a `Request` for a read.
 */
export interface Incoming {
  readonly method: string;
  /** The still-encoded path: the raw request target's, when the adapter kept it. */
  readonly path: string;
  /** The `Authorization` header (several joined with `, `, as `Headers.get` does), or null. */
  authorization(): string | null;
  /** A header's value (several joined with `, `), or null. */
  header(name: string): string | null;
  /** The query parameters. */
  searchParams(): URLSearchParams;
  /** The query as the target wrote it (`?…`, or empty), as a URL holds it. */
  search(): string;
  /**
   * The whole body, at most `limit` bytes: `payload_too_large` beyond (a declared length is
   * refused before reading), `invalid_request` when it ends early. On Node, read from the
   * socket with no Web `Request`.
   */
  bytes(limit: number): Promise<Uint8Array>;
  /** The request as a Web `Request`, made when first asked (the portal, hooks). */
  request(): Request;
  /** The client address the adapter or runtime gave beside the request, or null. */
  clientAddress(): string | null;
  /**
   * The request as the MCP gateway takes it: the Web `Request`, or on Node its method, its
   * headers and its body, not read yet (core reads it once the request holds its stream
   * slot), with no Web objects.
   */
  forwarded(): Forwarded;
}
