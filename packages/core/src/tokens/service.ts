import {
  delegationRoot,
  isDescendantName,
  parseLifetime,
  parseTokenName,
} from '../auth/delegation.js';
import {
  actorOf,
  assertManagesToken,
  type Principal,
  rootPrincipal,
  type TokenPrincipal,
} from '../auth/principal.js';
import type { RateLimiter } from '../auth/rate-limit.js';
import {
  canonicalizeScopes,
  intersectScopes,
  isNarrowerOrEqual,
  type Scope,
} from '../auth/scope.js';
import { globsWithin } from '../auth/tool-globs.js';
import { KeywayError } from '../contract/errors.js';
import { listPage, type Page } from '../contract/pagination.js';
import {
  type ListQuery,
  MintTokenBody,
  type MintTokenInput,
  NarrowTokenBody,
  type NarrowTokenInput,
  TokenListQuery,
} from '../contract/schemas.js';
import { isoTime } from '../contract/time.js';
import { parseQuery, parseShape } from '../contract/validation.js';
import type { EventLog } from '../events/log.js';
import type { PlatformCrypto } from '../platform/crypto.js';
import type { Storage, TokenStorage } from '../storage/contract.js';
import type {
  EventWrite,
  ListTokensQuery,
  TokenCheckRecord,
  TokenRecord,
  TokenTreeChanges,
} from '../storage/record-types.js';
import { NO_OBSERVER, type Observer } from '../telemetry/observation.js';
import { createRootKeyCheck, createTokenCodec, TOKEN_ID_BYTES, TOKEN_PREFIX } from './format.js';

/**
 * A newly minted token, as `POST /api/admin/tokens` answers: the only time it is shown.
 *
 * @see [docs/api.md §3.3](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#33-endpoints)
 */
export interface IssuedToken {
  name: string;
  access_token: string;
  token_type: 'Bearer';
  scopes: Scope[];
  /** ISO 8601 UTC with milliseconds. */
  expires_at: string;
  /** The portal's tools the token may list and call (docs/api.md §18); absent: any. */
  tools?: string[];
}

/**
 * A token as lists and reads show it: never the token itself.
 *
 * @see [docs/api.md §3.3](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#33-endpoints)
 */
export interface TokenView {
  name: string;
  scopes: Scope[];
  expires_at: string;
  created_at: string;
  /** `root` or `token:<name>`. */
  created_by: string;
  /** The portal's tools the token may list and call (docs/api.md §18); absent: any. */
  tools?: string[];
}

/** Dependencies of the token service, supplied by `createBroker`. */
export interface TokenServiceOptions {
  rootKey: string;
  storage: TokenStorage;
  now: () => number;
  randomBytes: (length: number) => Uint8Array;
  /** SHA-256 and HMAC of the token check; default: @noble/hashes. */
  crypto?: PlatformCrypto;
  /** Makes the audit events of each change. */
  events: EventLog;
  /** The rate limits of failed authentication and minting; none without it. */
  limiter?: RateLimiter;
  /** Told of every token check (docs/api.md §16 metrics). */
  observe?: Observer;
}

/**
 * What a caller knows of the request a credential came with.
 *
 * @see [docs/api.md §12](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#12-rate-limits) (failed authentications)
 */
export interface AuthenticationContext {
  /**
   * The client's IP address, for the limit of failed authentications (docs/api.md §12). Without
   * it, no limit applies: pass it wherever the server knows it.
   */
  clientAddress?: string | null;
  /**
   * The one endpoint the request is for (`mcp/<connection path>`, `portal/<prefix>`), or a
   * function that names it, called only for a token bound to an endpoint: a token issued to
   * an MCP client that signed in is accepted there and nowhere else (docs/api.md §17).
   * Without it, such a token is refused.
   */
  audience?: string | (() => string);
}

/** Why a credential was refused, in words that never echo it. */
function invalidToken(reason: string): KeywayError {
  return new KeywayError('invalid_token', reason);
}

function toView(record: TokenRecord): TokenView {
  return {
    name: record.name,
    scopes: record.scopes,
    expires_at: isoTime(record.expiresAt),
    created_at: isoTime(record.createdAt),
    created_by: record.createdBy,
    ...(record.tools === undefined ? {} : { tools: record.tools }),
  };
}

function notFound(name: string): KeywayError {
  return new KeywayError('not_found', `no live token is named ${JSON.stringify(name)}`);
}

/**
 * Broker tokens: authenticate, mint, list, read, narrow and delete (docs/api.md §3). Reached as
 * `broker.tokens`; every operation takes the acting {@link Principal}.
 */
export class TokenService {
  readonly #storage: TokenStorage & Pick<Storage, 'fastPaths'>;
  readonly #now: () => number;
  readonly #randomBytes: (length: number) => Uint8Array;
  readonly #codec: ReturnType<typeof createTokenCodec>;
  readonly #isRootKey: (presented: string) => boolean;
  readonly #events: EventLog;
  readonly #limiter: RateLimiter | null;

  /** Told of each check; absent, no observation is even made (an object per check). */
  readonly #observe: Observer | undefined;

  constructor(options: TokenServiceOptions) {
    this.#events = options.events;
    this.#limiter = options.limiter ?? null;
    this.#storage = options.storage;
    this.#now = options.now;
    this.#randomBytes = options.randomBytes;
    this.#codec = createTokenCodec(options.rootKey, options.crypto);
    this.#isRootKey = createRootKeyCheck(options.rootKey, options.crypto);
    this.#observe = options.observe === NO_OBSERVER ? undefined : options.observe;
  }

  /**
   * Establishes who presents a credential: the root key, or a live broker token. Order:
   * prefix → tag (constant time) → one storage read → expiry; a token costs one HMAC, one
   * hash and one point read, and its record is re-read on every call, so deletion and
   * narrowing apply on the next request.
   *
   * With a client address, an address that failed too often is refused whatever it
   * presents until its window ends; each failure with a presented credential counts.
   *
   * @throws {KeywayError} `invalid_token` (missing, unknown, forged, expired or revoked),
   *   `rate_limited`.
   */
  authenticate(
    credential: string | null | undefined,
    context: AuthenticationContext = {},
  ): Promise<Principal> {
    // One promise, made at the end: a synchronous storage's check waits on nothing.
    let checked: Principal | Promise<Principal>;
    try {
      checked = this.#authenticate(credential, context);
    } catch (error) {
      return Promise.reject(this.#refused(error));
    }
    if (checked instanceof Promise) {
      return checked.then(
        (principal) => this.#accepted(principal),
        (error: unknown) => Promise.reject(this.#refused(error)),
      );
    }
    return Promise.resolve(this.#accepted(checked));
  }

  /** A check passed: counted, and its principal answered. */
  #accepted(principal: Principal): Principal {
    this.#observe?.({ kind: 'token_check', outcome: principal.kind });
    return principal;
  }

  /** A check failed: counted, and its error answered to be thrown. */
  #refused(error: unknown): unknown {
    const limited = error instanceof KeywayError && error.code === 'rate_limited';
    this.#observe?.({ kind: 'token_check', outcome: limited ? 'limited' : 'refused' });
    return error;
  }

  /** A value for the synchronous storages (memory, SQLite), a promise otherwise. */
  #authenticate(
    credential: string | null | undefined,
    context: AuthenticationContext,
  ): Principal | Promise<Principal> {
    const address = context.clientAddress ?? null;
    const limiter = address === null || address === '' ? null : this.#limiter;
    if (limiter === null) return this.#verify(credential, context.audience);
    return this.#limited(limiter, address as string, credential, context.audience);
  }

  /**
   * {@link TokenService.authenticate} for a client address, counted by the rate limiter: a
   * value when neither the limiter nor the storage had to be waited for.
   */
  #limited(
    limiter: RateLimiter,
    address: string,
    credential: string | null | undefined,
    audience: AuthenticationContext['audience'],
  ): Principal | Promise<Principal> {
    const check = limiter.assertMayAuthenticate(address);
    if (check !== undefined) {
      return check.then(() => this.#counted(limiter, address, credential, audience));
    }
    return this.#counted(limiter, address, credential, audience);
  }

  /** The check, each failure with a credential counted against the address. */
  #counted(
    limiter: RateLimiter,
    address: string,
    credential: string | null | undefined,
    audience: AuthenticationContext['audience'],
  ): Principal | Promise<Principal> {
    let verified: Principal | Promise<Principal>;
    try {
      verified = this.#verify(credential, audience);
    } catch (error) {
      return this.#failed(limiter, address, credential, error);
    }
    if (!(verified instanceof Promise)) return verified;
    return verified.catch((error: unknown) => this.#failed(limiter, address, credential, error));
  }

  /** A failed check's error, thrown once a presented credential's failure is counted. */
  async #failed(
    limiter: RateLimiter,
    address: string,
    credential: string | null | undefined,
    error: unknown,
  ): Promise<never> {
    if (error instanceof KeywayError && error.code === 'invalid_token' && credential) {
      await limiter.recordFailedAuthentication(address);
    }
    throw error;
  }

  /**
   * The principal of a credential. A storage that reads synchronously (memory, SQLite) is
   * read without a promise: the check then allocates none of its own.
   */
  #verify(
    credential: string | null | undefined,
    audience: AuthenticationContext['audience'],
  ): Principal | Promise<Principal> {
    if (credential === null || credential === undefined || credential === '') {
      throw invalidToken('no credential was presented');
    }
    if (!credential.startsWith(TOKEN_PREFIX)) {
      if (this.#isRootKey(credential)) return rootPrincipal();
      throw invalidToken('the credential is not valid');
    }
    const idHash = this.#codec.open(credential);
    if (idHash === null) throw invalidToken('the token is not valid');
    const storage = this.#storage;
    const fast = storage.fastPaths;
    if (fast?.findTokenByIdHashSync !== undefined) {
      return this.#principalOf(fast.findTokenByIdHashSync(idHash), idHash, audience);
    }
    // The check's columns where the storage reads them alone, else the whole record.
    const read = fast?.findTokenCheckByIdHash?.(idHash) ?? storage.findTokenByIdHash(idHash);
    return read.then((record) => this.#principalOf(record, idHash, audience));
  }

  /**
   * The principal of the token read by `idHash`: live, and bound to no endpoint or to the
   * one the request is for; else `invalid_token`.
   */
  #principalOf(
    record: TokenCheckRecord | null,
    idHash: string,
    audience: AuthenticationContext['audience'],
  ): TokenPrincipal {
    if (record === null) throw invalidToken('the token is unknown or has been revoked');
    if (record.expiresAt <= this.#now()) throw invalidToken('the token has expired');
    if (record.audience !== undefined) {
      const endpoint = typeof audience === 'function' ? audience() : audience;
      if (record.audience !== endpoint) throw invalidToken('the token is for another resource');
    }
    // One shape for every principal (the audience `undefined` for a token any route takes).
    return {
      kind: 'token',
      name: record.name,
      scopes: record.scopes,
      expiresAt: record.expiresAt,
      idHash,
      audience: record.audience,
      tools: record.tools,
    };
  }

  /**
   * Mints a broker token. The root key may mint any name, scopes and lifetime within the
   * limits; a token named `N` only `N.<suffix>`, with equal or narrower scopes and an equal
   * or earlier expiry (docs/api.md §3.2). An omitted lifetime is 3600 s and is never silently
   * shortened to fit the caller.
   *
   * @param input A {@link MintTokenInput}, checked here.
   * @throws {KeywayError} `invalid_request`, `invalid_name`, `invalid_scope`,
   *   `invalid_lifetime`, `delegation_denied`, `insufficient_scope`, `conflict`,
   *   `rate_limited` (a scoped caller beyond its minting limit).
   * @example
   * const issued = await broker.tokens.mint(rootPrincipal(), { name: 'ci', scopes: ['acme'] });
   * issued.scopes; // ['acme/**']
   */
  async mint(principal: Principal, input: MintTokenInput): Promise<IssuedToken> {
    // Counted against the root of the caller's delegation tree (its first label): a child
    // minting children of its own must not multiply its ancestor's budget.
    if (principal.kind === 'token') await this.#limiter?.countMint(delegationRoot(principal.name));
    const shape = parseShape(MintTokenBody, input, { tooMany: 'invalid_scope' });
    const name = parseTokenName(shape.name);
    const scopes = canonicalizeScopes(shape.scopes);
    const lifetime = parseLifetime(shape.expires_in);
    const now = this.#now();
    const expiresAt = now + lifetime * 1000;
    // A child minted without globs inherits its parent's: delegation never widens them.
    const inherited =
      principal.kind === 'token' && principal.tools !== undefined
        ? [...principal.tools]
        : undefined;
    const tools = shape.tools === undefined ? inherited : [...new Set(shape.tools)];

    if (principal.kind === 'token') {
      if (!isDescendantName(principal.name, name)) {
        throw new KeywayError(
          'delegation_denied',
          `a token named ${JSON.stringify(principal.name)} may only mint names of the form ` +
            `"${principal.name}.<suffix>"`,
        );
      }
      if (!isNarrowerOrEqual(scopes, principal.scopes)) {
        throw new KeywayError(
          'insufficient_scope',
          'the requested scopes are wider than the scopes of the minting token',
        );
      }
      if (expiresAt > principal.expiresAt) {
        throw new KeywayError(
          'delegation_denied',
          `the requested expiry is later than the minting token's (${isoTime(principal.expiresAt)})`,
        );
      }
      const wider = tools?.find((glob) => !globsWithin([glob], principal.tools));
      if (wider !== undefined) {
        throw new KeywayError(
          'delegation_denied',
          `"tools": ${JSON.stringify(wider)} is not within the minting token's tools ` +
            `(${JSON.stringify(principal.tools)})`,
          { details: [{ path: 'tools', message: "wider than the minting token's tools" }] },
        );
      }
    }

    const { token, idHash } = this.#codec.issue(this.#randomBytes(TOKEN_ID_BYTES));
    const record: TokenRecord = {
      idHash,
      name,
      scopes,
      expiresAt,
      createdAt: now,
      createdBy: actorOf(principal),
      ...(tools === undefined ? {} : { tools }),
    };
    const inserted = await this.#events.recorded(
      {
        type: 'token.created',
        actor: record.createdBy,
        resource: name,
        data: { scopes, expires_at: isoTime(expiresAt), ...(tools === undefined ? {} : { tools }) },
      },
      (events) => this.#storage.insertToken(record, now, events),
    );
    if (!inserted) {
      throw new KeywayError('conflict', `a live token is already named ${JSON.stringify(name)}`);
    }
    return {
      name,
      access_token: token,
      token_type: 'Bearer',
      scopes,
      expires_at: isoTime(expiresAt),
      ...(tools === undefined ? {} : { tools }),
    };
  }

  /**
   * Lists live tokens in name order: all of them for the root key, the token itself and its
   * descendants for a broker token. Never includes an `access_token`.
   */
  async list(principal: Principal, query?: ListQuery): Promise<Page<TokenView>> {
    return listPage(
      parseQuery(TokenListQuery, query),
      (window) => {
        // Set field by field, not spread: see pathsQuery.
        const listed: ListTokensQuery = { limit: window.limit, now: this.#now() };
        if (window.after !== undefined) listed.after = window.after;
        if (principal.kind === 'token') listed.treeOf = principal.name;
        return this.#storage.listLiveTokens(listed);
      },
      (record) => record.name,
      toView,
    );
  }

  /**
   * Reads one live token: the root key reads any, a broker token itself and its descendants.
   *
   * @throws {KeywayError} `invalid_name`, `delegation_denied`, `not_found`.
   */
  async get(principal: Principal, name: string): Promise<TokenView> {
    const valid = parseTokenName(name);
    assertManagesToken(principal, valid);
    const record = await this.#storage.findLiveTokenByName(valid, this.#now());
    if (record === null) throw notFound(valid);
    return toView(record);
  }

  /**
   * Narrows a token: new scopes equal or narrower than its current ones, a new expiry
   * (now + `expires_in`) equal or earlier. Every descendant is narrowed with it in the same
   * transaction: scopes intersected, expiry capped, and a descendant left with no scope is
   * deleted, so a delegated token never holds what an ancestor lacks.
   *
   * @param input A {@link NarrowTokenInput}, checked here.
   * @throws {KeywayError} `invalid_request` (a widening), `invalid_name`, `invalid_scope`,
   *   `invalid_lifetime`, `delegation_denied`, `not_found`.
   */
  async narrow(principal: Principal, name: string, input: NarrowTokenInput): Promise<TokenView> {
    const valid = parseTokenName(name);
    const shape = parseShape(NarrowTokenBody, input, { tooMany: 'invalid_scope' });
    const scopes = shape.scopes === undefined ? undefined : canonicalizeScopes(shape.scopes);
    const lifetime = shape.expires_in === undefined ? undefined : parseLifetime(shape.expires_in);
    assertManagesToken(principal, valid);

    const now = this.#now();
    let updated: TokenRecord | undefined;
    let events: EventWrite | undefined;
    const found = await this.#storage.updateTokenTree(valid, now, (tree) => {
      const [target, ...descendants] = tree as [TokenRecord, ...TokenRecord[]];
      if (scopes !== undefined && !isNarrowerOrEqual(scopes, target.scopes)) {
        throw new KeywayError(
          'invalid_request',
          'a token can only be narrowed: the new scopes must be equal to or narrower than its current ones',
          { details: [{ path: 'scopes', message: 'wider than the current scopes' }] },
        );
      }
      const expiresAt = lifetime === undefined ? target.expiresAt : now + lifetime * 1000;
      if (expiresAt > target.expiresAt) {
        throw new KeywayError(
          'invalid_request',
          'a token can only be narrowed: the new expiry must be equal to or earlier than its current one',
          { details: [{ path: 'expires_in', message: 'later than the current expiry' }] },
        );
      }
      const narrowed = { ...target, scopes: scopes ?? target.scopes, expiresAt };
      updated = narrowed;
      const changes: TokenTreeChanges = { update: [narrowed], delete: [] };
      for (const descendant of descendants) {
        const kept = intersectScopes(descendant.scopes, narrowed.scopes);
        if (kept.length === 0) {
          changes.delete.push(descendant.idHash);
        } else if (
          kept.length !== descendant.scopes.length ||
          kept.some((scope, i) => scope !== descendant.scopes[i]) ||
          descendant.expiresAt > expiresAt
        ) {
          changes.update.push({
            ...descendant,
            scopes: kept,
            expiresAt: Math.min(descendant.expiresAt, expiresAt),
          });
        }
      }
      events = this.#events.of({
        type: 'token.narrowed',
        actor: actorOf(principal),
        resource: valid,
        data: {
          scopes: narrowed.scopes,
          expires_at: isoTime(expiresAt),
          descendants_narrowed: changes.update.length - 1,
          descendants_deleted: changes.delete.length,
        },
      });
      changes.events = events;
      return changes;
    });
    if (!found || updated === undefined || events === undefined) throw notFound(valid);
    this.#events.published(events);
    return toView(updated);
  }

  /**
   * Deletes a token and all its descendants in one transaction; allowed for the root key,
   * the token itself and its ancestors. Takes effect on the very next request.
   *
   * @throws {KeywayError} `invalid_name`, `delegation_denied`, `not_found`.
   */
  async delete(principal: Principal, name: string): Promise<void> {
    const valid = parseTokenName(name);
    assertManagesToken(principal, valid);
    const deleted = await this.#events.recorded(
      { type: 'token.deleted', actor: actorOf(principal), resource: valid },
      (events) => this.#storage.deleteTokenTree(valid, this.#now(), events),
    );
    if (!deleted) throw notFound(valid);
  }
}
