import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Broker, createBroker, type Storage } from '@keyway/core';
import { memoryStorage } from '@keyway/store-memory';
import { postgresStorage } from '@keyway/store-postgres';
import { sqliteStorage } from '@keyway/store-sqlite';
import { createTestSchema } from '@keyway/test-support/postgres';
import { inject } from 'vitest';
import { createHandler, type KeywayHandler } from '../src/index.js';

export const ROOT_KEY = 'test-root-key-0123456789-abcdefghijklmnop';
export const START = Date.UTC(2026, 10, 21, 9, 30, 0, 0);

/** A storage the handler tests run against. */
export interface StorageFactory {
  name: string;
  create(): Promise<Storage>;
}

const sqliteDir = mkdtempSync(join(tmpdir(), 'keyway-http-'));
let sqliteFiles = 0;

/** Every adapter, each on its real engine: the handler must behave the same on all. */
export const storageFactories: StorageFactory[] = [
  { name: 'memory', create: async () => memoryStorage() },
  {
    name: 'sqlite',
    create: async () => sqliteStorage(join(sqliteDir, `http-${++sqliteFiles}.sqlite`)),
  },
  {
    name: 'postgres',
    async create() {
      const url = inject('databaseUrl');
      const { schema } = await createTestSchema(url);
      return postgresStorage({ connectionString: url, schema, maxConnections: 4 });
    },
  },
];

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
}

/** A broker on a controllable clock, its handler, and a small client for it. */
export class Harness {
  now = START;
  readonly errors: unknown[] = [];
  broker!: Broker;
  handler!: KeywayHandler;

  constructor(readonly storage: Storage) {
    this.rebuild(ROOT_KEY);
  }

  /** A new broker over the same storage, e.g. with another root key. */
  rebuild(rootKey: string): void {
    this.broker = createBroker({ rootKey, storage: this.storage, now: () => this.now });
    this.handler = createHandler(this.broker, {
      onInternalError: (error) => this.errors.push(error),
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
    );
    const text = await response.text();
    return {
      status: response.status,
      headers: response.headers,
      body: text === '' ? null : JSON.parse(text),
      text,
    };
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
