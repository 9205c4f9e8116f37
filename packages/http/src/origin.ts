/*
 * DNS rebinding protection for the MCP endpoints (docs/api.md §13, §18; MCP Streamable
 * HTTP, "Security Warning"): a browser page of another origin whose name was made to point
 * at the broker must not reach them. A request without `Origin` (any client that is not a
 * browser) passes; one whose `Origin` is not the broker's own is refused with `403`.
 */

/** Host names that always mean this machine. */
const LOOPBACK = /^(?:localhost|127(?:\.\d{1,3}){3}|\[::1\])$/i;

/**
 * Whether a request's `Origin` may call an MCP endpoint: absent, the origin of `own` (the
 * broker's base URL, or the request's own URL when none is configured), or — when `own`
 * is on loopback — any loopback name with the same scheme and port (`localhost` and
 * `127.0.0.1` are one server; an attacker's page cannot carry either).
 */
export function originAllowed(origin: string | null, own: string): boolean {
  if (origin === null) return true;
  let from: URL;
  try {
    from = new URL(origin);
  } catch {
    // `null` (a sandboxed page, a file) and anything unparseable.
    return false;
  }
  const self = new URL(own);
  if (from.origin === self.origin) return true;
  return (
    LOOPBACK.test(self.hostname) &&
    LOOPBACK.test(from.hostname) &&
    from.protocol === self.protocol &&
    from.port === self.port
  );
}

/** The refusal: a JSON-RPC error without an id, as the MCP transport allows. */
export function foreignOriginBody(origin: string): string {
  const shown = origin.length > 200 ? `${origin.slice(0, 200)}…` : origin;
  return JSON.stringify({
    jsonrpc: '2.0',
    error: {
      code: -32000,
      message:
        `Origin ${JSON.stringify(shown)} is not this server's: a browser page may call an MCP ` +
        "endpoint only from the broker's own origin",
    },
    id: null,
  });
}
