import { createHash } from 'node:crypto';
import { once } from 'node:events';
import {
  type Agent,
  createServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type RequestListener,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  type Broker,
  type BrokerConfig,
  type ConnectionTokens,
  createBroker,
  type Storage,
} from '@keyway/core';
import { createNodeFetch } from '@keyway/core/outbound';
import { afterEach, expect, vi } from 'vitest';
import { createHandler, type KeywayHandler } from '../src/index.js';

export { type StorageFactory, storageFactories } from '@keyway/test-storages';

export const ROOT_KEY = 'test-root-key-0123456789-abcdefghijklmnop';
/** A fixed vault key for the tests (base64url of 32 bytes). */
export const VAULT_KEY = 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8';
export const START = Date.UTC(2026, 10, 21, 9, 30, 0, 0);

/** An MCP `initialize` request of the 2025-11-25 wire, from a client of that name. */
export function initializeMessage(client: string, id = 1) {
  return {
    jsonrpc: '2.0',
    id,
    method: 'initialize',
    params: {
      protocolVersion: '2025-11-25',
      capabilities: {},
      clientInfo: { name: client, version: '1' },
    },
  };
}

/**
 * An authorization server's own redirect URI at a deployment (docs/api.md §5 "Mix-up defense"):
 * `{base}/api/oauth/callback/` and 22 base64url characters of SHA-256 over the issuer.
 */
export function serverCallback(base: string, issuer: string): string {
  const key = createHash('sha256').update(`keyway-callback ${issuer}`).digest('base64url');
  return `${base}/api/oauth/callback/${key.slice(0, 22)}`;
}

export interface Reply {
  status: number;
  headers: Headers;
  /** Parsed JSON body, or `null` for an empty body. */
  body: any;
  text: string;
}

export interface CallOptions {
  token?: string | null;
  body?: unknown;
  /** A raw body string, sent as is. */
  raw?: string | Uint8Array;
  headers?: Record<string, string>;
  /** The client address, handed to the handler as a runtime would. */
  clientAddress?: string;
}

/** A broker on a controllable clock, its handler, and a small client for it. */
export class Harness {
  now = START;
  readonly errors: unknown[] = [];
  /** Every request's record (docs/api.md §16), as the JSON a request log would write. */
  readonly requestLog: string[] = [];
  broker!: Broker;
  handler!: KeywayHandler;

  constructor(
    readonly storage: Storage,
    readonly extra: Partial<BrokerConfig> = {},
  ) {
    this.rebuild(ROOT_KEY);
  }

  /** A new broker over the same storage, e.g. with another root key. */
  rebuild(rootKey: string, vaultKeys: string[] = [VAULT_KEY]): void {
    this.broker = createBroker({
      rootKey,
      storage: this.storage,
      now: () => this.now,
      vaultKeys,
      purgeIntervalMs: false,
      ...this.extra,
    });
    this.handler = createHandler(this.broker, {
      onInternalError: (error) => this.errors.push(error),
      onRequest: (record) => this.requestLog.push(JSON.stringify(record)),
    });
  }

  async call(method: string, path: string, options: CallOptions = {}): Promise<Reply> {
    const headers: Record<string, string> = { ...options.headers };
    const token = options.token === undefined ? ROOT_KEY : options.token;
    if (token !== null) headers.authorization = `Bearer ${token}`;
    let body: BodyInit | undefined;
    if (options.raw !== undefined) body = options.raw as BodyInit;
    else if (options.body !== undefined) body = JSON.stringify(options.body);
    if (body !== undefined && headers['content-type'] === undefined) {
      headers['content-type'] = 'application/json';
    }
    const response = await this.handler(
      new Request(`http://keyway.test${path}`, { method, headers, body }),
      options.clientAddress === undefined ? undefined : { clientAddress: options.clientAddress },
    );
    const text = await response.text();
    return {
      status: response.status,
      headers: response.headers,
      body:
        text === '' || !response.headers.get('content-type')?.includes('json')
          ? null
          : JSON.parse(text),
      text,
    };
  }

  /**
   * A connection's tokens as the vault holds them, read as an operator with database access
   * and the vault keys could.
   */
  async storedTokens(connectionId: string): Promise<ConnectionTokens> {
    const entry = await this.storage.getVaultEntry('connection_tokens', connectionId);
    if (entry === null) throw new Error(`no tokens for ${connectionId}`);
    return JSON.parse(await this.broker.vault.open(entry)) as ConnectionTokens;
  }

  /** Mints a token as `by` (default root) and returns its access token. */
  async mint(
    name: string,
    scopes: string[],
    options: { by?: string; expires_in?: number } = {},
  ): Promise<string> {
    const reply = await this.call('POST', '/api/admin/tokens', {
      token: options.by ?? ROOT_KEY,
      body: {
        name,
        scopes,
        ...(options.expires_in === undefined ? {} : { expires_in: options.expires_in }),
      },
    });
    if (reply.status !== 201) throw new Error(`mint ${name}: ${reply.status} ${reply.text}`);
    return reply.body.access_token as string;
  }
}

/** One request over Node `http`, with a raw target that fetch() would normalize first. */
export function sendRaw(options: {
  port: number;
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  agent?: Agent;
}): Promise<{ status: number; headers: IncomingHttpHeaders; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port: options.port,
        method: options.method,
        path: options.path,
        headers: options.headers ?? {},
        ...(options.agent === undefined ? {} : { agent: options.agent }),
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => {
          text += chunk;
        });
        res.on('end', () =>
          resolve({ status: res.statusCode as number, headers: res.headers, text }),
        );
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

/** A real HTTP server on a free loopback port, for tests that need sockets. */
export async function listenOnLoopback(
  listener: RequestListener,
): Promise<{ port: number; close(): Promise<void> }> {
  const server = createServer(listener);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

/** The parts of a test world the helpers below use. */
interface WorldLike {
  resourceUrl: string;
  consent(authorizationUrl: string, decision?: 'approve' | 'deny'): string;
}

/** Creates provider `linear` for the world's MCP server (mode register). */
export async function putProvider(
  h: Harness,
  world: WorldLike,
  id = 'linear',
  credentials?: { mode: 'custom'; client_id: string; client_secret?: string },
): Promise<Reply> {
  return h.call('PUT', `/api/admin/providers/${id}`, {
    body: {
      template: 'mcp',
      configuration: { resource_url: world.resourceUrl },
      ...(credentials === undefined ? {} : { credentials }),
    },
  });
}

/** Authorizes a connection, plays the user at the consent page, and follows the callback. */
export async function connectThroughConsent(
  h: Harness,
  world: WorldLike,
  connectionId: string,
  providerId = 'linear',
): Promise<Reply> {
  const started = await h.call('POST', `/api/oauth/authorize/${providerId}`, {
    body: { connection_id: connectionId },
  });
  const back = new URL(world.consent(started.body.authorization_url));
  return h.call('GET', `${back.pathname}${back.search}`, { token: null });
}

/**
 * The client secret a provider keeps for its client at an issuer, read from the vault as
 * an operator with database access and the vault keys could: `null` when there is none.
 */
export async function storedClientSecret(
  broker: Broker,
  providerId: string,
  issuer: string,
): Promise<string | null> {
  const entry = await broker.storage.getVaultEntry('client_secret', `${providerId} ${issuer}`);
  return entry === null ? null : broker.vault.open(entry);
}

/**
 * Captures every console line (log, info, warn, error, debug) into `lines`, errors with
 * their stacks, so a test can search them for secrets. `vi.restoreAllMocks()` ends it.
 */
export function captureConsole(lines: string[]): void {
  for (const level of ['log', 'info', 'warn', 'error', 'debug'] as const) {
    vi.spyOn(console, level).mockImplementation((...args: unknown[]) => {
      lines.push(
        args
          .map((arg) => (arg instanceof Error ? `${arg.message} ${arg.stack}` : String(arg)))
          .join(' '),
      );
    });
  }
}

/**
 * The harness of each test of a `describe`, closed after it once it met no internal error:
 * `const slot = harnessPerTest();` then `slot.h = new Harness(…)` in the test.
 */
export function harnessPerTest(): { h: Harness | undefined } {
  const slot: { h: Harness | undefined } = { h: undefined };
  afterEach(async () => {
    const h = slot.h;
    if (h === undefined) return;
    slot.h = undefined;
    expect(h.errors).toEqual([]);
    await h.broker.close();
  });
  return slot;
}

/**
 * The two ways the gateway and the API proxy reach an upstream, for their tests to run on
 * both: the Node transport, whose answers are piped with no Web objects, and a fetch-style
 * transport (Bun's, Deno's, one a user passes), whose answers are Web `Response`s.
 */
export const UPSTREAM_TRANSPORTS: [string, Partial<BrokerConfig>][] = [
  ['piped answers (the Node transport)', {}],
  [
    'Web responses (a fetch-style transport)',
    {
      fetch: (() => {
        const node = createNodeFetch({ allowedHosts: ['127.0.0.1'] });
        // The same requests, without the exchange under them: answers are `Response`s.
        return (url: string, init: RequestInit) => node(url, init);
      })(),
    },
  ],
];
