import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { KeywayError, type KeywayErrorCode } from '@keyway/core';
import { queryParameters } from '@keyway/core/contract';
import { memoryStorage } from '@keyway/store-memory';
import { createTestWorld } from '@keyway/testing';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { OPERATIONS, openApiDocument } from '../src/openapi.js';
import { Harness, initializeMessage, type Reply, START } from './harness.js';

const committed = fileURLToPath(new URL('../../../docs/openapi.json', import.meta.url));
const reference = fileURLToPath(new URL('../../../docs/api.md', import.meta.url));

/** The first section a `see` names: `'§3.2, §3.3'` → `'3'`. */
const sectionOf = (see: string) => /§(\d+)/.exec(see)?.[1] ?? '';

/** One operation, as a reader of docs/api.md scans it. */
function operationMarkdown(
  operation: (typeof OPERATIONS)[number],
  document: ReturnType<typeof openApiDocument>,
): string[] {
  const entry = (document.paths as Record<string, Record<string, { responses: object }>>)[
    operation.path
  ]?.[operation.method.toLowerCase()];
  const statuses = Object.keys(entry?.responses ?? {});
  const ok = statuses.filter((status) => Number(status) < 400);
  const errors = [...new Set(operation.errors)];
  const lines = [`#### \`${operation.method.toUpperCase()} ${operation.path}\``, ''];
  lines.push(`${operation.summary}${operation.public ? ' **Public.**' : ''} See ${operation.see}.`);
  lines.push('');
  if (operation.query !== undefined) {
    lines.push(
      `- Query: ${Object.keys(queryParameters(operation.query))
        .map((name) => `\`${name}\``)
        .join(', ')}`,
    );
  }
  if (operation.body !== undefined)
    lines.push('- Body: JSON, see the schema in `docs/openapi.json`');
  lines.push(`- Answers: ${ok.join(', ')}`);
  lines.push(
    `- Errors: ${errors.length > 0 ? errors.map((code) => `\`${code}\``).join(', ') : 'none of its own'}${operation.public ? '' : '; `invalid_token`, `rate_limited` on any route'}`,
  );
  lines.push('');
  return lines;
}

/** The error codes by status, from the document's `Error` schema. */
function errorTable(document: ReturnType<typeof openApiDocument>): string {
  const codes = (
    document.components as { schemas: { Error: { properties: { error: { enum: string[] } } } } }
  ).schemas.Error.properties.error.enum;
  const byStatus = new Map<number, string[]>();
  for (const code of codes) {
    const status = new KeywayError(code as KeywayErrorCode, code).status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  return [
    '| Status | `error` |',
    '| --- | --- |',
    ...[...byStatus]
      .sort(([a], [b]) => a - b)
      .map(([status, list]) => `| ${status} | ${list.map((code) => `\`${code}\``).join(', ')} |`),
  ].join('\n');
}

/**
 * docs/api.md with its generated regions written from the document: the error table, and
 * in each section the operations whose `see` names it first.
 */
function apiMarkdown(text: string, document: ReturnType<typeof openApiDocument>): string {
  return text
    .replace(
      /<!-- errors -->[\s\S]*?<!-- \/errors -->/,
      `<!-- errors -->\n${errorTable(document)}\n<!-- /errors -->`,
    )
    .replace(/<!-- operations:(\d+) -->[\s\S]*?<!-- \/operations:\1 -->/g, (_, section) => {
      const lines = OPERATIONS.filter(
        (operation) => operation.undocumented !== true && sectionOf(operation.see) === section,
      ).flatMap((operation) => operationMarkdown(operation, document));
      return `<!-- operations:${section} -->\n\n${lines.join('\n')}<!-- /operations:${section} -->`;
    });
}
const BASE = 'https://keyway.example.test';

describe('the OpenAPI document (docs/api.md §10)', () => {
  const document = openApiDocument();

  it('is a valid OpenAPI 3.1 document', async () => {
    const result = await new Validator().validate(structuredClone(document));
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('is committed as docs/openapi.json and docs/api.md, current (KEYWAY_UPDATE_OPENAPI=1 rewrites them)', () => {
    const text = `${JSON.stringify(document, null, 2)}\n`;
    const markdown = apiMarkdown(readFileSync(reference, 'utf8'), document);
    if (process.env.KEYWAY_UPDATE_OPENAPI === '1') {
      writeFileSync(committed, text);
      writeFileSync(reference, markdown);
    }
    expect(readFileSync(committed, 'utf8')).toBe(text);
    expect(readFileSync(reference, 'utf8')).toBe(markdown);
    // Every documented operation is in the section its `see` names, once.
    const placed = [...markdown.matchAll(/^#### `([A-Z]+) ([^`]+)`$/gm)].map(
      ([, method, path]) => `${method} ${path}`,
    );
    const documented = OPERATIONS.filter((operation) => operation.undocumented !== true).map(
      (operation) => `${operation.method} ${operation.path}`,
    );
    expect(placed.sort()).toEqual(documented.sort());
  });
});

/** Finds the documented operation of a request: its method and its path template. */
function operationOf(method: string, path: string) {
  const pathname = path.split('?')[0] as string;
  return OPERATIONS.find((operation) => {
    if (operation.method !== method.toUpperCase()) return false;
    const pattern = operation.path
      .replace(/[.]/g, '\\.')
      .replace(/\{name\}/, '[^/]+')
      .replace(/\{[a-z_]+\}/, '.+');
    return new RegExp(`^${pattern}$`).test(pathname);
  });
}

describe('real answers of every route against the document', () => {
  const document = openApiDocument() as {
    paths: Record<
      string,
      Record<
        string,
        { responses: Record<string, { content?: Record<string, { schema: object }> }> }
      >
    >;
    components: { schemas: Record<string, object> };
  };
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats.default(ajv);
  ajv.addSchema({ $id: 'keyway', components: document.components });

  /** Validates one reply; answers what was checked, for the coverage assertion. */
  function check(method: string, path: string, reply: Reply): string {
    const operation = operationOf(method, path);
    expect(operation, `${method} ${path} is documented`).toBeDefined();
    const documented = document.paths[operation?.path as string]?.[method.toLowerCase()];
    const answer = documented?.responses[String(reply.status)];
    expect(
      answer,
      `${method} ${path} documents status ${reply.status} (${reply.text.slice(0, 120)})`,
    ).toBeDefined();
    const json = answer?.content?.['application/json'];
    if (json !== undefined) {
      const schema = JSON.parse(
        JSON.stringify(json.schema).replaceAll('"#/components/', '"keyway#/components/'),
      );
      const valid = ajv.validate(schema, reply.body);
      expect(ajv.errors ?? [], `${method} ${path} ${reply.status}`).toEqual([]);
      expect(valid).toBe(true);
    } else if (answer?.content?.['*/*'] === undefined) {
      // An answer of another media type than JSON; `*/*` (the API proxy's) may be any.
      expect(reply.headers.get('content-type') ?? '', `${method} ${path}`).not.toContain('json');
    }
    return `${operation?.id} ${reply.status < 400 ? 'ok' : 'error'}`;
  }

  it('validates a success and an error of every operation', async () => {
    let h!: Harness;
    const world = createTestWorld({ now: () => h?.now ?? START });
    // The world's MCP server answers POST only; its stream and its session end are added
    // here, so the gateway's GET and DELETE have an answer to pass on.
    const fetch = async (input: string | URL | Request, init?: RequestInit) => {
      const request = new Request(input, init);
      if (request.url === world.resourceUrl && request.method === 'GET') {
        return new Response('data: {}\n\n', { headers: { 'content-type': 'text/event-stream' } });
      }
      if (request.url === world.resourceUrl && request.method === 'DELETE') {
        return new Response(null, { status: 200 });
      }
      // A classic API behind the proxy: it answers every method.
      if (request.url.startsWith('https://api.example.test/v1/')) {
        return Response.json({ method: request.method });
      }
      return world.fetch(request);
    };
    h = new Harness(memoryStorage(), {
      fetch,
      baseUrl: BASE,
      providerManagement: true,
      allowedRedirects: ['https://app.example.test'],
      signIn: { methods: ['token'] },
    });
    const seen = new Set<string>();
    const call = async (
      method: string,
      path: string,
      options: Parameters<Harness['call']>[2] = {},
    ): Promise<Reply> => {
      const reply = await h.call(method, path, options);
      seen.add(check(method, path, reply));
      return reply;
    };
    const noToken = { token: 'kw1_not-a-token' };

    // Tokens.
    await call('GET', '/api/admin/tokens');
    await call('GET', '/api/admin/tokens?limit=0');
    await call('POST', '/api/admin/tokens', { body: { name: 'ci', scopes: ['acme'] } });
    await call('POST', '/api/admin/tokens', { body: { name: 'ci', scopes: ['acme'] } });
    await call('GET', '/api/admin/tokens/ci');
    await call('GET', '/api/admin/tokens/nobody');
    await call('PATCH', '/api/admin/tokens/ci', { body: { scopes: ['acme/web'] } });
    await call('PATCH', '/api/admin/tokens/ci', { body: { scopes: ['other'] } });
    await call('DELETE', '/api/admin/tokens/ci');
    await call('DELETE', '/api/admin/tokens/ci');

    // Providers and discovery.
    const provider = { template: 'mcp', configuration: { resource_url: world.resourceUrl } };
    await call('PUT', '/api/admin/providers/linear', { body: provider });
    await call('PUT', '/api/admin/providers/linear', { body: provider });
    await call('PUT', '/api/admin/providers/bad', { body: { template: 'nope' } });
    await call('GET', '/api/admin/providers/linear');
    await call('GET', '/api/admin/providers/missing');
    await call('GET', '/api/admin/providers');
    await call('GET', '/api/admin/providers?limit=x');
    await call('GET', '/api/admin/profiles');
    await call('GET', '/api/admin/profiles', noToken);
    await call('PUT', '/api/admin/providers/github', {
      body: {
        template: 'oauth2',
        profile: 'github',
        configuration: { scopes: ['repo'] },
        credentials: { client_id: 'Iv1.example', client_secret: 'example-secret' },
      },
    });
    await call('POST', '/api/admin/providers/linear/register');
    await call('POST', '/api/admin/providers/missing/register');
    await call('POST', '/api/admin/discover', { body: { resource_url: world.resourceUrl } });
    await call('POST', '/api/admin/discover', { body: {} });
    await call('GET', '/api/oauth/client-metadata.json', { token: null });

    // Connections.
    await call('POST', '/api/oauth/authorize/linear', {
      body: { connection_id: 'acme/alice/linear' },
    });
    await call('POST', '/api/oauth/authorize/missing', { body: { connection_id: 'acme/x' } });
    const started = await h.call('POST', '/api/oauth/authorize/linear', {
      body: { connection_id: 'acme/alice/linear' },
    });
    const back = new URL(world.consent(started.body.authorization_url));
    await call('GET', `${back.pathname}${back.search}`, { token: null });
    await call('GET', `${back.pathname}${back.search}`, { token: null });
    // The shared callback, which a custom client's operator registered.
    world.preregister({
      client_id: 'operator-client',
      token_endpoint_auth_method: 'none',
      redirect_uris: [`${BASE}/api/oauth/callback`],
    });
    await h.call('PUT', '/api/admin/providers/custom', {
      body: { ...provider, credentials: { mode: 'custom', client_id: 'operator-client' } },
    });
    const viaShared = await h.call('POST', '/api/oauth/authorize/custom', {
      body: { connection_id: 'acme/carol/custom' },
    });
    const sharedBack = new URL(world.consent(viaShared.body.authorization_url));
    expect(sharedBack.pathname).toBe('/api/oauth/callback');
    await call('GET', `${sharedBack.pathname}${sharedBack.search}`, { token: null });
    await call('GET', `${sharedBack.pathname}${sharedBack.search}`, { token: null });
    const verifying = await h.call('POST', '/api/oauth/authorize/linear', {
      body: {
        connection_id: 'acme/bob/linear',
        redirect_to: 'https://app.example.test/done',
        verify_user: true,
      },
    });
    const held = new URL(world.consent(verifying.body.authorization_url));
    const redirected = await call('GET', `${held.pathname}${held.search}`, { token: null });
    const flowId = new URL(redirected.headers.get('location') as string).searchParams.get(
      'flow_id',
    );
    await call('POST', '/api/oauth/verify', { body: { flow_id: flowId } });
    await call('POST', '/api/oauth/verify', { body: { flow_id: flowId } });
    await call('GET', '/api/oauth/connections');
    await call('GET', '/api/oauth/connections?status=done');
    await call('GET', '/api/oauth/connections/acme/alice/linear');
    await call('GET', '/api/oauth/connections/acme/nobody');
    await call('GET', '/api/oauth/credentials/acme/alice/linear?force_refresh=true');
    await call('GET', '/api/oauth/credentials/acme/nobody');
    await call('POST', '/api/oauth/probe/acme/alice/linear');
    await call('POST', '/api/oauth/probe/acme/nobody');
    // The gateway: the MCP server's answers passed on, and the gateway's own errors.
    const rpc = { jsonrpc: '2.0', id: 1, method: 'tools/list' };
    const accept = { accept: 'application/json, text/event-stream' };
    const listed = await call('POST', '/mcp/acme/alice/linear', { body: rpc, headers: accept });
    expect(listed.status).toBe(200);
    await call('POST', '/mcp/acme/nobody', { body: rpc, headers: accept });
    expect((await call('GET', '/mcp/acme/alice/linear', { headers: accept })).status).toBe(200);
    await call('GET', '/mcp/acme/nobody');
    expect((await call('DELETE', '/mcp/acme/alice/linear')).status).toBe(200);
    await call('DELETE', '/mcp/acme/nobody');

    // What the portal reads of a connection.
    const patched = await call('PATCH', '/api/oauth/connections/acme/alice/linear', {
      body: { alias: 'lin', tools: { deny: ['admin'], read_only: true } },
    });
    expect(patched.status).toBe(200);
    await call('PATCH', '/api/oauth/connections/acme/nobody', { body: { alias: 'x' } });
    // The portal: its MCP server's session (opened, its stream, ended) and its refusals.
    const initialize = initializeMessage('openapi-test');
    const opened = await call('POST', '/portal/acme/alice', { body: initialize, headers: accept });
    expect(opened.status).toBe(200);
    const session = {
      ...accept,
      'mcp-session-id': opened.headers.get('mcp-session-id') ?? '',
      'mcp-protocol-version': '2025-11-25',
    };
    expect((await call('POST', '/portal/acme/alice', { body: rpc, headers: accept })).status).toBe(
      400,
    );
    // The session's stream stays open until the session ends.
    const stream = call('GET', '/portal/acme/alice', { headers: session });
    expect((await call('DELETE', '/portal/acme/alice', { headers: session })).status).toBe(200);
    expect((await stream).status).toBe(200);
    expect((await call('GET', '/portal/acme/alice', { headers: session })).status).toBe(404);
    expect((await call('DELETE', '/portal/acme/alice', { headers: session })).status).toBe(404);

    // The API proxy: a classic API's answers passed on, and the proxy's own errors.
    world.preregister({
      client_id: 'classic-app',
      client_secret: 'classic-secret',
      redirect_uris: [`${BASE}/api/oauth/callback`],
    });
    await h.call('PUT', '/api/admin/providers/classic', {
      body: {
        template: 'oauth2',
        configuration: {
          authorization_endpoint: 'https://auth.example.test/oauth/authorize',
          token_endpoint: 'https://auth.example.test/oauth/token',
          issuer: 'https://auth.example.test',
          api_base_url: 'https://api.example.test/v1',
        },
        credentials: { client_id: 'classic-app', client_secret: 'classic-secret' },
      },
    });
    const classic = await h.call('POST', '/api/oauth/authorize/classic', {
      body: { connection_id: 'acme/alice/classic' },
    });
    const classicBack = new URL(world.consent(classic.body.authorization_url));
    await h.call('GET', `${classicBack.pathname}${classicBack.search}`, { token: null });
    for (const method of ['GET', 'POST', 'PUT', 'PATCH', 'DELETE']) {
      const body = method === 'GET' ? {} : { body: { method } };
      const proxied = await call(method, '/proxy/acme/alice/classic/items', body);
      expect(proxied.status, `${proxied.text} ${String(h.errors.at(-1))}`).toBe(200);
      await call(method, '/proxy/acme/nobody/items', body);
    }
    await call('DELETE', '/api/oauth/connections/acme/alice/linear');
    await call('DELETE', '/api/oauth/connections/acme/alice/linear');
    await call('DELETE', '/api/admin/providers/linear');
    await call('DELETE', '/api/oauth/connections/acme/bob/linear');
    await call('DELETE', '/api/admin/providers/linear');
    await call('DELETE', '/api/admin/providers/linear');

    // Secrets.
    await call('PUT', '/api/vault/secrets/acme/key', { body: { value: 's3' } });
    await call('PUT', '/api/vault/secrets/acme/key', { body: { value: 42 } });
    await call('GET', '/api/vault/secrets/acme/key');
    await call('GET', '/api/vault/secrets/acme/none');
    await call('GET', '/api/vault/secrets');
    await call('GET', '/api/vault/secrets?cursor=%%%');
    await call('DELETE', '/api/vault/secrets/acme/key');
    await call('DELETE', '/api/vault/secrets/acme/key');

    // Events.
    const audit = await call('GET', '/api/admin/audit?type=secret.deleted');
    expect(audit.body.items.map((event: { type: string }) => event.type)).toEqual([
      'secret.deleted',
    ]);
    await call('GET', '/api/admin/audit?since=yesterday');
    await call('GET', '/api/admin/webhooks/deliveries?status=failed');
    await call('GET', '/api/admin/webhooks/deliveries?status=lost');

    // Sign-in for MCP clients: registration, the pages and their forms, tokens, grants.
    const form = (fields: Record<string, string>, cookie?: string) => ({
      token: null,
      raw: new URLSearchParams(fields).toString(),
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        ...(cookie === undefined ? {} : { cookie }),
      },
    });
    const client = await call('POST', '/oauth/register', {
      token: null,
      body: { client_name: 'Document', redirect_uris: ['http://127.0.0.1/callback'] },
    });
    await call('POST', '/oauth/register', {
      token: null,
      body: { redirect_uris: ['javascript:alert(1)'] },
    });
    const verifier = 'openapi-verifier-of-forty-three-characters-at-least';
    const authorization = new URLSearchParams({
      response_type: 'code',
      client_id: client.body.client_id,
      redirect_uri: 'http://127.0.0.1/callback',
      code_challenge: createHash('sha256').update(verifier).digest('base64url'),
      code_challenge_method: 'S256',
      resource: `${BASE}/mcp/acme/alice/linear`,
    });
    const signInPage = await call('GET', `/oauth/authorize?${authorization}`, { token: null });
    await call('GET', '/oauth/authorize?client_id=nobody', { token: null });
    const cookie = (signInPage.headers.get('set-cookie') ?? '').split(';')[0] as string;
    const handleOf = (reply: Reply) =>
      reply.text.match(/name="request" value="([^"]+)"/)?.[1] ?? '';
    const signer = await h.mint('signer', ['acme/alice'], { expires_in: 86_400 });
    const consentPage = await call(
      'POST',
      '/oauth/authorize',
      form({ request: handleOf(signInPage), action: 'token', token: signer }, cookie),
    );
    await call('POST', '/oauth/authorize', form({ request: 'kwq_spent', action: 'token' }));
    const approved = await call(
      'POST',
      '/oauth/authorize',
      form({ request: handleOf(consentPage), action: 'consent', decision: 'approve' }, cookie),
    );
    await call('GET', '/oauth/sign-in/callback?state=unknown', { token: null });
    const code = new URL(approved.headers.get('location') as string).searchParams.get('code');
    const granted = await call(
      'POST',
      '/oauth/token',
      form({
        grant_type: 'authorization_code',
        code: code as string,
        redirect_uri: 'http://127.0.0.1/callback',
        client_id: client.body.client_id,
        code_verifier: verifier,
      }),
    );
    await call(
      'POST',
      '/oauth/token',
      form({ grant_type: 'refresh_token', refresh_token: 'kwr_x', client_id: 'x' }),
    );
    const grants = await call('GET', '/api/admin/grants');
    await call('GET', '/api/admin/grants?limit=0');
    await call('DELETE', `/api/admin/grants/${grants.body.items[0].id}`);
    await call('DELETE', '/api/admin/grants/nothing');
    await call('POST', '/oauth/revoke', form({ token: granted.body.refresh_token }));
    await call('POST', '/oauth/revoke', form({}));

    // Connect sessions: the app's routes, the page and its three calls with the secret.
    await h.call('PUT', '/api/admin/providers/linear', { body: provider });
    const connectSession = await call('POST', '/api/admin/connect-sessions', {
      body: { namespace: 'acme/bob', providers: ['linear'], allow_disconnect: true },
    });
    expect(connectSession.status).toBe(201);
    await call('POST', '/api/admin/connect-sessions', {
      body: { namespace: 'acme/bob', expires_in: 1 },
    });
    await call('GET', '/api/admin/connect-sessions');
    await call('GET', '/api/admin/connect-sessions?namespace=../x');
    const secret = { token: new URL(connectSession.body.url).hash.slice(1) };
    await call('GET', '/connect', { token: null });
    await call('GET', '/connect/api/session', secret);
    await call('GET', '/connect/api/session', noToken);
    await call('POST', '/connect/api/authorize', { ...secret, body: { provider_id: 'linear' } });
    await call('POST', '/connect/api/authorize', { ...secret, body: { provider_id: 'github' } });
    await call('DELETE', '/connect/api/providers/linear', secret);
    await call('DELETE', '/connect/api/providers/github', secret);
    await call('DELETE', `/api/admin/connect-sessions/${connectSession.body.id}`);
    await call('DELETE', '/api/admin/connect-sessions/nothing');

    // Health: public and detail-free; the status behind a credential.
    expect((await call('GET', '/healthz', { token: null })).body).toEqual({ status: 'ok' });
    expect((await call('GET', '/readyz', { token: null })).body).toEqual({ status: 'ready' });
    await call('GET', '/api/admin/status');
    await call('GET', '/api/admin/status', noToken);

    // The document itself, and what every authenticated route answers without a token.
    await call('GET', '/api/openapi.json', { token: null });
    await call('GET', '/api/admin/tokens', noToken);

    // The upstream sign-in's callback answers a page only after a real OpenID provider's
    // sign-in: packages/cli/test/sign-in.test.ts drives one (oidc-provider).
    const expected = OPERATIONS.flatMap((operation) => [
      ...(operation.id === 'signInUpstreamCallback' ? [] : [`${operation.id} ok`]),
      ...(['openapi', 'clientMetadataDocument', 'healthz', 'readyz', 'connectPage'].includes(
        operation.id,
      )
        ? []
        : [`${operation.id} error`]),
    ]).sort();
    expect([...seen].sort()).toEqual(expected);
  });
});
