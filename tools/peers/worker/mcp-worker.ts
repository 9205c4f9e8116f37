/**
 * A Cloudflare Worker as the library's README writes one: `OAuthProvider` from
 * `@cloudflare/workers-oauth-provider` as authorization server and host of its only
 * resource, an MCP server built with the official SDK on its Web-standard transport. The
 * `/authorize` handler is the application's: it signs `alice` in and approves at once (a
 * real one shows a consent page). Bundled by esbuild with `ORIGIN` defined as the
 * Worker's origin, and run by workerd through miniflare (tools/peers/src/workers.ts).
 */
import { type OAuthHelpers, OAuthProvider } from '@cloudflare/workers-oauth-provider';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { z } from 'zod';

declare const ORIGIN: string;

interface Env {
  OAUTH_KV: unknown;
  OAUTH_PROVIDER: OAuthHelpers;
}

const apiHandler = {
  async fetch(request: Request): Promise<Response> {
    const server = new McpServer({ name: 'workers-mcp', version: '1.2.3' });
    server.registerTool(
      'echo',
      { description: 'Echoes its text', inputSchema: { text: z.string() } },
      async ({ text }) => ({ content: [{ type: 'text', text: `worker: ${text}` }] }),
    );
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    await server.connect(transport);
    return transport.handleRequest(request);
  },
};

const defaultHandler = {
  async fetch(request: Request, env: Env): Promise<Response> {
    if (new URL(request.url).pathname !== '/authorize') {
      return new Response('not found', { status: 404 });
    }
    const authRequest = await env.OAUTH_PROVIDER.parseAuthRequest(request);
    const { redirectTo } = await env.OAUTH_PROVIDER.completeAuthorization({
      request: authRequest,
      userId: 'alice',
      metadata: {},
      scope: authRequest.scope,
      props: { userId: 'alice' },
    });
    return Response.redirect(redirectTo, 302);
  },
};

export default new OAuthProvider<Env>({
  apiRoute: '/mcp',
  apiHandler,
  defaultHandler,
  authorizeEndpoint: '/authorize',
  tokenEndpoint: '/oauth/token',
  clientRegistrationEndpoint: '/oauth/register',
  scopesSupported: ['mcp:tools', 'offline_access'],
  resourceMetadata: { resource: `${ORIGIN}/mcp`, authorization_servers: [ORIGIN] },
  requiredScopes: ['mcp:tools'],
});
