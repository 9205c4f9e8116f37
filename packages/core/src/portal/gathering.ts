import type {
  Prompt,
  Resource,
  ResourceTemplateType as ResourceTemplate,
  Tool,
} from '@modelcontextprotocol/client';
import type { Storage } from '../storage/contract.js';
import type { ConnectionRecord } from '../storage/record-types.js';
import { connectionState } from '../storage/states.js';
import { aliasesOf } from './names.js';

/*
 * What a portal is made of (docs/api.md §18): the `mcp` connections at or below its prefix,
 * each with its alias, and the last list each server answered, kept per connection until
 * the server says it changed or it grows old.
 */

export type ListKind = 'tools' | 'prompts' | 'resources' | 'templates';

/** One kind of list, as a server answered it. */
export interface Lists {
  tools: Tool[];
  prompts: Prompt[];
  resources: Resource[];
  templates: ResourceTemplate[];
}

/** A connection of a portal. */
export interface PortalConnection {
  record: ConnectionRecord;
  alias: string;
}

/** The server's capabilities a list needs (a server without prompts is not asked for them). */
const CAPABILITY: Record<ListKind, 'tools' | 'prompts' | 'resources'> = {
  tools: 'tools',
  prompts: 'prompts',
  resources: 'resources',
  templates: 'resources',
};

export function capabilityOf(kind: ListKind): 'tools' | 'prompts' | 'resources' {
  return CAPABILITY[kind];
}

interface Cached<K extends ListKind> {
  items: Lists[K];
  at: number;
  /** Set by a `list_changed`: served while the fresh one is asked for. */
  stale: boolean;
}

/** The last lists of every connection, shared by every session of this process. */
export class ListCache {
  readonly #lists = new Map<string, Partial<{ [K in ListKind]: Cached<K> }>>();
  readonly #ttl: number;
  readonly #now: () => number;

  constructor(ttlMs: number, now: () => number) {
    this.#ttl = ttlMs;
    this.#now = now;
  }

  /** The last list, and whether it may be served without asking again. */
  get<K extends ListKind>(id: string, kind: K): { items: Lists[K]; fresh: boolean } | undefined {
    const cached = this.#lists.get(id)?.[kind] as Cached<K> | undefined;
    if (cached === undefined) return undefined;
    const fresh = !cached.stale && this.#now() - cached.at < this.#ttl;
    return { items: cached.items, fresh };
  }

  set<K extends ListKind>(id: string, kind: K, items: Lists[K]): void {
    let lists = this.#lists.get(id);
    if (lists === undefined) {
      lists = {};
      this.#lists.set(id, lists);
    }
    (lists as Record<K, Cached<K>>)[kind] = { items, at: this.#now(), stale: false };
  }

  /** A server said its list changed: the next list asks it again. */
  invalidate(id: string, capability: 'tools' | 'prompts' | 'resources'): void {
    const lists = this.#lists.get(id);
    if (lists === undefined) return;
    for (const kind of Object.keys(lists) as ListKind[]) {
      const cached = lists[kind];
      if (cached !== undefined && CAPABILITY[kind] === capability) cached.stale = true;
    }
  }

  /** Forgets a connection (deleted). */
  forget(id: string): void {
    this.#lists.delete(id);
  }
}

/**
 * The `mcp` connections at or below a prefix, in path order, with their aliases: at most
 * `max` (the rest are left out, and said so by `truncated`).
 */
export async function portalConnections(
  storage: Storage,
  prefix: string,
  max: number,
  templates: Map<string, Promise<string | null>>,
): Promise<{ connections: PortalConnection[]; truncated: boolean }> {
  const records: ConnectionRecord[] = [];
  let after: string | undefined;
  let truncated = false;
  for (;;) {
    const page = await storage.listConnections({
      within: [prefix],
      limit: 200,
      ...(after === undefined ? {} : { after }),
    });
    // The template of each provider, read once per list.
    const kinds = await Promise.all(
      page.map((record) => {
        let template = templates.get(record.providerId);
        if (template === undefined) {
          template = storage
            .getProvider(record.providerId)
            .then((provider) => provider?.template ?? null);
          templates.set(record.providerId, template);
        }
        return template;
      }),
    );
    page.forEach((record, i) => {
      if (kinds[i] !== 'mcp') return;
      if (records.length < max) records.push(record);
      else truncated = true;
    });
    const last = page[page.length - 1];
    if (page.length < 200 || last === undefined || truncated) break;
    after = last.id;
  }
  const aliases = aliasesOf(
    records.map((record) => [record.id, connectionState(record).alias] as const),
    prefix,
  );
  return {
    connections: records.map((record) => ({ record, alias: aliases.get(record.id) ?? record.id })),
    truncated,
  };
}
