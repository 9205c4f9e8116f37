import type { Client } from '@modelcontextprotocol/client';
import { actorOf } from '../auth/principal.js';
import type { PortalSessionLike as PortalSession } from './caller.js';
import type { PortalDeps } from './deps.js';
import type { Gathered } from './exposure.js';
import {
  capabilityOf,
  ListCache,
  type ListKind,
  type Lists,
  type PortalConnection,
  portalConnections,
} from './gathering.js';
import { consentAnswer } from './needs-user.js';
import { callerAllows } from './policy.js';
import { UpstreamSessions } from './upstreams.js';

/*
 * What every portal session of a broker shares (docs/api.md §18): the servers' last lists,
 * the open sessions (to tell of a list that changed), the deadline lists are gathered
 * under, and the records of calls.
 */

/** A server's list of one kind, every page of it, at most `max` items. */
async function listOf<K extends ListKind>(client: Client, kind: K, max: number): Promise<Lists[K]> {
  const capabilities = client.getServerCapabilities();
  if (capabilities?.[capabilityOf(kind)] === undefined) return [];
  const items: unknown[] = [];
  let cursor: string | undefined;
  // Page by page, so a server that never stops paging is cut at `max`.
  for (let page = 0; page < 100 && items.length < max; page++) {
    const params = cursor === undefined ? {} : { cursor };
    const answer =
      kind === 'tools'
        ? await client.listTools(params).then((r) => ({ list: r.tools, next: r.nextCursor }))
        : kind === 'prompts'
          ? await client.listPrompts(params).then((r) => ({ list: r.prompts, next: r.nextCursor }))
          : kind === 'resources'
            ? await client
                .listResources(params)
                .then((r) => ({ list: r.resources, next: r.nextCursor }))
            : await client
                .listResourceTemplates(params)
                .then((r) => ({ list: r.resourceTemplates, next: r.nextCursor }));
    items.push(...answer.list);
    cursor = answer.next;
    if (cursor === undefined) break;
  }
  return items.slice(0, max) as Lists[K];
}

/** An empty list of a kind. */
function emptyList<K extends ListKind>(_kind: K): Lists[K] {
  const none: Lists[ListKind] = [];
  return none as Lists[K];
}

export class PortalHub {
  readonly deps: PortalDeps;
  readonly cache: ListCache;
  /** Every open session, for `list_changed`. */
  readonly sessions = new Set<PortalSession>();
  /** Lists being asked for, by connection and kind: one request at a time. */
  readonly #asking = new Map<string, Promise<unknown>>();
  /**
   * One session per connection that holds the server's event stream open: where it says
   * its lists changed. Keyway's own, for every caller, with a principal that covers that
   * connection alone: nothing it hears goes to a caller but that a list changed, and only
   * to sessions whose portal holds the connection.
   */
  readonly watchers: UpstreamSessions;

  constructor(deps: PortalDeps) {
    this.deps = deps;
    this.cache = new ListCache(deps.settings.listCacheMs, deps.now);
    const refused = async (): Promise<never> => {
      throw new Error('the portal’s watch of a server takes no request');
    };
    this.watchers = new UpstreamSessions({
      gateway: deps.gateway,
      // Covers the connection alone: it may use it, never start an authorization with it.
      principal: (connectionId) => ({
        kind: 'token',
        name: 'keyway.portal-watch',
        scopes: [`${connectionId}/**`],
        expiresAt: Number.MAX_SAFE_INTEGER,
      }),
      listener: {
        listChanged: (connectionId, kind) => this.listChanged(connectionId, kind),
        updated: () => {},
        log: () => {},
        sample: refused,
        elicit: refused,
      },
      capabilities: () => ({ sampling: false, elicitation: null }),
      now: deps.now,
      stream: () => true,
    });
  }

  /** Watches a connection's server for list changes (once; again after a failure). */
  watch(connectionId: string): void {
    this.watchers.open(connectionId).catch(() => {});
  }

  /** Ends the watches. */
  close(): Promise<void> {
    return this.watchers.closeAll();
  }

  now(): number {
    return this.deps.now();
  }

  get authorize(): PortalDeps['authorize'] {
    return this.deps.authorize;
  }

  /** Whether the session's caller may list and call a tool by its portal name. */
  callerMay(session: PortalSession, name: string): boolean {
    return callerAllows(session.caller.principal, name);
  }

  /** The connections of the session's portal. */
  connections(
    session: PortalSession,
  ): Promise<{ connections: PortalConnection[]; truncated: boolean }> {
    const { storage, settings } = this.deps;
    return portalConnections(storage, session.caller.prefix, settings.maxConnections, new Map());
  }

  /**
   * One kind of list of every connection, in parallel under the deadline: a server that is
   * slow, failing or needs its user gives its last known list (or none), and a note says why.
   */
  async gather<K extends ListKind>(
    session: PortalSession,
    kind: K,
  ): Promise<{ connections: Gathered<K>; notes: string[] }> {
    const { connections, truncated } = await this.connections(session);
    const notes: string[] = [];
    if (truncated) {
      notes.push(
        `this portal gathers the first ${this.deps.settings.maxConnections} MCP connections only`,
      );
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), this.deps.settings.listDeadlineMs);
    });
    try {
      const gathered = await Promise.all(
        connections.map(async (connection) => {
          const items = await this.#listOne(session, connection, kind, deadline, notes);
          return { connection, items };
        }),
      );
      return { connections: gathered, notes };
    } finally {
      clearTimeout(timer);
    }
  }

  async #listOne<K extends ListKind>(
    session: PortalSession,
    connection: PortalConnection,
    kind: K,
    deadline: Promise<'late'>,
    notes: string[],
  ): Promise<Lists[K]> {
    const { record, alias } = connection;
    const cached = this.cache.get(record.id, kind);
    if (cached?.fresh === true) return cached.items;
    const last: Lists[K] = cached?.items ?? emptyList(kind);
    if (record.status !== 'active') {
      notes.push(`${alias}: the connection is ${record.status}; its last known ${kind} are listed`);
      return last;
    }
    const key = `${record.id}\n${kind}`;
    let asking = this.#asking.get(key) as Promise<Lists[K]> | undefined;
    if (asking === undefined) {
      const max = this.deps.settings.maxListItems;
      asking = session.upstreams.open(record.id).then(({ client }) => listOf(client, kind, max));
      this.watch(record.id);
      this.#asking.set(key, asking);
      // A list that comes after the deadline is still kept, for the next caller.
      asking
        .then((items) => this.cache.set(record.id, kind, items))
        .catch(() => {})
        .finally(() => this.#asking.delete(key));
    }
    try {
      const answer = await Promise.race([asking, deadline]);
      if (answer !== 'late') return answer;
      notes.push(
        `${alias}: its server did not list its ${kind} within ${this.deps.settings.listDeadlineMs} ms; ` +
          'its last known ones are listed',
      );
    } catch (error) {
      const reason = error instanceof Error ? error.message : 'it failed';
      notes.push(`${alias}: its server could not list its ${kind} (${reason.slice(0, 200)})`);
    }
    return last;
  }

  /** The consent answer of a connection that needs its user. */
  consent(
    session: PortalSession,
    connection: PortalConnection,
    challenged: string[] | undefined,
  ): Promise<Error> {
    return consentAnswer(
      { authorize: this.deps.authorize, randomBytes: this.deps.randomBytes },
      session.caller.principal,
      connection,
      challenged,
    );
  }

  /**
   * A server said its list changed: forgotten here, and told to every session whose
   * portal holds the connection.
   */
  listChanged(connectionId: string, capability: 'tools' | 'prompts' | 'resources'): void {
    this.cache.invalidate(connectionId, capability);
    for (const session of this.sessions) {
      const { prefix } = session.caller;
      if (connectionId !== prefix && !connectionId.startsWith(`${prefix}/`)) continue;
      session.server
        .notification({ method: `notifications/${capability}/list_changed` })
        .catch(() => {});
    }
  }

  /** Records a call (`KEYWAY_AUDIT_TOOL_CALLS`): never its arguments or its result. */
  toolCalled(
    session: PortalSession,
    connection: PortalConnection,
    tool: string,
    outcome: string,
    durationMs: number,
  ): void {
    this.deps.observe({ kind: 'portal_call', alias: connection.alias, outcome });
    if (!this.deps.settings.auditToolCalls) return;
    this.deps.events
      .append({
        type: 'tool.called',
        actor: actorOf(session.caller.principal),
        resource: connection.record.id,
        data: { tool, alias: connection.alias, outcome, duration_ms: durationMs },
      })
      .catch(() => {});
  }

  get randomBytes(): (length: number) => Uint8Array {
    return this.deps.randomBytes;
  }
}
