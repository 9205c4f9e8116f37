import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { getRequestListener } from '@hono/node-server';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { z } from 'zod';

/*
 * What the end-to-end tests against real servers share: loopback servers, a cookie-keeping
 * browser for authorization servers' pages, Keyway's API, and an MCP server built with the
 * official SDK that stands in front of any authorization server.
 */

/** Starts a server on a free loopback port and answers its origin. */
export async function listen(server: Server): Promise<string> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Stops a server, dropping its open connections. */
export async function close(server: Server): Promise<void> {
  server.closeAllConnections();
  server.close();
  await once(server, 'close');
}

/** A cookie jar for driving the authorization server's pages with plain HTTP requests. */
export class Browser {
  readonly cookies = new Map<string, string>();

  async request(url: string, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    if (this.cookies.size > 0) {
      headers.set(
        'cookie',
        [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; '),
      );
    }
    const response = await fetch(url, { ...init, headers, redirect: 'manual' });
    for (const cookie of response.headers.getSetCookie()) {
      const [pair] = cookie.split(';');
      const index = (pair as string).indexOf('=');
      this.cookies.set((pair as string).slice(0, index).trim(), (pair as string).slice(index + 1));
    }
    return response;
  }

  /**
   * Walks the consent flow: follows redirects, signs in and consents on the development
   * pages of oidc-provider (any other server here consents without a page), and stops at
   * the redirect back to `callbackPrefix`.
   */
  async consent(authorizationUrl: string, callbackPrefix: string): Promise<string> {
    let url = authorizationUrl;
    for (let step = 0; step < 20; step++) {
      const response = await this.request(url);
      const location = response.headers.get('location');
      if (location !== null) {
        const next = new URL(location, url).href;
        if (next.startsWith(callbackPrefix)) return next;
        url = next;
        continue;
      }
      const html = await response.text();
      const prompt = html.match(/name="prompt" value="(\w+)"/)?.[1];
      const action = html.match(/<form[^>]*action="([^"]+)"/)?.[1];
      if (prompt === undefined || action === undefined)
        throw new Error(`unexpected page at ${url}: ${html.slice(0, 1500)}`);
      const form = new URLSearchParams(
        prompt === 'login' ? { prompt, login: 'alice', password: 'any' } : { prompt },
      );
      const submitted = await this.request(new URL(action, url).href, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: form.toString(),
      });
      url = new URL(submitted.headers.get('location') as string, url).href;
    }
    throw new Error('the consent flow did not come back');
  }
}

/** One call of Keyway's HTTP API with a credential: the status and the parsed body. */
export async function callApi(
  base: string,
  credential: string,
  method: string,
  path: string,
  body?: unknown,
  // biome-ignore lint/suspicious/noExplicitAny: answers are read field by field, as the API documents them
): Promise<{ status: number; body: any }> {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${credential}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

/** What an MCP server learned of a token it accepted. */
export interface VerifiedToken {
  scopes: string[];
}

/** Options of {@link serveMcp}. */
export interface McpServerOptions {
  issuer: string;
  resourceUrl: string;
  name: string;
  version: string;
  echo: (text: string) => string;
  /**
   * Checks a presented access token: its scopes, or `null` when refused. Default: a JWT
   * signed by a key of `${issuer}/jwks`, issued by `issuer` for this resource (RFC 9068).
   */
  verify?: (token: string) => Promise<VerifiedToken | null>;
  /** The protected-resource metadata's `scopes_supported`. Default `['mcp:tools']`. */
  scopesSupported?: string[];
  /**
   * A tool `admin` that needs this scope: without it, a call answers `403` with
   * `error="insufficient_scope"` naming it, so the client steps up (MCP authorization).
   */
  adminScope?: string;
}

/** JWT access tokens of an issuer for one resource, checked against its JWKS. */
export function jwtVerifier(
  issuer: string,
  resourceUrl: string,
  jwksUrl = `${issuer}/jwks`,
  audience: string | null = resourceUrl,
): (token: string) => Promise<VerifiedToken | null> {
  const jwks = createRemoteJWKSet(new URL(jwksUrl));
  return async (token) => {
    try {
      const { payload } = await jwtVerify(token, jwks, {
        issuer,
        ...(audience === null ? {} : { audience }),
      });
      return { scopes: typeof payload.scope === 'string' ? payload.scope.split(' ') : [] };
    } catch {
      return null;
    }
  };
}

/**
 * An MCP server from the official SDK on `http`: its protected-resource metadata naming
 * `issuer`, every request's access token checked by `verify`, and one tool, `echo` (and
 * `admin`, with `adminScope`).
 */
export function serveMcp(http: Server, options: McpServerOptions): void {
  const { issuer, resourceUrl } = options;
  const verify = options.verify ?? jwtVerifier(issuer, resourceUrl);
  const origin = new URL(resourceUrl).origin;
  const metadataUrl = `${origin}/.well-known/oauth-protected-resource/mcp`;
  const scopesSupported = options.scopesSupported ?? ['mcp:tools'];
  const handle = async (request: Request): Promise<Response> => {
    const url = new URL(request.url);
    if (url.pathname === '/.well-known/oauth-protected-resource/mcp') {
      return Response.json({
        resource: resourceUrl,
        authorization_servers: [issuer],
        scopes_supported: scopesSupported,
      });
    }
    if (url.pathname !== '/mcp') return new Response('not found', { status: 404 });
    const challenge = (status: 401 | 403, extra = '') =>
      new Response(JSON.stringify({ error: status === 401 ? 'unauthorized' : 'forbidden' }), {
        status,
        headers: {
          'content-type': 'application/json',
          'www-authenticate': `Bearer resource_metadata="${metadataUrl}"${extra}`,
        },
      });
    const token = request.headers.get('authorization')?.replace(/^Bearer /i, '');
    if (!token) return challenge(401);
    const verified = await verify(token);
    if (verified === null) return challenge(401, ', error="invalid_token"');
    const body = request.method === 'POST' ? await request.text() : null;
    if (options.adminScope !== undefined && body !== null) {
      const message = JSON.parse(body) as { method?: string; params?: { name?: string } };
      if (
        message.method === 'tools/call' &&
        message.params?.name === 'admin' &&
        !verified.scopes.includes(options.adminScope)
      ) {
        return challenge(403, `, error="insufficient_scope", scope="${options.adminScope}"`);
      }
    }
    const server = new McpServer({ name: options.name, version: options.version });
    server.registerTool(
      'echo',
      { description: 'Echoes its text', inputSchema: { text: z.string() } },
      async ({ text }) => ({ content: [{ type: 'text', text: options.echo(text) }] }),
    );
    if (options.adminScope !== undefined) {
      server.registerTool('admin', { description: 'Needs more scope' }, async () => ({
        content: [{ type: 'text', text: 'admin granted' }],
      }));
    }
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    await server.connect(transport);
    return transport.handleRequest(
      new Request(request.url, {
        method: request.method,
        headers: request.headers,
        ...(body === null ? {} : { body }),
      }),
    );
  };
  http.on('request', getRequestListener(handle));
}

/** A loopback server answering with `handle`, and its origin. */
export async function serveFetch(
  handle: (request: Request) => Promise<Response> | Response,
): Promise<{ server: Server; origin: string }> {
  const server = createServer(getRequestListener(handle));
  return { server, origin: await listen(server) };
}
