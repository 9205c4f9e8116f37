/**
 * The caller's headers the MCP gateway forwards upstream (docs/api.md §13): MCP's own, none
 * that authenticates anyone. SEP-2243's `Mcp-Method`, `Mcp-Name` and `Mcp-Param-*` are
 * among them: servers check these against the body, so they must arrive.
 */
const FORWARDED = new Set([
  'content-type',
  'accept',
  'mcp-session-id',
  'mcp-protocol-version',
  'last-event-id',
  'mcp-method',
  'mcp-name',
]);

/** Whether the gateway forwards the caller's header `name` (lower case) upstream. */
export function gatewayForwards(name: string): boolean {
  return FORWARDED.has(name) || name.startsWith('mcp-param-');
}
