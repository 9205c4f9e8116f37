/**
 * The MCP client under test of the official conformance suite
 * (`@modelcontextprotocol/conformance client --command …`). It does no OAuth itself: a
 * running `keyway serve` does every step — the provider from the MCP server URL, the
 * authorization, the consent redirect into Keyway's callback, the token exchange — and the
 * client only makes MCP calls with the token Keyway hands out. On `401`, or `403
 * insufficient_scope`, it asks Keyway to authorize again (step-up), at most three
 * authorizations in all.
 *
 * It speaks both MCP wires: the stateful one (initialize, then requests; revisions up to
 * 2025-11-25) and the stateless one of 2026-07-28 (no initialize; every request carries
 * the `MCP-Protocol-Version` header and `params._meta`).
 *
 * With `KEYWAY_CONFORMANCE_VIA=gateway`, the client never holds a token: every MCP call
 * goes to Keyway's gateway (`{KEYWAY_URL}/mcp/<connection>`) with the Keyway credential,
 * and Keyway adds the server's token. A connection that needs consent answers JSON-RPC
 * `-32042` there, whose URL the client follows; a `403 insufficient_scope` is a step-up
 * through Keyway's API. Either way the client checks that no token the suite's server
 * issued (`test-token…`, or a JWT) is in anything Keyway answered it, and says so on its
 * last lines (`credentials fetched: yes|no`, `upstream tokens received: yes|no`), also
 * appended to the file
 * `KEYWAY_CONFORMANCE_REPORT` names.
 *
 * Input: the MCP server URL as the last argument; `KEYWAY_URL` and `KEYWAY_TOKEN` (a
 * credential covering `conformance/`); the suite's `MCP_CONFORMANCE_SCENARIO`,
 * `MCP_CONFORMANCE_PROTOCOL_VERSION` and `MCP_CONFORMANCE_CONTEXT` (pre-registered client
 * credentials). Exit 0 when every call succeeded, 1 otherwise, with the reason on stderr.
 */

import { appendFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const MAX_AUTHORIZATIONS = 3;
const STATELESS_VERSIONS = new Set(['2026-07-28']);

/** A failure that ends the run. */
class Stop extends Error {}

/** A token of the suite's authorization servers: `test-token…`, or a signed JWT. */
const UPSTREAM_TOKEN = /test-token|cc-token|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\./;

/** Everything Keyway answered this client (headers and bodies), for the token check. */
const received: string[] = [];
/** Whether Keyway handed this client a token (`GET /api/oauth/credentials/…`). */
let handedOut = false;

/** `fetch` to Keyway, keeping a copy of each answer. */
async function fetchKeyway(url: string, init: RequestInit): Promise<Response> {
  const response = await fetch(url, init);
  const headers: string[] = [];
  response.headers.forEach((value, name) => {
    headers.push(`${name}: ${value}`);
  });
  const text = await response.text();
  received.push(headers.join('\n'), text);
  return new Response(text, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}

interface Challenge {
  status: 401 | 403;
  error: string | null;
  scopes: string[];
}

interface RpcAnswer {
  result?: unknown;
  error?: { code: number; message: string };
}

function environment(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Stop(`${name} is not set`);
  return value;
}

/** The parameters of the Bearer challenge in `WWW-Authenticate` (RFC 6750 §3). */
function bearerChallenge(header: string | null): Record<string, string> {
  const parameters: Record<string, string> = {};
  if (header === null) return parameters;
  const start = header.search(/bearer(\s|$)/i);
  if (start < 0) return parameters;
  const pattern = /([A-Za-z0-9_-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))/g;
  pattern.lastIndex = start + 'bearer'.length;
  for (let match = pattern.exec(header); match !== null; match = pattern.exec(header)) {
    const name = (match[1] as string).toLowerCase();
    parameters[name] ??=
      match[2] !== undefined ? match[2].replace(/\\(.)/g, '$1') : (match[3] ?? '');
  }
  return parameters;
}

/** The JSON-RPC answer to request `id` in a JSON body or a `text/event-stream` body. */
function rpcAnswer(contentType: string, body: string, id: number): RpcAnswer | null {
  const messages: unknown[] = [];
  if (contentType.includes('text/event-stream')) {
    for (const event of body.split(/\r?\n\r?\n/)) {
      const data = event
        .split(/\r?\n/)
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).replace(/^ /, ''))
        .join('\n');
      if (data !== '') messages.push(JSON.parse(data));
    }
  } else if (body.trim() !== '') {
    const parsed: unknown = JSON.parse(body);
    messages.push(...(Array.isArray(parsed) ? parsed : [parsed]));
  }
  for (const message of messages) {
    if (typeof message === 'object' && message !== null && (message as { id?: unknown }).id === id)
      return message as RpcAnswer;
  }
  return null;
}

/** Keyway's HTTP API, as this client uses it. */
class Keyway {
  readonly #base: string;
  readonly #token: string;

  constructor(base: string, token: string) {
    this.#base = base.replace(/\/$/, '');
    this.#token = token;
  }

  async call(method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
    const response = await fetchKeyway(`${this.#base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${this.#token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    const answer = text === '' ? {} : (JSON.parse(text) as Record<string, unknown>);
    if (!response.ok) {
      const details = answer.details === undefined ? '' : ` ${JSON.stringify(answer.details)}`;
      throw new Stop(
        `keyway ${method} ${path}: ${response.status} ${String(answer.error)}: ${String(answer.error_description)}${details}`,
      );
    }
    return answer;
  }
}

/** One run against one scenario's MCP server. */
class ConformanceClient {
  readonly #keyway: Keyway;
  readonly #keywayUrl: string;
  readonly #keywayToken: string;
  /** Through Keyway's gateway, never holding a token. */
  readonly #viaGateway: boolean;
  readonly #server: string;
  readonly #version: string;
  readonly #stateless: boolean;
  readonly #providerId: string;
  readonly #connectionId: string;
  readonly #credentials: Record<string, unknown> | null;
  /** The user's ID token from the enterprise identity provider (SEP-990), when there is one. */
  readonly #subjectToken: string | undefined;
  readonly #scenario: string;
  #providerReady = false;
  #authorizations = 0;
  #token: string | null = null;
  #session: string | null = null;
  #negotiated: string | null = null;
  #nextId = 1;
  readonly log: string[] = [];

  constructor(options: {
    keywayUrl: string;
    keywayToken: string;
    serverUrl: string;
    protocolVersion: string;
    context: Record<string, unknown> | null;
    runId: string;
    viaGateway: boolean;
    scenario: string;
  }) {
    this.#keyway = new Keyway(options.keywayUrl, options.keywayToken);
    this.#keywayUrl = options.keywayUrl.replace(/\/$/, '');
    this.#keywayToken = options.keywayToken;
    this.#viaGateway = options.viaGateway;
    this.#server = options.serverUrl;
    this.#version = options.protocolVersion;
    this.#stateless = STATELESS_VERSIONS.has(options.protocolVersion);
    this.#providerId = `conformance/${options.runId}`;
    this.#connectionId = `conformance/${options.runId}/connection`;
    this.#credentials = credentialsOf(options.scenario, options.context, options.runId);
    this.#scenario = options.scenario;
    const idpToken = options.context?.idp_id_token;
    this.#subjectToken = typeof idpToken === 'string' ? idpToken : undefined;
  }

  /** The whole run: the MCP calls a client makes, authorizing through Keyway when asked. */
  async run(): Promise<void> {
    if (!this.#stateless) {
      const init = (await this.#request('initialize', {
        protocolVersion: this.#version,
        capabilities: {},
        clientInfo: { name: 'keyway-conformance-client', version: '1.0.0' },
      })) as { protocolVersion?: unknown };
      this.#negotiated =
        typeof init.protocolVersion === 'string' ? init.protocolVersion : this.#version;
      await this.#notify('notifications/initialized');
    }
    const listed = (await this.#request('tools/list', {})) as { tools?: { name: string }[] };
    const tool = listed.tools?.[0]?.name;
    if (tool !== undefined) await this.#request('tools/call', { name: tool, arguments: {} });
    if (this.#session !== null) {
      await this.#send({ method: 'DELETE', headers: this.#headers() }).catch(() => {});
    }
  }

  /** Where MCP requests go: the server, or Keyway's gateway for the connection. */
  #send(init: RequestInit): Promise<Response> {
    return this.#viaGateway
      ? fetchKeyway(`${this.#keywayUrl}/mcp/${this.#connectionId}`, init)
      : fetch(this.#server, init);
  }

  #headers(): Record<string, string> {
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    };
    if (this.#viaGateway) headers.authorization = `Bearer ${this.#keywayToken}`;
    else if (this.#token !== null) headers.authorization = `Bearer ${this.#token}`;
    if (this.#session !== null) headers['mcp-session-id'] = this.#session;
    const version = this.#stateless ? this.#version : this.#negotiated;
    if (version !== null) headers['mcp-protocol-version'] = version;
    return headers;
  }

  #params(params: Record<string, unknown>): Record<string, unknown> {
    if (!this.#stateless) return params;
    return {
      ...params,
      _meta: {
        'io.modelcontextprotocol/protocolVersion': this.#version,
        'io.modelcontextprotocol/clientCapabilities': {},
        'io.modelcontextprotocol/clientInfo': {
          name: 'keyway-conformance-client',
          version: '1.0.0',
        },
      },
    };
  }

  /** A notification of the stateful wire (the stateless one has none here). */
  async #notify(method: string): Promise<void> {
    const response = await this.#post({ jsonrpc: '2.0', method });
    await response.body?.cancel();
  }

  #post(message: Record<string, unknown>): Promise<Response> {
    return this.#send({
      method: 'POST',
      headers: this.#headers(),
      body: JSON.stringify(message),
    });
  }

  /** One request; on an authorization challenge, authorize through Keyway and retry. */
  async #request(method: string, params: Record<string, unknown>): Promise<unknown> {
    for (;;) {
      const id = this.#nextId++;
      const response = await this.#post({
        jsonrpc: '2.0',
        id,
        method,
        params: this.#params(params),
      });
      this.log.push(`${method} → ${response.status}`);
      if (this.#viaGateway && response.status === 404) {
        // No connection yet: the first authorization, as a 401 would start it.
        await response.body?.cancel();
        await this.#authorize({ status: 401, error: null, scopes: [] });
        continue;
      }
      if (this.#viaGateway && response.status === 401) {
        throw new Stop(`the gateway refused the Keyway credential: ${await response.text()}`);
      }
      if (response.status === 401 || response.status === 403) {
        const challenge = bearerChallenge(response.headers.get('www-authenticate'));
        await response.body?.cancel();
        await this.#authorize({
          status: response.status,
          error: challenge.error ?? null,
          scopes: (challenge.scope ?? '').split(' ').filter((scope) => scope !== ''),
        });
        continue;
      }
      const session = response.headers.get('mcp-session-id');
      if (session !== null) this.#session = session;
      const text = await response.text();
      if (!response.ok) throw new Stop(`${method}: HTTP ${response.status} ${text.slice(0, 300)}`);
      const answer = rpcAnswer(response.headers.get('content-type') ?? '', text, id);
      if (answer === null) throw new Stop(`${method}: no answer to request ${id}`);
      if (this.#viaGateway && answer.error?.code === -32042) {
        // The connection needs consent: follow the URL the gateway elicited, then retry.
        const data = (answer.error as { data?: { elicitations?: { url?: string }[] } }).data;
        const url = data?.elicitations?.[0]?.url;
        if (url === undefined) throw new Stop(`${method}: -32042 without an elicitation URL`);
        this.#count(401);
        await this.#consent(url);
        continue;
      }
      if (answer.error !== undefined)
        throw new Stop(`${method}: JSON-RPC error ${answer.error.code} ${answer.error.message}`);
      return answer.result;
    }
  }

  /**
   * Asks Keyway for a (new) authorization and the token it yields. The scopes: those of
   * the challenge, together with the ones already granted after a `403 insufficient_scope`
   * (MCP step-up asks for the union); without a challenged scope, Keyway chooses.
   */
  async #authorize(challenge: Challenge): Promise<void> {
    if (challenge.status === 403 && challenge.error !== 'insufficient_scope') {
      throw new Stop(`the server answered 403 ${challenge.error ?? ''}`.trim());
    }
    this.#count(challenge.status);
    if (!this.#providerReady) {
      await this.#keyway.call('PUT', `/api/admin/providers/${this.#providerId}`, {
        template: 'mcp',
        // DPoP (SEP-1932): an inject-only provider's tokens are bound to Keyway's key.
        ...(this.#scenario.startsWith('auth/dpop') ? { hand_out: false } : {}),
        configuration: { resource_url: this.#server },
        ...(this.#credentials === null ? {} : { credentials: this.#credentials }),
      });
      this.#providerReady = true;
    }
    let scopes = challenge.scopes;
    if (challenge.status === 403 && (this.#token !== null || this.#viaGateway)) {
      const view = await this.#keyway.call('GET', `/api/oauth/connections/${this.#connectionId}`);
      const granted = Array.isArray(view.scopes) ? (view.scopes as string[]) : [];
      scopes = [...new Set([...granted, ...scopes])];
    }
    const started = await this.#keyway.call('POST', `/api/oauth/authorize/${this.#providerId}`, {
      connection_id: this.#connectionId,
      ...(scopes.length > 0 ? { scopes } : {}),
      ...(this.#subjectToken === undefined ? {} : { subject_token: this.#subjectToken }),
    });
    // The client credentials grant has no consent: the connection is active already.
    if (started.authorization_url === undefined) {
      if (started.status !== 'active')
        throw new Stop(`the client credentials grant failed: ${JSON.stringify(started)}`);
    } else await this.#consent(String(started.authorization_url));
    if (this.#viaGateway) return;
    const credentials = await this.#keyway.call(
      'GET',
      `/api/oauth/credentials/${this.#connectionId}`,
    );
    this.#token = String(credentials.access_token);
    handedOut = true;
  }

  /** One more authorization, or the end of the run after {@link MAX_AUTHORIZATIONS}. */
  #count(status: number): void {
    if (this.#authorizations >= MAX_AUTHORIZATIONS) {
      throw new Stop(`still ${status} after ${MAX_AUTHORIZATIONS} authorizations: giving up`);
    }
    this.#authorizations++;
  }

  /**
   * The consent step: the suite's authorization server redirects at once; the browser then
   * follows the redirect into Keyway's callback, and the connection must be active.
   */
  async #consent(authorizationUrl: string): Promise<void> {
    const consent = await fetch(authorizationUrl, { redirect: 'manual' });
    await consent.body?.cancel();
    const callback = consent.headers.get('location');
    if (callback === null)
      throw new Stop(`the consent step answered ${consent.status}, no redirect`);
    const landed = await fetchKeyway(callback, { redirect: 'manual' });
    await landed.body?.cancel();
    const view = await this.#keyway.call('GET', `/api/oauth/connections/${this.#connectionId}`);
    const error = view.error as { code?: string; description?: string } | null;
    if (view.status !== 'active' || (error !== null && error !== undefined)) {
      throw new Stop(
        `the authorization did not complete: ${String(view.status)} ${error?.code ?? ''} ${error?.description ?? ''}`.trim(),
      );
    }
  }
}

/**
 * The provider's credentials from the scenario's context, as its operator would give them:
 * a pre-registered client (mode `custom`), or — in the client credentials scenarios
 * (SEP-1046) — a client that gets its own tokens, with its secret or private key.
 */
/** SEP-990 in its two forms: 0.2's scenario and 0.1.16's earlier one. */
const ENTERPRISE_SCENARIOS = new Set([
  'auth/enterprise-managed-authorization',
  'auth/cross-app-access-complete-flow',
]);

function credentialsOf(
  scenario: string,
  context: Record<string, unknown> | null,
  runId: string,
): Record<string, unknown> | null {
  const text = (name: string) =>
    typeof context?.[name] === 'string' ? (context[name] as string) : undefined;
  const clientId = text('client_id');
  if (clientId === undefined) return null;
  const secret = text('client_secret');
  const key = text('private_key_pem');
  const workload = text('valid_jwt');
  const idpToken = text('idp_id_token');
  if (ENTERPRISE_SCENARIOS.has(scenario) && idpToken !== undefined) {
    // SEP-990: Keyway's client at the MCP server's authorization server, and at the
    // enterprise identity provider that exchanges the user's ID token.
    return {
      mode: 'enterprise',
      client_id: clientId,
      ...(secret === undefined ? {} : { client_secret: secret }),
      identity_provider: {
        issuer: text('idp_issuer') ?? '',
        token_endpoint: text('idp_token_endpoint') ?? '',
        client_id: text('idp_client_id') ?? '',
      },
    };
  }
  if (scenario.startsWith('auth/wif') && workload !== undefined) {
    // The workload's JWT, where the broker's `conformance` source reads it (a projected
    // token file, in a real deployment): the client never sends it to Keyway.
    const file = `${runId}.jwt`;
    writeFileSync(join(environment('KEYWAY_CONFORMANCE_ASSERTIONS'), file), workload);
    return {
      mode: 'jwt_bearer',
      client_id: clientId,
      assertion_source: 'conformance',
      assertion_file: file,
    };
  }
  if (!scenario.startsWith('auth/client-credentials'))
    return {
      mode: 'custom',
      client_id: clientId,
      ...(secret === undefined ? {} : { client_secret: secret }),
    };
  return {
    mode: 'client_credentials',
    client_id: clientId,
    ...(secret === undefined ? {} : { client_secret: secret }),
    ...(key === undefined
      ? {}
      : { private_key: key, signing_algorithm: text('signing_algorithm') ?? 'ES256' }),
  };
}

async function main(): Promise<void> {
  const serverUrl = process.argv[process.argv.length - 1];
  if (serverUrl === undefined || !/^https?:\/\//.test(serverUrl))
    throw new Stop('usage: client <mcp server url>');
  const context = process.env.MCP_CONFORMANCE_CONTEXT;
  const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? 'unknown';
  const client = new ConformanceClient({
    keywayUrl: environment('KEYWAY_URL'),
    keywayToken: environment('KEYWAY_TOKEN'),
    serverUrl,
    protocolVersion: process.env.MCP_CONFORMANCE_PROTOCOL_VERSION || '2025-11-25',
    context: context === undefined ? null : (JSON.parse(context) as Record<string, unknown>),
    viaGateway: process.env.KEYWAY_CONFORMANCE_VIA === 'gateway',
    scenario,
    runId: `${scenario.replace(/[^a-z0-9-]+/gi, '-')}-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`,
  });
  try {
    await client.run();
    console.log(client.log.join('\n'));
  } finally {
    console.error(client.log.join('\n'));
    const seen = received.some((text) => UPSTREAM_TOKEN.test(text));
    const verdict = `credentials fetched: ${handedOut ? 'yes' : 'no'}\nupstream tokens received: ${seen ? 'yes' : 'no'}`;
    console.error(verdict);
    const report = process.env.KEYWAY_CONFORMANCE_REPORT;
    if (report) appendFileSync(report, `${verdict}\n`);
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Stop ? error.message : error);
  process.exit(1);
});
