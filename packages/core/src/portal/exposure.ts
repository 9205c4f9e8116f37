import type {
  Prompt,
  Resource,
  ResourceTemplateType as ResourceTemplate,
  Tool,
} from '@modelcontextprotocol/client';
import type { Principal } from '../auth/principal.js';
import { connectionState } from '../storage/states.js';
import type { ListKind, Lists, PortalConnection } from './gathering.js';
import { portalName, portalUri } from './names.js';
import { callerAllows, connectionAllows } from './policy.js';

/*
 * What one caller sees of a portal (docs/api.md §18): every server's list under the names
 * the portal gives, less what the policy keeps out, and the way back from each name to the
 * connection and the server's own name.
 */

/** Where a portal name leads. */
export interface Route<T> {
  connection: PortalConnection;
  /** The item as its server listed it (its own name or URI). */
  item: T;
}

/** The lists of every connection, as gathered (each may be a last known one). */
export type Gathered<K extends ListKind> = { connection: PortalConnection; items: Lists[K] }[];

/** The tools a caller sees, by portal name. */
export function toolView(
  principal: Principal,
  gathered: Gathered<'tools'>,
): { tools: Tool[]; routes: Map<string, Route<Tool>> } {
  const tools: Tool[] = [];
  const routes = new Map<string, Route<Tool>>();
  for (const { connection, items } of gathered) {
    const policy = connectionState(connection.record).tools;
    for (const tool of items) {
      if (!connectionAllows(policy, tool)) continue;
      const name = portalName(connection.alias, tool.name);
      if (!callerAllows(principal, name) || routes.has(name)) continue;
      routes.set(name, { connection, item: tool });
      tools.push({ ...tool, name });
    }
  }
  return { tools, routes };
}

/** The prompts a caller sees, by portal name. */
export function promptView(gathered: Gathered<'prompts'>): {
  prompts: Prompt[];
  routes: Map<string, Route<Prompt>>;
} {
  const prompts: Prompt[] = [];
  const routes = new Map<string, Route<Prompt>>();
  for (const { connection, items } of gathered) {
    for (const prompt of items) {
      const name = portalName(connection.alias, prompt.name);
      if (routes.has(name)) continue;
      routes.set(name, { connection, item: prompt });
      prompts.push({ ...prompt, name });
    }
  }
  return { prompts, routes };
}

/** The resources a caller sees, by URI: a URI two servers list is made distinct. */
export function resourceView(gathered: Gathered<'resources'>): {
  resources: Resource[];
  routes: Map<string, Route<Resource>>;
} {
  const listedBy = new Map<string, number>();
  for (const { items } of gathered) {
    for (const uri of new Set(items.map((resource) => resource.uri))) {
      listedBy.set(uri, (listedBy.get(uri) ?? 0) + 1);
    }
  }
  const resources: Resource[] = [];
  const routes = new Map<string, Route<Resource>>();
  for (const { connection, items } of gathered) {
    for (const resource of items) {
      const uri = portalUri(connection.alias, resource.uri, (listedBy.get(resource.uri) ?? 0) > 1);
      if (routes.has(uri)) continue;
      routes.set(uri, { connection, item: resource });
      resources.push({ ...resource, uri });
    }
  }
  return { resources, routes };
}

/** The resource templates of every server, as they wrote them. */
export function templateView(gathered: Gathered<'templates'>): ResourceTemplate[] {
  return gathered.flatMap(({ items }) => items);
}

/** The most items one page of the portal's lists holds. */
export const PAGE_SIZE = 500;

/** One page of a list, and the cursor of the next (an offset, opaque to the caller). */
export function pageOf<T>(
  items: T[],
  cursor: string | undefined,
): { page: T[]; nextCursor?: string } | null {
  let start = 0;
  if (cursor !== undefined) {
    if (!/^p[0-9]{1,9}$/.test(cursor)) return null;
    start = Number(cursor.slice(1));
    if (start > items.length) return null;
  }
  const end = start + PAGE_SIZE;
  return end < items.length
    ? { page: items.slice(start, end), nextCursor: `p${end}` }
    : { page: items.slice(start) };
}
