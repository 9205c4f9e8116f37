import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseMetrics, sampleOf } from '@keyway/test-support/prometheus';
import {
  Client as ModernClient,
  StreamableHTTPClientTransport as ModernTransport,
} from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import {
  CreateMessageRequestSchema,
  LoggingMessageNotificationSchema,
  McpError,
  ResourceUpdatedNotificationSchema,
  SubscribeRequestSchema,
  ToolListChangedNotificationSchema,
  UnsubscribeRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { inputRequired, inputResponse } from '@modelcontextprotocol/server';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z as zod } from 'zod';
import { z } from 'zod/v3';
import { createMetrics } from '../src/metrics/index.js';
import { toNodeHandler } from '../src/node/index.js';
import { connectThroughConsent, Harness, START, storageFactories } from './harness.js';
import { PortalUpstream } from './portal-upstream.js';

/*
 * The portal (docs/api.md §18): one MCP endpoint, `{base}/portal/<prefix>`, over every `mcp`
 * connection below the prefix — here four servers of the official SDK on loopback, each with
 * its own authorization server, reached by the SDK's own client.
 */

const PREFIX = 'acme/users/alice';
const HOUR = 3_600_000;

/** A gate a test opens: the `progress` tool waits on it between its two notifications. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { wait, open };
}

describe.each(storageFactories.filter(({ name }) => name === 'sqlite' || name === 'postgres'))(
  'the portal: {base}/portal/<prefix> (docs/api.md §18), on %s',
  (factory) => {
    let h: Harness;
    let keyway: Server;
    let base: string;
    let progressGate = gate();
    /** The `wait` tool: when a call reached it, and the cancellations it saw. */
    let waiting = { started: () => {}, cancelled: [] as string[] };
    const clients: { close(): Promise<void> }[] = [];
    const received: string[] = [];
    /** The servers' sessions subscribed to a resource, by server name. */
    const subscribers = new Map<string, { server: McpServer; uri: string }[]>();

    /**
     * A resource both Notion and GitHub list under one URI (`memo://today`), whose every
     * subscription the server keeps, to say when it changes.
     */
    function memo(server: McpServer, name: string): void {
      server.server.registerCapabilities({ resources: { subscribe: true } });
      server.registerResource('memo', 'memo://today', { mimeType: 'text/plain' }, async (uri) => ({
        contents: [{ uri: uri.href, mimeType: 'text/plain', text: `${name}'s memo` }],
      }));
      server.server.setRequestHandler(SubscribeRequestSchema, async (request) => {
        const list = subscribers.get(name) ?? [];
        list.push({ server, uri: request.params.uri });
        subscribers.set(name, list);
        return {};
      });
      server.server.setRequestHandler(UnsubscribeRequestSchema, async (request) => {
        const list = subscribers.get(name) ?? [];
        subscribers.set(
          name,
          list.filter((entry) => entry.server !== server || entry.uri !== request.params.uri),
        );
        return {};
      });
    }

    // Linear: a step-up tool, a read-only and a writing tool, progress, sampling.
    const linear = new PortalUpstream((server) => {
      server.registerTool(
        'search_issues',
        {
          description: 'Searches issues',
          inputSchema: { query: z.string() },
          annotations: { readOnlyHint: true },
        },
        async ({ query }) => ({ content: [{ type: 'text', text: `linear found: ${query}` }] }),
      );
      server.registerTool('create_issue', { description: 'Creates an issue' }, async () => ({
        content: [{ type: 'text', text: 'created' }],
      }));
      server.registerTool('admin', { description: 'Needs the admin scope' }, async () => ({
        content: [{ type: 'text', text: 'admin granted' }],
      }));
      server.registerTool(
        'progress',
        { description: 'Two progress notifications' },
        async (extra) => {
          const token = extra._meta?.progressToken;
          if (token === undefined) return { content: [{ type: 'text', text: 'no token' }] };
          const notify = (progress: number) =>
            extra.sendNotification({
              method: 'notifications/progress',
              params: { progressToken: token, progress, total: 2 },
            });
          await notify(1);
          await progressGate.wait;
          await notify(2);
          return { content: [{ type: 'text', text: `done ${String(token)}` }] };
        },
      );
      server.registerTool('ask', { description: 'Asks the client’s model' }, async () => {
        const answer = await server.server.createMessage({
          messages: [{ role: 'user', content: { type: 'text', text: 'What is 2 + 2?' } }],
          maxTokens: 10,
        });
        const text = answer.content.type === 'text' ? answer.content.text : '?';
        return { content: [{ type: 'text', text: `the model said ${text}` }] };
      });
      server.registerTool('wait', { description: 'Waits until cancelled' }, async (extra) => {
        waiting.started();
        await new Promise<void>((resolve) => {
          extra.signal.addEventListener('abort', () => {
            waiting.cancelled.push(String(extra.signal.reason ?? 'aborted'));
            resolve();
          });
        });
        return { content: [{ type: 'text', text: 'cancelled' }] };
      });
      server.registerTool('tell', { description: 'Logs, then answers' }, async (extra) => {
        await extra.sendNotification({
          method: 'notifications/message',
          params: { level: 'info', data: 'linear is telling' },
        });
        return { content: [{ type: 'text', text: 'told' }] };
      });
    });
    // Notion: no refresh token, so its connection expires with its access token.
    const notion = new PortalUpstream((server) => {
      server.registerTool('search', { description: 'Searches pages' }, async () => ({
        content: [{ type: 'text', text: 'notion pages' }],
      }));
      memo(server, 'notion');
    });
    // GitHub: its tool list changes mid-session.
    const github = new PortalUpstream((server) => {
      server.registerTool('get_repo', { description: 'Reads a repository' }, async () => ({
        content: [{ type: 'text', text: 'keyway-dev/keyway' }],
      }));
      memo(server, 'github');
    });
    // Sentry: the stateless 2026-07-28 wire (the v2 SDK).
    const sentry = new PortalUpstream(
      () => {},
      (server) => {
        server.registerTool(
          'get_issue',
          { description: 'Reads an issue', inputSchema: zod.object({ id: zod.string() }) },
          async ({ id }) => ({ content: [{ type: 'text', text: `sentry issue ${id}` }] }),
        );
        // Asks the client's model through an `input_required` result, with a request state.
        server.registerTool(
          'summarize',
          { description: 'Summarizes with the client’s model' },
          async (ctx) => {
            const answer = inputResponse(ctx.mcpReq.inputResponses, 'model');
            if (answer.kind !== 'sampling') {
              return inputRequired({
                inputRequests: {
                  model: inputRequired.createMessage({
                    messages: [{ role: 'user', content: { type: 'text', text: 'Summarize S-1' } }],
                    maxTokens: 20,
                  }),
                },
                requestState: 'sentry-round-1',
              });
            }
            const text = answer.result.content;
            return {
              content: [
                {
                  type: 'text',
                  text: `summary: ${!Array.isArray(text) && text.type === 'text' ? text.text : '?'} (${String(
                    ctx.mcpReq.requestState(),
                  )})`,
                },
              ],
            };
          },
        );
      },
    );
    const upstreams = { linear, notion, github, sentry };
    /** How many callers' event streams (`GET /portal/…`) the portal opened. */
    let listening = 0;

    beforeEach(async () => {
      progressGate = gate();
      received.length = 0;
      listening = 0;
      subscribers.clear();
      const now = () => h?.now ?? START;
      await linear.start({}, now);
      await notion.start({ issueRefreshTokens: false }, now);
      await github.start({}, now);
      await sentry.start({}, now);
      keyway = createServer();
      keyway.listen(0, '127.0.0.1');
      await once(keyway, 'listening');
      base = `http://127.0.0.1:${(keyway.address() as AddressInfo).port}`;
      h = new Harness(await factory.create(), {
        baseUrl: base,
        providerManagement: true,
        allowedHosts: ['127.0.0.1'],
        portal: { listDeadlineMs: 1500, auditToolCalls: true },
      });
      keyway.on('request', (req, res) => toNodeHandler(h.handler)(req, res));
      for (const [name, upstream] of Object.entries(upstreams)) {
        const put = await h.call('PUT', `/api/admin/providers/acme/${name}`, {
          body: { template: 'mcp', configuration: { resource_url: upstream.world.resourceUrl } },
        });
        expect(put.status).toBe(201);
        const connected = await connectThroughConsent(
          h,
          upstream.world,
          `${PREFIX}/${name}`,
          `acme/${name}`,
        );
        expect(connected.status).toBe(200);
      }
    });

    afterEach(async () => {
      for (const client of clients.splice(0)) await client.close().catch(() => {});
      await h.broker.close();
      keyway.closeAllConnections();
      keyway.close();
      for (const upstream of Object.values(upstreams)) await upstream.stop();
      expect(h.errors).toEqual([]);
    });

    /** A fetch that keeps every answer's text, for the search for upstream secrets. */
    const keeping = async (input: string | URL | Request, init?: RequestInit) => {
      const response = await fetch(input, init);
      if (init?.method === 'GET' && response.status === 200) listening += 1;
      response
        .clone()
        .text()
        .then((text) => received.push(text))
        .catch(() => {});
      return response;
    };

    async function portalClient(
      token: string,
      options: { prefix?: string; sampling?: boolean } = {},
    ): Promise<Client & { wire: StreamableHTTPClientTransport }> {
      const client = new Client(
        { name: 'portal-test', version: '1.0.0' },
        { capabilities: options.sampling === true ? { sampling: {} } : {} },
      );
      clients.push(client);
      const wire = new StreamableHTTPClientTransport(
        new URL(`${base}/portal/${options.prefix ?? PREFIX}`),
        { fetch: keeping, requestInit: { headers: { authorization: `Bearer ${token}` } } },
      );
      await client.connect(wire);
      return Object.assign(client, { wire });
    }

    const rootKey = () => 'test-root-key-0123456789-abcdefghijklmnop';

    /** Every secret of every upstream world (access and refresh tokens, codes). */
    const secrets = () => Object.values(upstreams).flatMap((upstream) => upstream.world.secrets());

    it('lists every server’s tools as <alias>__<name>, calls each through the gateway, and never shows an upstream token', async () => {
      const client = await portalClient(rootKey());
      const { tools } = await client.listTools();
      expect(tools.map((tool) => tool.name).sort()).toEqual([
        'github__get_repo',
        'keyway__connect',
        'keyway__connections',
        'linear__admin',
        'linear__ask',
        'linear__create_issue',
        'linear__progress',
        'linear__search_issues',
        'linear__tell',
        'linear__wait',
        'notion__search',
        'sentry__get_issue',
        'sentry__summarize',
      ]);
      expect(tools.find((tool) => tool.name === 'linear__search_issues')?.annotations).toEqual({
        readOnlyHint: true,
      });
      expect(
        await client.callTool({ name: 'linear__search_issues', arguments: { query: 'portal' } }),
      ).toEqual({ content: [{ type: 'text', text: 'linear found: portal' }] });
      expect(await client.callTool({ name: 'github__get_repo', arguments: {} })).toEqual({
        content: [{ type: 'text', text: 'keyway-dev/keyway' }],
      });
      // The stateless 2026-07-28 server, behind the same portal.
      expect(
        await client.callTool({ name: 'sentry__get_issue', arguments: { id: 'S-1' } }),
      ).toEqual({
        content: [{ type: 'text', text: 'sentry issue S-1' }],
      });
      expect(sentry.methods).toContain('tools/call');
      // One session with the server for this caller, one the portal keeps to hear of changes.
      expect(linear.methods.filter((method) => method === 'initialize')).toHaveLength(2);
      // Each server saw only its own connection's token.
      await client.close();
      const all = received.join('\n');
      expect(secrets().filter((secret) => all.includes(secret))).toEqual([]);
    });

    it('records each call of a server’s tool as tool.called, never its arguments or its result, and counts it', async () => {
      const metrics = createMetrics({ processMetrics: false });
      const old = h.broker;
      Object.assign(h.extra, { observe: metrics.observe });
      h.rebuild(rootKey());
      // The first broker's sessions end; its storage is the new one's too.
      await old.portal.close();
      const client = await portalClient(rootKey());
      await client.callTool({ name: 'linear__search_issues', arguments: { query: 'secret plan' } });
      linear.stepUp.set('admin', 'admin');
      await client.callTool({ name: 'linear__admin', arguments: {} }).catch(() => {});
      await client.callTool({ name: 'keyway__connections', arguments: {} });
      const audit = await h.call('GET', '/api/admin/audit?type=tool.called');
      expect(audit.status).toBe(200);
      const events = (
        audit.body.items as { actor: string; resource: string; data: Record<string, unknown> }[]
      )
        .map(({ actor, resource, data }) => ({
          actor,
          resource,
          data: { ...data, duration_ms: typeof data.duration_ms },
        }))
        .reverse();
      expect(events).toEqual([
        {
          actor: 'root',
          resource: `${PREFIX}/linear`,
          data: { tool: 'search_issues', alias: 'linear', outcome: 'ok', duration_ms: 'number' },
        },
        {
          actor: 'root',
          resource: `${PREFIX}/linear`,
          data: {
            tool: 'admin',
            alias: 'linear',
            outcome: 'consent_required',
            duration_ms: 'number',
          },
        },
      ]);
      expect(audit.text).not.toContain('secret plan');
      expect(audit.text).not.toContain('linear found');
      const families = async () => parseMetrics(await metrics.text());
      const calls = async (outcome: string) =>
        sampleOf(await families(), 'keyway_portal_tool_calls_total', { alias: 'linear', outcome });
      expect(await calls('ok')).toBe(1);
      expect(await calls('consent_required')).toBe(1);
      expect(sampleOf(await families(), 'keyway_portal_open_sessions', {})).toBe(1);
      await client.wire.terminateSession();
      await expect
        .poll(async () => sampleOf(await families(), 'keyway_portal_open_sessions', {}))
        .toBe(0);
    });

    it('answers a failure of its own storage with a generic internal error, told to the operator only', async () => {
      const told: unknown[] = [];
      let failing = false;
      const storage = new Proxy(h.storage, {
        get(target, property, receiver) {
          if (property === 'listConnections' && failing) {
            return () =>
              Promise.reject(new Error('connect postgres://keyway:hunter2@db.internal failed'));
          }
          return Reflect.get(target, property, receiver);
        },
      });
      const old = h.broker;
      Object.assign(h.extra, { storage, onBackgroundError: (error: unknown) => told.push(error) });
      h.rebuild(rootKey());
      await old.portal.close();
      const client = await portalClient(rootKey());
      failing = true;
      const refused = await client.listTools().catch((e) => e);
      expect((refused as McpError).code).toBe(-32603);
      expect((refused as McpError).message).toBe(
        'MCP error -32603: the portal failed to handle the request',
      );
      expect(told.map((error) => (error as Error).message)).toEqual([
        'connect postgres://keyway:hunter2@db.internal failed',
      ]);
      failing = false;
    });

    it('answers a step-up with a URL elicitation (-32042) whose consent asks for the scope the server named', async () => {
      linear.stepUp.set('admin', 'admin');
      const client = await portalClient(rootKey());
      const error = await client.callTool({ name: 'linear__admin', arguments: {} }).catch((e) => e);
      expect(error).toBeInstanceOf(McpError);
      expect((error as McpError).code).toBe(-32042);
      const { elicitations } = (error as McpError).data as {
        elicitations: { mode: string; url: string; message: string }[];
      };
      expect(elicitations).toHaveLength(1);
      expect(elicitations[0]?.mode).toBe('url');
      const consent = new URL(elicitations[0]?.url ?? '');
      expect(`${consent.origin}${consent.pathname}`).toBe(`${linear.origin}/as/oauth/authorize`);
      expect(consent.searchParams.get('scope')?.split(' ')).toContain('admin');
      expect(elicitations[0]?.message).toBe(
        `Keyway needs your consent to use acme/linear for ${PREFIX}/linear: open the link to authorize it, then retry.`,
      );
    });

    it('answers a connection that expired without a refresh token with its consent URL, or says who must consent', async () => {
      const client = await portalClient(rootKey());
      expect(await client.callTool({ name: 'notion__search', arguments: {} })).toEqual({
        content: [{ type: 'text', text: 'notion pages' }],
      });
      h.now += 2 * HOUR;
      const error = await client
        .callTool({ name: 'notion__search', arguments: {} })
        .catch((e) => e);
      expect((error as McpError).code).toBe(-32042);
      const { elicitations } = (error as McpError).data as { elicitations: { url: string }[] };
      expect(new URL(elicitations[0]?.url ?? '').origin).toBe(notion.origin);
      // Still listed (its last known tools), so the agent can say what the user must do.
      expect((await client.listTools()).tools.map((tool) => tool.name)).toContain('notion__search');
      // A caller that may not authorize through the provider gets a tool error that says so.
      const alice = await h.mint('alice', [PREFIX]);
      const limited = await portalClient(alice);
      expect(await limited.callTool({ name: 'notion__search', arguments: {} })).toEqual({
        isError: true,
        content: [
          {
            type: 'text',
            text:
              `connection notion (${PREFIX}/notion) needs its user's consent (it is error): whoever manages ` +
              `provider acme/notion must authorize it again (POST /api/oauth/authorize/acme/notion with ` +
              `connection_id ${PREFIX}/notion)`,
          },
        ],
      });
    });

    it('relays a server’s list_changed and lists the new tool', async () => {
      const client = await portalClient(rootKey());
      const changes: string[] = [];
      client.setNotificationHandler(ToolListChangedNotificationSchema, (notification) => {
        changes.push(notification.method);
      });
      expect((await client.listTools()).tools.map((tool) => tool.name)).not.toContain(
        'github__list_pulls',
      );
      // A notice is sent on an open stream or not at all: the caller's own to the portal,
      // and the one the portal's watch of GitHub opened after the list.
      await expect.poll(() => listening).toBe(1);
      await expect.poll(() => github.streams).toBe(1);
      for (const server of github.servers) {
        server.registerTool('list_pulls', { description: 'Lists pull requests' }, async () => ({
          content: [{ type: 'text', text: 'no pulls' }],
        }));
      }
      // Three hops (server, gateway, portal) on a machine that may be busy: waited for longer.
      await expect
        .poll(() => changes, { timeout: 10_000 })
        .toEqual(['notifications/tools/list_changed']);
      expect((await client.listTools()).tools.map((tool) => tool.name)).toContain(
        'github__list_pulls',
      );
      expect(await client.callTool({ name: 'github__list_pulls', arguments: {} })).toEqual({
        content: [{ type: 'text', text: 'no pulls' }],
      });
    });

    it('lists a URI two servers share as two resources, reads each from its server, and relays a subscribed change', async () => {
      const client = await portalClient(rootKey());
      const { resources } = await client.listResources();
      const notionMemo = `keyway-portal://notion/${encodeURIComponent('memo://today')}`;
      const githubMemo = `keyway-portal://github/${encodeURIComponent('memo://today')}`;
      expect(resources.map((resource) => resource.uri).sort()).toEqual([githubMemo, notionMemo]);
      expect(await client.readResource({ uri: notionMemo })).toEqual({
        contents: [{ uri: 'memo://today', mimeType: 'text/plain', text: "notion's memo" }],
      });
      expect(await client.readResource({ uri: githubMemo })).toEqual({
        contents: [{ uri: 'memo://today', mimeType: 'text/plain', text: "github's memo" }],
      });
      // A URI no server lists, in a portal of several: the portal's own -32602, naming it.
      const unknown = await client
        .readResource({ uri: 'memo://nowhere' })
        .catch((error: McpError) => error);
      expect(unknown).toBeInstanceOf(McpError);
      expect([(unknown as McpError).code, (unknown as McpError).data]).toEqual([
        -32602,
        { uri: 'memo://nowhere' },
      ]);

      const updates: string[] = [];
      client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => {
        updates.push(notification.params.uri);
      });
      // The caller's session with Notion has no event stream yet (none was needed).
      const streams = notion.streams;
      expect(await client.subscribeResource({ uri: notionMemo })).toEqual({});
      // The portal opens it for the server's change notices.
      await expect.poll(() => notion.streams).toBe(streams + 1);
      // The server was asked under its own URI, by the caller's session only.
      expect(subscribers.get('notion')?.map((entry) => entry.uri)).toEqual(['memo://today']);
      expect(subscribers.get('github')).toBeUndefined();
      const [subscribed] = subscribers.get('notion') ?? [];
      await subscribed?.server.server.sendResourceUpdated({ uri: 'memo://today' });
      await expect.poll(() => updates).toEqual([notionMemo]);
      // A change the caller did not subscribe to, or no longer subscribes to, is not relayed.
      await subscribed?.server.server.sendResourceUpdated({ uri: 'memo://yesterday' });
      expect(await client.unsubscribeResource({ uri: notionMemo })).toEqual({});
      expect(subscribers.get('notion')).toEqual([]);
      await subscribed?.server.server.sendResourceUpdated({ uri: 'memo://today' });
      // Subscribed again, a change sent after those on the same stream: the only one relayed.
      expect(await client.subscribeResource({ uri: notionMemo })).toEqual({});
      await subscribed?.server.server.sendResourceUpdated({ uri: 'memo://today' });
      await expect.poll(() => updates).toEqual([notionMemo, notionMemo]);
    });

    it('lists within the deadline when a server never answers tools/list, and says which one', async () => {
      github.hangLists = true;
      const client = await portalClient(rootKey());
      const logs: string[] = [];
      client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
        logs.push(String(notification.params.data));
      });
      const { tools } = await client.listTools();
      const names = tools.map((tool) => tool.name);
      expect(names).toContain('linear__search_issues');
      expect(names).toContain('sentry__get_issue');
      expect(names.filter((name) => name.startsWith('github__'))).toEqual([]);
      expect(logs).toEqual([
        'github: its server did not list its tools within 1500 ms; its last known ones are listed',
      ]);
    });

    it('keeps a denied or writing tool out of the list and out of reach (the connection’s policy)', async () => {
      const patched = await h.call('PATCH', `/api/oauth/connections/${PREFIX}/linear`, {
        body: { tools: { deny: ['create_*'] } },
      });
      expect(patched.status).toBe(200);
      expect(patched.body.tools).toEqual({ deny: ['create_*'] });
      expect(patched.body.alias).toBeNull();
      const client = await portalClient(rootKey());
      const names = (await client.listTools()).tools.map((tool) => tool.name);
      expect(names).not.toContain('linear__create_issue');
      expect(names).toContain('linear__admin');
      const refused = await client
        .callTool({ name: 'linear__create_issue', arguments: {} })
        .catch((e) => e);
      expect((refused as McpError).code).toBe(-32602);
      expect((refused as McpError).message).toBe(
        'MCP error -32602: no tool is named "linear__create_issue"',
      );
      expect(linear.methods).not.toContain('tools/call');
      // Read-only: only the tools annotated readOnlyHint stay.
      await h.call('PATCH', `/api/oauth/connections/${PREFIX}/linear`, {
        body: { tools: { read_only: true } },
      });
      const readOnly = (await client.listTools()).tools
        .map((tool) => tool.name)
        .filter((name) => name.startsWith('linear__'));
      expect(readOnly).toEqual(['linear__search_issues']);
    });

    it('names a connection by the alias set on it', async () => {
      const patched = await h.call('PATCH', `/api/oauth/connections/${PREFIX}/github`, {
        body: { alias: 'gh' },
      });
      expect(patched.status).toBe(200);
      expect(patched.body.alias).toBe('gh');
      const taken = await h.call('PATCH', `/api/oauth/connections/${PREFIX}/linear`, {
        body: { alias: 'gh' },
      });
      expect(taken.status).toBe(400);
      expect(taken.body.error_description).toBe(
        `"alias": "gh" is already the alias of connection "${PREFIX}/github"`,
      );
      const client = await portalClient(rootKey());
      const names = (await client.listTools()).tools.map((tool) => tool.name);
      expect(names).toContain('gh__get_repo');
      expect(names).not.toContain('github__get_repo');
      const listed = await client.callTool({ name: 'keyway__connections', arguments: {} });
      expect(listed.structuredContent).toEqual({
        connections: [
          {
            alias: 'gh',
            connection_id: `${PREFIX}/github`,
            provider_id: 'acme/github',
            status: 'active',
          },
          {
            alias: 'linear',
            connection_id: `${PREFIX}/linear`,
            provider_id: 'acme/linear',
            status: 'active',
          },
          {
            alias: 'notion',
            connection_id: `${PREFIX}/notion`,
            provider_id: 'acme/notion',
            status: 'active',
          },
          {
            alias: 'sentry',
            connection_id: `${PREFIX}/sentry`,
            provider_id: 'acme/sentry',
            status: 'active',
          },
        ],
      });
    });

    it('lists and calls only the tools a token’s globs allow, which a child can narrow but never widen', async () => {
      const minted = await h.call('POST', '/api/admin/tokens', {
        body: { name: 'agent', scopes: [PREFIX], tools: ['linear__search_*', 'sentry__*'] },
      });
      expect(minted.status).toBe(201);
      expect(minted.body.tools).toEqual(['linear__search_*', 'sentry__*']);
      const agent = minted.body.access_token as string;
      const client = await portalClient(agent);
      expect((await client.listTools()).tools.map((tool) => tool.name).sort()).toEqual([
        'linear__search_issues',
        'sentry__get_issue',
        'sentry__summarize',
      ]);
      const refused = await client
        .callTool({ name: 'github__get_repo', arguments: {} })
        .catch((e) => e);
      expect((refused as McpError).code).toBe(-32602);
      // A child may narrow, never widen; without globs of its own it inherits its parent's.
      const wider = await h.call('POST', '/api/admin/tokens', {
        token: agent,
        body: { name: 'agent.child', scopes: [PREFIX], tools: ['linear__*'] },
      });
      expect(wider.status).toBe(403);
      expect(wider.body).toEqual({
        error: 'delegation_denied',
        error_description:
          '"tools": "linear__*" is not within the minting token\'s tools (["linear__search_*","sentry__*"])',
        details: [{ path: 'tools', message: "wider than the minting token's tools" }],
      });
      const narrower = await h.call('POST', '/api/admin/tokens', {
        token: agent,
        body: { name: 'agent.narrow', scopes: [PREFIX], tools: ['sentry__get_*'] },
      });
      expect(narrower.status).toBe(201);
      const inherited = await h.call('POST', '/api/admin/tokens', {
        token: agent,
        body: { name: 'agent.same', scopes: [PREFIX] },
      });
      expect(inherited.body.tools).toEqual(['linear__search_*', 'sentry__*']);
      const child = await portalClient(narrower.body.access_token as string);
      expect((await child.listTools()).tools.map((tool) => tool.name)).toEqual([
        'sentry__get_issue',
      ]);
    });

    it('relays a server’s sampling request to a client that declared sampling', async () => {
      const client = await portalClient(rootKey(), { sampling: true });
      const asked: string[] = [];
      client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
        const first = request.params.messages[0]?.content;
        asked.push(
          first !== undefined && !Array.isArray(first) && first.type === 'text' ? first.text : '?',
        );
        return { role: 'assistant', model: 'test-model', content: { type: 'text', text: '4' } };
      });
      expect(await client.callTool({ name: 'linear__ask', arguments: {} })).toEqual({
        content: [{ type: 'text', text: 'the model said 4' }],
      });
      expect(asked).toEqual(['What is 2 + 2?']);
    });

    it('routes each caller’s progress to that caller only', async () => {
      const first = await portalClient(rootKey());
      const second = await portalClient(rootKey());
      const seen: Record<string, number[]> = { first: [], second: [] };
      const call = (client: Client, who: 'first' | 'second') =>
        client.callTool({ name: 'linear__progress', arguments: {} }, undefined, {
          onprogress: (progress) => seen[who]?.push(progress.progress),
        });
      const one = call(first, 'first');
      const two = call(second, 'second');
      await expect.poll(() => [seen.first?.length, seen.second?.length]).toEqual([1, 1]);
      progressGate.open();
      const [a, b] = await Promise.all([one, two]);
      expect(seen).toEqual({ first: [1, 2], second: [1, 2] });
      expect((a.content as { text: string }[])[0]?.text).toMatch(/^done /);
      expect((b.content as { text: string }[])[0]?.text).toMatch(/^done /);
      // Each caller's call reached the server with a progress token of its own.
      expect(a).not.toEqual(b);
    });

    it('cancels the server’s call when its caller cancels', async () => {
      const client = await portalClient(rootKey());
      let reached!: () => void;
      const started = new Promise<void>((resolve) => {
        reached = resolve;
      });
      waiting = { started: () => reached(), cancelled: [] };
      const controller = new AbortController();
      const call = client
        .callTool({ name: 'linear__wait', arguments: {} }, undefined, { signal: controller.signal })
        .catch((error: Error) => `${error.name}: ${error.message}`);
      await started;
      controller.abort('the user stopped it');
      expect(await call).toBe('McpError: MCP error -32001: the user stopped it');
      await expect.poll(() => waiting.cancelled.length).toBe(1);
    });

    it('relays a server’s log message to the caller whose session it is', async () => {
      const client = await portalClient(rootKey());
      const logs: unknown[] = [];
      client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
        logs.push(notification.params.data);
      });
      expect(await client.callTool({ name: 'linear__tell', arguments: {} })).toEqual({
        content: [{ type: 'text', text: 'told' }],
      });
      await expect.poll(() => logs).toEqual(['linear is telling']);
    });

    it('starts a connection with keyway__connect and answers its consent URL', async () => {
      const client = await portalClient(rootKey());
      const started = await client.callTool({
        name: 'keyway__connect',
        arguments: { provider_id: 'acme/linear', name: 'linear-2' },
      });
      const content = started.structuredContent as {
        connection_id: string;
        authorization_url: string;
      };
      expect(content.connection_id).toBe(`${PREFIX}/linear-2`);
      expect(new URL(content.authorization_url).origin).toBe(linear.origin);
      const back = new URL(linear.world.consent(content.authorization_url));
      expect((await h.call('GET', `${back.pathname}${back.search}`, { token: null })).status).toBe(
        200,
      );
      const listed = await client.callTool({ name: 'keyway__connections', arguments: {} });
      expect(
        (listed.structuredContent as { connections: { alias: string }[] }).connections.map(
          (connection) => connection.alias,
        ),
      ).toEqual(['github', 'linear', 'linear-2', 'notion', 'sentry']);
      expect((await client.listTools()).tools.map((tool) => tool.name)).toContain(
        'linear-2__search_issues',
      );
    });

    it('keeps a session to the credential that opened it and to its portal', async () => {
      const client = await portalClient(rootKey());
      const sessionId = client.wire.sessionId ?? '';
      expect(sessionId).toMatch(/^[A-Za-z0-9_-]{32}$/);
      const alice = await h.mint('alice', [PREFIX]);
      const stolen = await fetch(`${base}/portal/${PREFIX}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${alice}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-session-id': sessionId,
          'mcp-protocol-version': '2025-11-25',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
      expect(stolen.status).toBe(404);
      expect(await stolen.json()).toEqual({
        jsonrpc: '2.0',
        error: { code: -32001, message: 'Session not found' },
        id: null,
      });
      // A credential that does not cover the prefix is refused before any session is read.
      const bob = await h.mint('bob', ['acme/users/bob']);
      const outside = await fetch(`${base}/portal/${PREFIX}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${bob}`, 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
      expect(outside.status).toBe(403);
      expect((await outside.json()).error).toBe('insufficient_scope');
    });

    it('speaks the stateless 2026-07-28 wire to a client pinned to it', async () => {
      const client = new ModernClient(
        { name: 'portal-modern-test', version: '2.0.0' },
        { versionNegotiation: { mode: { pin: '2026-07-28' } } },
      );
      clients.push(client);
      await client.connect(
        new ModernTransport(new URL(`${base}/portal/${PREFIX}`), {
          requestInit: { headers: { authorization: `Bearer ${rootKey()}` } },
        }),
      );
      const { tools } = await client.listTools();
      expect(tools.map((tool) => tool.name)).toContain('linear__search_issues');
      // The portal's own envelope (2026-07-28) names the portal, never the server behind it.
      expect(
        await client.callTool({ name: 'linear__search_issues', arguments: { query: 'modern' } }),
      ).toEqual({
        _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'keyway-portal', version: '1' } },
        content: [{ type: 'text', text: 'linear found: modern' }],
      });
      expect(
        await client.callTool({ name: 'sentry__get_issue', arguments: { id: 'S-2' } }),
      ).toEqual({
        _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'keyway-portal', version: '1' } },
        content: [{ type: 'text', text: 'sentry issue S-2' }],
      });
    });

    it('passes a 2026-07-28 server’s request for input to a caller on that wire, and its answer back', async () => {
      const modernClient = async (sampling: boolean) => {
        const client = new ModernClient(
          { name: 'portal-modern-sampling', version: '2.0.0' },
          {
            capabilities: sampling ? { sampling: {} } : {},
            versionNegotiation: { mode: { pin: '2026-07-28' } },
          },
        );
        clients.push(client);
        await client.connect(
          new ModernTransport(new URL(`${base}/portal/${PREFIX}`), {
            requestInit: { headers: { authorization: `Bearer ${rootKey()}` } },
          }),
        );
        return client;
      };
      const client = await modernClient(true);
      const asked: unknown[] = [];
      client.setRequestHandler('sampling/createMessage', async (request) => {
        asked.push(request.params.messages);
        return {
          role: 'assistant',
          model: 'test-model',
          content: { type: 'text', text: 'all quiet' },
        };
      });
      // The client's SDK answers the portal's `input_required` and retries; the portal sends
      // the answer and the server's request state back to the server.
      expect(await client.callTool({ name: 'sentry__summarize', arguments: {} })).toEqual({
        _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'keyway-portal', version: '1' } },
        content: [{ type: 'text', text: 'summary: all quiet (sentry-round-1)' }],
      });
      expect(asked).toEqual([[{ role: 'user', content: { type: 'text', text: 'Summarize S-1' } }]]);
      expect(sentry.methods.filter((method) => method === 'tools/call')).toHaveLength(2);

      // Manually: the caller sees the server's request as the server wrote it.
      const first = await client.callTool(
        { name: 'sentry__summarize', arguments: {} },
        { allowInputRequired: true },
      );
      expect(first).toMatchObject({
        resultType: 'input_required',
        requestState: 'sentry-round-1',
        inputRequests: {
          model: {
            method: 'sampling/createMessage',
            params: { maxTokens: 20 },
          },
        },
      });
    });
  },
);
