import type { Broker, BrokerConfig, KeywayEvent } from '@keyway/core';
import { createTestWorld, type TestWorld, type TestWorldOptions } from '@keyway/testing';
import { afterEach, expect } from 'vitest';
import { Harness, ROOT_KEY, type StorageFactory } from './harness.js';

/*
 * The attackers' servers of the security tests (tokens-stay-with-their-party, mix-up-defense,
 * authorization-lifetime, …) and the harness each of their tests starts: every attack was
 * written first, and failed against the code before its fix.
 */

/** The part of a stored provider state these tests rewrite behind the broker's back. */
export type ProviderState = {
  registrations: Record<string, { client_id: string }>;
  authorization_server: { authorization_endpoint: string };
};

export const BASE = 'https://keyway.example.test';
export const APP = 'https://app.example.test';
export const VICTIM = 'tenants/bob/linear';

/** One request that left the broker, with everything it carried. */
export interface Sent {
  url: string;
  method: string;
  headers: Record<string, string>;
  body: string;
}

/** Two worlds behind one fetch: the legitimate one, and one an attacker runs. */
export function twoWorlds(now: () => number, legitOptions: TestWorldOptions = {}) {
  const legit = createTestWorld({ now, ...legitOptions });
  const evil = createTestWorld({
    now,
    resourceUrl: 'https://evil.example.test/mcp',
    issuer: 'https://auth.evil.example.test',
  });
  const toEvil: Sent[] = [];
  const fetch = async (input: string | URL | Request, init: RequestInit = {}) => {
    const url = new URL(String(input instanceof Request ? input.url : input));
    if (!url.hostname.endsWith('evil.example.test')) return legit.fetch(input, init);
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((value, name) => {
      headers[name] = value;
    });
    toEvil.push({
      url: url.href,
      method: init.method ?? 'GET',
      headers,
      body: init.body === undefined || init.body === null ? '' : String(init.body),
    });
    return evil.fetch(input, init);
  };
  return { legit, evil, toEvil, fetch };
}

export const CALLBACK = `${BASE}/api/oauth/callback`;
export const EVIL_MCP = 'https://evil.example.test/mcp';
export const EVIL_METADATA = 'https://evil.example.test/.well-known/oauth-protected-resource/mcp';

/** One request that reached the attacker's MCP server. */
export interface Received {
  url: string;
  authorization: string | null;
  body: string;
}

/**
 * An attacker's MCP server that names the honest authorization server in its metadata, so
 * a provider re-pointed at it keeps its issuer and client; it records what it receives.
 */
export function evilResourceServer(issuer: string) {
  const received: Received[] = [];
  const fetch = async (input: string | URL | Request, init: RequestInit = {}) => {
    const url = new URL(String(input instanceof Request ? input.url : input));
    received.push({
      url: url.href,
      authorization: new Headers(init.headers).get('authorization'),
      body: typeof init.body === 'string' ? init.body : '',
    });
    if (url.href === EVIL_METADATA) {
      return Response.json({ resource: EVIL_MCP, authorization_servers: [issuer] });
    }
    if (url.href === EVIL_MCP) {
      return new Response(null, {
        status: 401,
        headers: { 'www-authenticate': `Bearer resource_metadata="${EVIL_METADATA}"` },
      });
    }
    return new Response('not found', { status: 404 });
  };
  return { received, fetch };
}

/** What the attacker's authorization server received at its token endpoint. */
export function tokenRequestsTo(world: TestWorld): { method: string; url: string }[] {
  return world.requests.filter((request) => request.url.endsWith('/oauth/token'));
}

/**
 * The attacker's authorization server at work (RFC 9700 §4.4.1): instead of asking its user
 * for consent, it sends the browser to the honest server's authorization endpoint with
 * Keyway's request (state, PKCE challenge, scope, resource) under the client id Keyway has
 * there, and a redirect URI the honest server accepts for that client.
 */
export function bounce(
  keywayRequestToAttacker: string,
  honest: TestWorld,
  clientId: string,
  redirectUri: string,
): string {
  const incoming = new URL(keywayRequestToAttacker);
  const outgoing = new URL(`${honest.issuer}/oauth/authorize`);
  for (const [name, value] of incoming.searchParams) outgoing.searchParams.set(name, value);
  outgoing.searchParams.set('client_id', clientId);
  outgoing.searchParams.set('redirect_uri', redirectUri);
  outgoing.searchParams.set('resource', honest.resourceUrl);
  return outgoing.href;
}

/**
 * A harness per test on one storage engine, closed after the test once it met no internal
 * error: `const probe = probePerTest(factory)`, then `await probe.harness(fetch)` in the test.
 */
export class Probe {
  h!: Harness;
  readonly events: KeywayEvent[] = [];
  /** Other brokers a test opened on the same storage, closed with it. */
  readonly extraBrokers: Broker[] = [];

  constructor(
    readonly factory: StorageFactory,
    readonly defaults: Partial<BrokerConfig> = {},
  ) {}

  async harness(
    fetch: typeof globalThis.fetch | TestWorld['fetch'],
    extra: Partial<BrokerConfig> = {},
  ): Promise<Harness> {
    this.h = new Harness(await this.factory.create(), {
      fetch,
      baseUrl: BASE,
      providerManagement: true,
      onEvent: (event) => {
        this.events.push(event);
      },
      ...this.defaults,
      ...extra,
    });
    return this.h;
  }

  /** The legitimate world and the attacker's MCP server behind one fetch. */
  worldWithEvilResource(options: TestWorldOptions = {}) {
    const world = createTestWorld({ now: () => this.h.now, ...options });
    const evil = evilResourceServer(world.issuer);
    const fetch = (input: string | URL | Request, init?: RequestInit) =>
      String(input instanceof Request ? input.url : input).startsWith('https://evil.example.test/')
        ? evil.fetch(input, init)
        : world.fetch(input, init);
    return { world, evil, fetch };
  }

  /** Authorizes `connectionId` at provider `linear` as `token`, consents, and follows back. */
  async connect(world: TestWorld, connectionId: string, token = ROOT_KEY) {
    const started = await this.h.call('POST', '/api/oauth/authorize/linear', {
      token,
      body: { connection_id: connectionId },
    });
    expect(started.status).toBe(201);
    const back = new URL(world.consent(started.body.authorization_url));
    return this.h.call('GET', `${back.pathname}${back.search}`, { token: null });
  }

  async close(): Promise<void> {
    expect(this.h.errors).toEqual([]);
    this.events.splice(0);
    for (const broker of this.extraBrokers.splice(0)) await broker.close();
    await this.h.broker.close();
  }
}

/** A {@link Probe} for each test of a `describe`, closed after it. */
export function probePerTest(factory: StorageFactory, defaults: Partial<BrokerConfig> = {}): Probe {
  const probe = new Probe(factory, defaults);
  afterEach(() => probe.close());
  return probe;
}
