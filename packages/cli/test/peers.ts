import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { toWebRequest, writeWebResponse } from '@keyway/http';
import { createTestWorld, type TestWorld, type TestWorldOptions } from '@keyway/testing';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import Provider, { type ClientMetadata, errors } from 'oidc-provider';
import { z } from 'zod';

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
   * Walks the consent flow: follows redirects, signs in and consents on the dev pages of
   * oidc-provider, and stops at the redirect back to `callbackPrefix`.
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

/**
 * oidc-provider as the MCP server's authorization server: PKCE required, dynamic
 * registration, refresh-token rotation (a consumed refresh token presented again revokes
 * the grant), resource indicators for the one resource, development sign-in pages.
 */
export function oidcProvider(
  issuer: string,
  resourceUrl: () => string,
  options: { clients?: ClientMetadata[]; accessTokenTTL: number; accessTokenFormat?: 'jwt' },
): Provider {
  return new Provider(issuer, {
    clients: options.clients ?? [],
    cookies: { keys: ['keyway-test-cookie-key'] },
    scopes: ['openid', 'offline_access', 'mcp:tools'],
    pkce: { required: () => true },
    rotateRefreshToken: true,
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    findAccount: async (_ctx, id) => ({ accountId: id, claims: async () => ({ sub: id }) }),
    features: {
      registration: { enabled: true },
      revocation: { enabled: true },
      introspection: { enabled: true },
      devInteractions: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => resourceUrl(),
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, indicator) => {
          if (indicator !== resourceUrl()) throw new errors.InvalidTarget();
          return {
            scope: 'mcp:tools',
            audience: resourceUrl(),
            accessTokenTTL: options.accessTokenTTL,
            ...(options.accessTokenFormat ? { accessTokenFormat: options.accessTokenFormat } : {}),
          };
        },
      },
    },
  });
}

/** One call of Keyway's HTTP API with a credential: the status and the parsed body. */
export async function callApi(
  base: string,
  credential: string,
  method: string,
  path: string,
  body?: unknown,
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

/**
 * An MCP server from the official SDK on `http`: its protected-resource metadata naming
 * `issuer`, JWT access tokens checked against the issuer's keys and the resource, and one
 * tool, `echo`.
 */
export function serveMcp(
  http: Server,
  options: {
    issuer: string;
    resourceUrl: string;
    name: string;
    version: string;
    echo: (text: string) => string;
  },
): void {
  const { issuer, resourceUrl } = options;
  const jwks = createRemoteJWKSet(new URL(`${issuer}/jwks`));
  const origin = new URL(resourceUrl).origin;
  const metadataUrl = `${origin}/.well-known/oauth-protected-resource/mcp`;
  http.on('request', (req, res) => {
    const request = toWebRequest(req);
    const handle = async (): Promise<Response> => {
      const url = new URL(request.url);
      if (url.pathname === '/.well-known/oauth-protected-resource/mcp') {
        return Response.json({
          resource: resourceUrl,
          authorization_servers: [issuer],
          scopes_supported: ['mcp:tools'],
        });
      }
      if (url.pathname !== '/mcp') return new Response('not found', { status: 404 });
      const challenge = (extra = '') =>
        new Response(JSON.stringify({ error: 'unauthorized' }), {
          status: 401,
          headers: {
            'content-type': 'application/json',
            'www-authenticate': `Bearer resource_metadata="${metadataUrl}"${extra}`,
          },
        });
      const token = request.headers.get('authorization')?.replace(/^Bearer /i, '');
      if (!token) return challenge();
      try {
        await jwtVerify(token, jwks, { issuer, audience: resourceUrl });
      } catch {
        return challenge(', error="invalid_token"');
      }
      const server = new McpServer({ name: options.name, version: options.version });
      server.registerTool(
        'echo',
        { description: 'Echoes its text', inputSchema: { text: z.string() } },
        async ({ text }) => ({ content: [{ type: 'text', text: options.echo(text) }] }),
      );
      const transport = new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: undefined,
        enableJsonResponse: true,
      });
      await server.connect(transport);
      return transport.handleRequest(request);
    };
    handle().then(
      (response) => writeWebResponse(res, response),
      () => res.writeHead(500).end(),
    );
  });
}

/**
 * The in-memory test world, served over loopback HTTP so other processes can reach it.
 * Options go to `createTestWorld` (default: rotating refresh tokens, access tokens of 30 s,
 * inside the 60 s refresh margin from the start).
 */
export async function serveWorld(
  options: TestWorldOptions = {},
): Promise<{ world: TestWorld; close(): Promise<void> }> {
  let world: TestWorld | null = null;
  const server = createServer((req, res) => {
    (world as TestWorld)
      .fetch(toWebRequest(req))
      .then((response) => writeWebResponse(res, response));
  });
  const origin = await listen(server);
  world = createTestWorld({
    resourceUrl: `${origin}/mcp`,
    issuer: `${origin}/as`,
    rotateRefreshTokens: true,
    accessTokenLifetime: 30,
    ...options,
  });
  return { world, close: () => close(server) };
}

/** A loopback port nothing listens on (for now). */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  await close(server);
  return port;
}
