import type { Tool } from '@modelcontextprotocol/client';
import type { Principal } from '../auth/principal.js';
import { anyGlobMatches } from '../auth/tool-globs.js';
import type { ConnectionState } from '../storage/states.js';

/*
 * The portal's tool policy (docs/api.md §18): a connection's own (allow and deny globs over
 * its server's tool names, `read_only` for tools annotated `readOnlyHint: true` only) and
 * the caller's token's (globs over portal names, narrowed by each delegation). A tool
 * outside either is neither listed nor callable.
 */

/** Whether a connection's policy lets the portal offer one of its server's tools. */
export function connectionAllows(policy: ConnectionState['tools'], tool: Tool): boolean {
  if (policy === undefined) return true;
  if (policy.read_only === true && tool.annotations?.readOnlyHint !== true) return false;
  if (policy.allow !== undefined && !anyGlobMatches(policy.allow, tool.name)) return false;
  if (policy.deny !== undefined && anyGlobMatches(policy.deny, tool.name)) return false;
  return true;
}

/** Whether the caller's token lets it list and call a tool by its portal name. */
export function callerAllows(principal: Principal, portalName: string): boolean {
  if (principal.kind === 'root' || principal.tools === undefined) return true;
  return anyGlobMatches(principal.tools, portalName);
}
