import type { CallToolResult, Client, Tool } from '@modelcontextprotocol/client';
import {
  type HandlerResultTypeMap,
  isInputRequiredResult,
  ProtocolError,
  ProtocolErrorCode,
  type RequestMethod,
  type RequestTypeMap,
  Server,
  type ServerContext,
  UriTemplate,
  UrlElicitationRequiredError,
} from '@modelcontextprotocol/server';
import { isKeywayError } from '../contract/errors.js';
import { connectionState } from '../storage/states.js';
import { InsufficientScopeError } from '../upstream/connection-fetch.js';
import { BUILT_IN_TOOLS, builtInCall } from './built-ins.js';
import type { PortalCaller, PortalSessionLike } from './caller.js';
import {
  type Gathered,
  pageOf,
  promptView,
  type Route,
  resourceView,
  templateView,
  toolView,
} from './exposure.js';
import type { ListKind, PortalConnection } from './gathering.js';
import type { PortalHub } from './hub.js';
import { connectionAllows } from './policy.js';
import type { Upstream, UpstreamSessions } from './upstreams.js';

/*
 * One caller's portal (docs/api.md §18): an MCP server of the official SDK whose handlers
 * gather the lists of every connection and route each call to the one it names, over the
 * caller's own upstream sessions.
 */

export const PORTAL_INFO = { name: 'keyway-portal', version: '1' };

/** What the portal's server declares. */
const CAPABILITIES = {
  tools: { listChanged: true },
  prompts: { listChanged: true },
  resources: { listChanged: true, subscribe: true },
  completions: {},
  logging: {},
};

/** A JSON-RPC error the caller reads (the SDK writes it with its code and data). */
function invalidParams(message: string): ProtocolError {
  return new ProtocolError(ProtocolErrorCode.InvalidParams, message);
}

/** One page of a list, under the result's key for it, with the next page's cursor. */
function paged<K extends string, T>(
  key: K,
  items: T[],
  cursor: string | undefined,
): Record<K, T[]> & { nextCursor?: string } {
  const page = pageOf(items, cursor);
  if (page === null) throw invalidParams('the cursor is not one this portal gave');
  const next = page.nextCursor === undefined ? {} : { nextCursor: page.nextCursor };
  return { [key]: page.page, ...next } as Record<K, T[]> & { nextCursor?: string };
}

/**
 * What a handler's error becomes for the caller: an error the caller may read (a JSON-RPC
 * error of the portal's, a URL elicitation, a Keyway error's own words) as it is; any other
 * (a storage failure) told to the operator and answered as a generic internal error, so
 * nothing of Keyway's insides reaches the caller.
 */
function callerError(error: unknown, onError: (error: unknown) => void): Error {
  if (error instanceof ProtocolError) return error;
  if (isKeywayError(error) && error.code !== 'internal_error') {
    return new ProtocolError(ProtocolErrorCode.InvalidRequest, error.message);
  }
  onError(error);
  return new ProtocolError(
    ProtocolErrorCode.InternalError,
    'the portal failed to handle the request',
  );
}

/** Whether an error means the connection needs its user (consent, or a step-up). */
function needsUser(error: unknown): boolean {
  return (
    error instanceof InsufficientScopeError ||
    (isKeywayError(error) &&
      (error.code === 'reauthorization_required' || error.code === 'connection_not_active'))
  );
}

/**
 * A server's result as the portal's own: without the reserved `io.modelcontextprotocol/`
 * keys of its `_meta` (the 2026-07-28 envelope names the server that answered, not the
 * portal; the portal's SDK server adds its own).
 */
function ownEnvelope<T>(result: T): T {
  const meta = (result as { _meta?: Record<string, unknown> } | null)?._meta;
  if (meta === undefined || meta === null) return result;
  const kept = Object.entries(meta).filter(([key]) => !key.startsWith('io.modelcontextprotocol/'));
  const { _meta: _, ...rest } = result as { _meta?: unknown };
  return (kept.length === 0 ? rest : { ...rest, _meta: Object.fromEntries(kept) }) as T;
}

/**
 * A caller's request as the portal sends it on: without the caller's progress token (the
 * portal's client sets its own, and relays the server's progress under the caller's); on
 * the 2026-07-28 wire with the input responses and request state of a retried request,
 * which the SDK lifted out of the caller's params, for the server that asked for them.
 */
function forwarded<T extends { _meta?: Record<string, unknown> }>(
  params: T,
  ctx?: ServerContext,
): T {
  const inputResponses = ctx?.mcpReq.inputResponses;
  const requestState = ctx?.mcpReq.requestState<string>();
  const retried = {
    ...params,
    ...(inputResponses === undefined ? {} : { inputResponses }),
    ...(typeof requestState === 'string' ? { requestState } : {}),
  };
  if (retried._meta?.progressToken === undefined) return retried;
  const { progressToken: _, ...meta } = retried._meta;
  const { _meta: __, ...rest } = retried;
  return (Object.keys(meta).length === 0 ? rest : { ...rest, _meta: meta }) as T;
}

/** Where a caller's last tool list led (see {@link PortalSession}). */
export interface ToolRoutes {
  tools: Map<string, Route<Tool>> | null;
}

/** A portal session: the SDK server a transport is connected to, and its upstreams. */
export class PortalSession implements PortalSessionLike {
  readonly server: Server;
  readonly caller: PortalCaller;
  readonly upstreams: UpstreamSessions;
  /** The calls in flight, by connection: where a server's sampling request goes. */
  readonly inflight = new Map<string, ServerContext[]>();
  usedAt: number;
  /** The caller's subscriptions: by connection, the server's URI → the portal's. */
  readonly #subscribed = new Map<string, Map<string, string>>();
  readonly #hub: PortalHub;

  /**
   * Where the caller's last tool list led, by portal name: a call is routed from it (one
   * read of the connection, for its status and policy now) without listing every server
   * again. Shared by a stateless caller's requests.
   */
  readonly #routes: ToolRoutes;

  /**
   * Whether the caller speaks the 2026-07-28 wire: a server's request for input (sampling,
   * elicitation, roots) then reaches it as the server wrote it, an `input_required` result
   * it answers by retrying the request with its responses, which go back to that server.
   */
  readonly #stateless: boolean;

  constructor(
    hub: PortalHub,
    caller: PortalCaller,
    upstreams: UpstreamSessions,
    routes: ToolRoutes = { tools: null },
    stateless = false,
  ) {
    this.#hub = hub;
    this.caller = caller;
    this.upstreams = upstreams;
    this.#routes = routes;
    this.#stateless = stateless;
    this.usedAt = hub.now();
    this.server = new Server(PORTAL_INFO, {
      capabilities: CAPABILITIES,
      instructions:
        'Keyway portal: every MCP server connected at this path, each tool named <alias>__<name>. ' +
        'keyway__connections lists the connections; keyway__connect starts one.',
    });
    this.#handlers();
  }

  /** Gathers one kind of list from every connection, under the portal's deadline. */
  async #gather<K extends ListKind>(kind: K, ctx: ServerContext): Promise<Gathered<K>> {
    const { connections, notes } = await this.#hub.gather(this, kind);
    for (const note of notes) {
      await ctx.mcpReq.log('warning', note, 'keyway-portal').catch(() => {});
    }
    return connections;
  }

  /** Sets a request handler whose errors reach the caller as {@link callerError} words them. */
  #handle<M extends RequestMethod>(
    method: M,
    handler: (request: RequestTypeMap[M], ctx: ServerContext) => Promise<HandlerResultTypeMap[M]>,
  ): void {
    const { onError } = this.#hub.deps;
    this.server.setRequestHandler(method, async (request, ctx) => {
      try {
        return await handler(request, ctx);
      } catch (error) {
        throw callerError(error, onError);
      }
    });
  }

  #handlers(): void {
    const server = { setRequestHandler: this.#handle.bind(this) };
    server.setRequestHandler('tools/list', async (request, ctx) => {
      const { tools, routes } = toolView(this.caller.principal, await this.#gather('tools', ctx));
      this.#routes.tools = routes;
      const builtIn = BUILT_IN_TOOLS.filter((tool) => this.#hub.callerMay(this, tool.name));
      return paged('tools', [...builtIn, ...tools], request.params?.cursor);
    });
    server.setRequestHandler('prompts/list', async (request, ctx) =>
      paged(
        'prompts',
        promptView(await this.#gather('prompts', ctx)).prompts,
        request.params?.cursor,
      ),
    );
    server.setRequestHandler('resources/list', async (request, ctx) =>
      paged(
        'resources',
        resourceView(await this.#gather('resources', ctx)).resources,
        request.params?.cursor,
      ),
    );
    server.setRequestHandler('resources/templates/list', async (request, ctx) =>
      paged(
        'resourceTemplates',
        templateView(await this.#gather('templates', ctx)),
        request.params?.cursor,
      ),
    );
    server.setRequestHandler('tools/call', (request, ctx) => this.#callTool(request.params, ctx));
    server.setRequestHandler('prompts/get', async (request, ctx) => {
      const { routes } = promptView(await this.#gather('prompts', ctx));
      const route = routes.get(request.params.name);
      if (route === undefined)
        throw invalidParams(`no prompt is named ${JSON.stringify(request.params.name)}`);
      return this.#upstream(route.connection, ctx, (client, options) =>
        client.getPrompt(forwarded({ ...request.params, name: route.item.name }, ctx), options),
      );
    });
    server.setRequestHandler('resources/read', async (request, ctx) => {
      const { connection, uri } = await this.#resourceRoute(request.params.uri, ctx);
      return this.#upstream(connection, ctx, (client, options) =>
        client.readResource(forwarded({ ...request.params, uri }, ctx), options),
      );
    });
    server.setRequestHandler('resources/subscribe', async (request, ctx) => {
      const { connection, uri } = await this.#resourceRoute(request.params.uri, ctx);
      const result = await this.#upstream(connection, ctx, (client, options) =>
        client.subscribeResource(forwarded({ ...request.params, uri }), options),
      );
      // Where the server will say the resource changed: opened now, not waited for (a
      // server may send a stream's headers only with its first event).
      this.#open(connection.record.id)
        .then((upstream) => upstream.listen())
        .catch(() => {});
      const id = connection.record.id;
      const mine = this.#subscribed.get(id) ?? new Map<string, string>();
      mine.set(uri, request.params.uri);
      this.#subscribed.set(id, mine);
      return result;
    });
    server.setRequestHandler('resources/unsubscribe', async (request, ctx) => {
      const { connection, uri } = await this.#resourceRoute(request.params.uri, ctx);
      this.#subscribed.get(connection.record.id)?.delete(uri);
      return this.#upstream(connection, ctx, (client, options) =>
        client.unsubscribeResource(forwarded({ ...request.params, uri }), options),
      );
    });
    server.setRequestHandler('completion/complete', async (request, ctx) => {
      const { ref } = request.params;
      if (ref.type === 'ref/prompt') {
        const route = promptView(await this.#gather('prompts', ctx)).routes.get(ref.name);
        if (route === undefined)
          throw invalidParams(`no prompt is named ${JSON.stringify(ref.name)}`);
        return this.#upstream(route.connection, ctx, (client, options) =>
          client.complete(
            forwarded({ ...request.params, ref: { ...ref, name: route.item.name } }),
            options,
          ),
        );
      }
      const { connection } = await this.#resourceRoute(ref.uri, ctx, true);
      return this.#upstream(connection, ctx, (client, options) =>
        client.complete(forwarded(request.params), options),
      );
    });
    server.setRequestHandler('logging/setLevel', async () => ({}));
  }

  /**
   * This caller's session with a connection's server: on the 2026-07-28 wire, one that
   * declares to the server what the caller declared in this request.
   */
  #open(connectionId: string): Promise<Upstream> {
    if (!this.#stateless) return this.upstreams.open(connectionId);
    const declared = this.server.getClientCapabilities();
    return this.upstreams.open(connectionId, {
      sampling: declared?.sampling !== undefined,
      elicitation: declared?.elicitation ?? null,
    });
  }

  /**
   * Tells the caller that a resource it subscribed to changed, under the URI it subscribed
   * with; a change it did not subscribe to is not its business.
   */
  updated(connectionId: string, uri: string): void {
    const own = this.#subscribed.get(connectionId)?.get(uri);
    if (own === undefined) return;
    this.server.sendResourceUpdated({ uri: own }).catch(() => {});
  }

  /**
   * The connection a resource URI leads to: the one that listed it, else the one template
   * that matches it, else — in a portal of one connection — that one, so that its server
   * answers (or refuses) a URI it does not list, as it would without the portal.
   */
  async #resourceRoute(
    uri: string,
    ctx: ServerContext,
    template = false,
  ): Promise<{ connection: PortalConnection; uri: string }> {
    if (!template) {
      const route = resourceView(await this.#gather('resources', ctx)).routes.get(uri);
      if (route !== undefined) return { connection: route.connection, uri: route.item.uri };
    }
    const matching = new Set<PortalConnection>();
    const templates = await this.#gather('templates', ctx);
    for (const { connection, items } of templates) {
      for (const item of items) {
        const matches = template
          ? item.uriTemplate === uri
          : new UriTemplate(item.uriTemplate).match(uri) !== null;
        if (matches) matching.add(connection);
      }
    }
    if (matching.size === 0 && templates.length === 1 && templates[0] !== undefined) {
      return { connection: templates[0].connection, uri };
    }
    const [only, ...others] = matching;
    if (only === undefined || others.length > 0) {
      throw new ProtocolError(
        ProtocolErrorCode.ResourceNotFound,
        only === undefined
          ? `no server of this portal lists the resource ${JSON.stringify(uri)}`
          : `more than one server of this portal has a template for ${JSON.stringify(uri)}`,
        { uri },
      );
    }
    return { connection: only, uri };
  }

  /**
   * The route of a tool the caller's last list named, its connection read again: none
   * when the connection is gone, was renamed, or its policy now keeps the tool out.
   */
  async #knownRoute(name: string): Promise<Route<Tool> | undefined> {
    const known = this.#routes.tools?.get(name);
    if (known === undefined) return undefined;
    const record = await this.#hub.deps.storage.getConnection(known.connection.record.id);
    if (record === null) return undefined;
    const now = connectionState(record);
    if (now.alias !== connectionState(known.connection.record).alias) return undefined;
    if (!connectionAllows(now.tools, known.item)) return undefined;
    return { connection: { record, alias: known.connection.alias }, item: known.item };
  }

  async #callTool(
    params: { name: string; arguments?: Record<string, unknown>; _meta?: Record<string, unknown> },
    ctx: ServerContext,
  ): Promise<CallToolResult> {
    const { name } = params;
    if (!this.#hub.callerMay(this, name)) {
      throw invalidParams(`no tool is named ${JSON.stringify(name)}`);
    }
    const builtIn = BUILT_IN_TOOLS.find((tool) => tool.name === name);
    if (builtIn !== undefined) return builtInCall(this.#hub, this, name, params.arguments ?? {});
    let route = await this.#knownRoute(name);
    if (route === undefined) {
      const { routes } = toolView(this.caller.principal, await this.#gather('tools', ctx));
      this.#routes.tools = routes;
      route = routes.get(name);
    }
    if (route === undefined) throw invalidParams(`no tool is named ${JSON.stringify(name)}`);
    const { connection, item } = route;
    const started = this.#hub.now();
    let outcome = 'error';
    try {
      const result = await this.#upstream(connection, ctx, (client, options) =>
        client.callTool(forwarded({ ...params, name: item.name }, ctx), options),
      );
      outcome = isInputRequiredResult(result)
        ? 'input_required'
        : result.isError === true
          ? 'tool_error'
          : 'ok';
      return result as CallToolResult;
    } catch (error) {
      outcome = error instanceof UrlElicitationRequiredError ? 'consent_required' : 'error';
      // A connection the caller cannot authorize: a tool error that says who must.
      if (isKeywayError(error) && error.code === 'reauthorization_required') {
        return { isError: true, content: [{ type: 'text', text: error.message }] };
      }
      throw error;
    } finally {
      this.#hub.toolCalled(this, connection, item.name, outcome, this.#hub.now() - started);
    }
  }

  /**
   * A request to a connection's server over this caller's upstream session: the caller's
   * progress token and cancellation carried over; a connection that needs its user answers
   * a URL elicitation with a fresh consent URL (or says what to do).
   */
  async #upstream<T>(
    connection: PortalConnection,
    ctx: ServerContext,
    send: (
      client: Client,
      options: { signal: AbortSignal; onprogress?: (progress: Record<string, unknown>) => void },
    ) => Promise<T>,
  ): Promise<T> {
    if (connection.record.status !== 'active') {
      throw await this.#hub.consent(this, connection, undefined);
    }
    const progressToken = ctx.mcpReq._meta?.progressToken;
    const options = {
      signal: ctx.mcpReq.signal,
      // A server's `input_required` is the caller's to answer (the 2026-07-28 wire).
      ...(this.#stateless ? { allowInputRequired: true } : {}),
      ...(progressToken === undefined
        ? {}
        : {
            onprogress: (progress: Record<string, unknown>) => {
              ctx.mcpReq
                .notify({
                  method: 'notifications/progress',
                  params: { ...progress, progressToken },
                })
                .catch(() => {});
            },
          }),
    };
    const id = connection.record.id;
    const stack = this.inflight.get(id) ?? [];
    stack.push(ctx);
    this.inflight.set(id, stack);
    let failure: unknown;
    try {
      const upstream = await this.#open(id);
      try {
        return ownEnvelope(await send(upstream.client, options));
      } catch (error) {
        failure = upstream.failure() ?? error;
        throw error;
      }
    } catch (error) {
      failure ??= error;
      if (
        error instanceof ProtocolError &&
        error.code === ProtocolErrorCode.UrlElicitationRequired
      ) {
        // The gateway's own answer: the consent URL it started, passed on.
        throw new UrlElicitationRequiredError(
          (error.data as { elicitations?: never[] } | undefined)?.elicitations ?? [],
          error.message,
        );
      }
      if (needsUser(failure)) {
        throw await this.#hub.consent(
          this,
          connection,
          failure instanceof InsufficientScopeError ? failure.scopes : undefined,
        );
      }
      if (error instanceof ProtocolError) throw error;
      const reason = isKeywayError(failure) ? failure.message : 'it did not answer';
      throw new ProtocolError(
        ProtocolErrorCode.InternalError,
        `the MCP server of ${connection.alias} failed: ${reason}`,
      );
    } finally {
      stack.splice(stack.indexOf(ctx), 1);
      if (stack.length === 0) this.inflight.delete(id);
    }
  }
}
