import { connectInWorld, type TestWorld } from '@keyway/testing';
import { afterEach, expect } from 'vitest';
import { rootPrincipal } from '../../src/auth/principal.js';
import { type Broker, createBroker } from '../../src/broker/broker.js';
import type { BrokerConfig } from '../../src/broker/config.js';
import { KeywayError } from '../../src/contract/errors.js';
import type { Storage } from '../../src/storage/contract.js';

/*
 * What the specifications of core's policy (grants, refresh, the upstream) share: a broker
 * per test, driven through its own methods, with the worlds of @keyway/testing (or a real
 * storage engine) behind it. No HTTP here: what a route answers is @keyway/http's tests'.
 */

export const ROOT_KEY = 'core-spec-root-key-0123456789-abcdefghijklm';
/** A fixed vault key (base64url of 32 bytes). */
export const VAULT_KEY = 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8';
export const BASE = 'https://keyway.example.test';
/** The root key's principal: every call of a spec is made as the root unless it says. */
export const ROOT = rootPrincipal();

/**
 * The error a broker call was refused with. A call that succeeded fails the test, and so
 * does anything thrown that is not a {@link KeywayError}.
 */
export async function refusal(work: Promise<unknown>): Promise<KeywayError> {
  const settled = await work.then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );
  if (settled.ok) {
    throw new Error(`expected a refusal, got ${JSON.stringify(settled.value)}`);
  }
  expect(settled.error).toBeInstanceOf(KeywayError);
  return settled.error as KeywayError;
}

/**
 * An `mcp` provider `linear` for the world's server, and `connectionId` authorized through
 * it: the connection every spec of two instances starts from.
 */
export async function connectLinear(
  world: TestWorld,
  broker: Broker,
  connectionId: string,
): Promise<void> {
  const put = await broker.providers.put(ROOT, 'linear', {
    template: 'mcp',
    configuration: { resource_url: world.resourceUrl },
  });
  expect(put.created).toBe(true);
  const connected = await connectInWorld(world, broker, { providerId: 'linear', connectionId });
  expect(connected.status).toBe('active');
}

/** An answer of the gateway or the proxy, its body read as JSON (or `null`) and as text. */
export async function answerOf(response: Response): Promise<{
  status: number;
  headers: Headers;
  body: any;
  text: string;
}> {
  const text = await response.text();
  const json = response.headers.get('content-type')?.includes('json') && text !== '';
  return {
    status: response.status,
    headers: response.headers,
    body: json ? JSON.parse(text) : null,
    text,
  };
}

/** Brokers on a clock the test moves; each one {@link open}ed is closed after the test. */
export class BrokerSpec {
  now = Date.UTC(2026, 10, 21, 9, 30, 0, 0);
  readonly #brokers: Broker[] = [];

  /** A broker over `storage`, as the HTTP tests' harness makes one, with `config` on top. */
  open(storage: Storage, config: Partial<BrokerConfig> = {}): Broker {
    const broker = this.another(storage, config);
    this.#brokers.push(broker);
    return broker;
  }

  /**
   * A second broker over the storage of one already {@link open}: another instance on the
   * same database, on the same clock. It is not closed after the test, since closing a
   * broker closes its storage, which the first one owns.
   */
  another(storage: Storage, config: Partial<BrokerConfig> = {}): Broker {
    return createBroker({
      rootKey: ROOT_KEY,
      storage,
      baseUrl: BASE,
      providerManagement: true,
      now: () => this.now,
      vaultKeys: [VAULT_KEY],
      purgeIntervalMs: false,
      ...config,
    });
  }

  async close(): Promise<void> {
    for (const broker of this.#brokers.splice(0)) await broker.close();
  }
}

/** A {@link BrokerSpec} for each test of a `describe`, closed after it. */
export function brokerPerTest(): BrokerSpec {
  const spec = new BrokerSpec();
  afterEach(() => spec.close());
  return spec;
}
