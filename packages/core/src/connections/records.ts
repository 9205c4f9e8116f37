import { type ConnectionFailure, connectionFailure } from '../contract/connection-failure.js';
import { KeywayError } from '../contract/errors.js';
import { isoTimeOrNull } from '../contract/time.js';
import type { EventSpec } from '../events/log.js';
import { setBounded } from '../platform/bounded.js';
import { toBase64Url } from '../platform/bytes.js';
import { currentParty, PARTY_CHANGED, partyResourceUrl } from '../providers/party.js';
import type { ConnectionRecord, VaultEntryRecord } from '../storage/record-types.js';
import {
  type ConnectionState,
  type ConnectionTokens,
  connectionState,
  type OAuthParty,
  ownGrant,
  readSealed,
  SealedTokensSchema,
  type TokenAnswer,
} from '../storage/states.js';
import type { ConnectionDeps } from './deps.js';

/** Vault kinds of what connections keep. */
export const CONNECTION_TOKENS_KIND = 'connection_tokens';
export const PKCE_VERIFIER_KIND = 'pkce_verifier';
/** Vault kind of the tokens a user-verification flow holds. */
export const VERIFICATION_TOKENS_KIND = 'verification_tokens';

/** Opened tokens a broker keeps, by connection (see `ConnectionRecords.tokensOf`). */
const OPENED_LIMIT = 10_000;

/** How long an authorization may take from authorize to callback. */
export const PENDING_AUTHORIZATION_TTL_MS = 10 * 60 * 1000;

/** Which creation of a connection a record is (its random incarnation, else its creation time). */
export function incarnationOf(record: ConnectionRecord): string {
  return connectionState(record).incarnation ?? `created:${record.createdAt}`;
}

export const notFound = (id: string) =>
  new KeywayError('not_found', `no connection ${JSON.stringify(id)}`);

/** A change {@link ConnectionRecords.update} writes, or `null` to write nothing. */
type ConnectionChange = {
  record: ConnectionRecord;
  tokens?: ConnectionTokens;
  /** The event that records the change, written in its transaction. */
  event: EventSpec;
} | null;

/**
 * Connection records and their sealed tokens, as the flows read and change them: every
 * write a compare-and-set with the tokens in the same transaction, every read checked.
 */
export class ConnectionRecords {
  readonly #deps: ConnectionDeps;

  constructor(deps: ConnectionDeps) {
    this.#deps = deps;
  }

  /** The connection, or `null`. */
  get(id: string): Promise<ConnectionRecord | null> {
    return this.#deps.storage.getConnection(id);
  }

  /**
   * Applies a change to a connection by compare-and-set, re-reading and re-applying on a
   * concurrent write; the tokens, when given, are written in the same transaction. A change
   * that answers `null` writes nothing.
   *
   * @returns the record as written (or as it stands, when the change wrote nothing), or
   *   `null` when the connection does not exist.
   */
  async update(
    id: string,
    change: (record: ConnectionRecord) => ConnectionChange,
  ): Promise<ConnectionRecord | null> {
    for (let attempt = 0; attempt < 10; attempt++) {
      const current = await this.#deps.storage.getConnection(id);
      if (current === null) return null;
      const planned = change(current);
      if (planned === null) return current;
      const next = { ...planned.record, version: current.version + 1, updatedAt: this.#deps.now() };
      const vault =
        planned.tokens === undefined
          ? undefined
          : {
              put: [
                await this.#deps
                  .vault()
                  .seal({ kind: CONNECTION_TOKENS_KIND, key: id }, JSON.stringify(planned.tokens)),
              ],
            };
      const stored = await this.#deps.events.recorded(planned.event, (events) =>
        this.#deps.storage.compareAndSetConnection(next, current.version, vault, events),
      );
      if (stored) return next;
    }
    throw new KeywayError(
      'conflict',
      `connection ${JSON.stringify(id)} is changing too often; retry`,
    );
  }

  /**
   * Tokens opened, by connection, with the ciphertext they were opened from: the same sealed
   * entry is opened once (a new ciphertext — a refresh, a re-wrap, a tampered row — is
   * opened again). The vault keys of a broker never change, so an entry it could open once
   * it can open again. At most {@link OPENED_LIMIT}, the oldest dropped first.
   */
  readonly #opened = new Map<string, { ciphertext: string; tokens: ConnectionTokens }>();

  /** The tokens of a connection, from its vault entry (read unless given), or `null`. */
  async tokensOf(
    record: ConnectionRecord,
    read?: VaultEntryRecord | null,
  ): Promise<ConnectionTokens | null> {
    const { storage } = this.#deps;
    const entry =
      read === undefined ? await storage.getVaultEntry(CONNECTION_TOKENS_KIND, record.id) : read;
    if (entry === null) return null;
    const opened = this.openedTokens(record, entry);
    if (opened !== undefined) return opened;
    const stored = readSealed(
      SealedTokensSchema,
      await this.#deps.vault().open(entry),
      `tokens of connection ${record.id}`,
    );
    const { issuer, client_id, party, ...tokens } = stored;
    if (party === undefined) {
      // Tokens stored before parties were kept: their party depends on the provider's
      // current state, so it is worked out at each read.
      return { ...tokens, party: await this.#legacyParty(record.providerId, issuer, client_id) };
    }
    setBounded(
      this.#opened,
      record.id,
      { ciphertext: entry.ciphertext, tokens: { ...tokens, party, scope: [...tokens.scope] } },
      OPENED_LIMIT,
    );
    return { ...tokens, party };
  }

  /**
   * The tokens of `entry`, the connection's sealed tokens, when they were opened already
   * (as {@link ConnectionRecords.tokensOf} keeps them), without waiting; `undefined` when
   * they must be opened first.
   */
  openedTokens(record: ConnectionRecord, entry: VaultEntryRecord): ConnectionTokens | undefined {
    const opened = this.#opened.get(record.id);
    if (opened === undefined || opened.ciphertext !== entry.ciphertext) return undefined;
    return { ...opened.tokens, scope: [...opened.tokens.scope] };
  }

  /**
   * Where a party's token may be sent (`partyResourceUrl`): the endpoint it was authorized
   * for, kept with the party (answered without waiting), or read from the provider for a
   * party written before that was kept.
   */
  resourceUrlOf(providerId: string, party: OAuthParty): string | null | Promise<string | null> {
    if (party.resource_url !== undefined) return party.resource_url;
    return this.#resourceUrlRead(providerId, party);
  }

  /** {@link ConnectionRecords.resourceUrlOf} of a party that does not keep its endpoint. */
  async #resourceUrlRead(providerId: string, party: OAuthParty): Promise<string | null> {
    if (party.resource === null) {
      throw new KeywayError(
        'invalid_request',
        `provider ${JSON.stringify(providerId)} is an "oauth2" API, not an MCP server: its connections are used ` +
          `through the API proxy or their credentials`,
      );
    }
    const { state } = await this.#deps.providers.resolve(providerId);
    return partyResourceUrl(party, state.configuration.resource_url);
  }

  /** The current tokens of a connection, read again, or `null` when it has none. */
  async currentTokens(id: string): Promise<ConnectionTokens | null> {
    const record = await this.#deps.storage.getConnection(id);
    return record === null ? null : this.tokensOf(record);
  }

  /**
   * The party of tokens stored before parties were kept (only issuer and client id): the
   * provider's current server, when it is still that issuer with that client, since its
   * endpoints come from that issuer's own metadata. Otherwise a party no provider matches,
   * so the connection must be authorized again.
   */
  async #legacyParty(
    providerId: string,
    issuer: string | undefined,
    clientId: string | undefined,
  ): Promise<OAuthParty> {
    const { state } = await this.#deps.providers.resolve(providerId);
    const party = currentParty(state);
    if (party !== null && party.issuer === issuer && party.client_id === clientId) return party;
    return {
      issuer: issuer ?? '',
      token_endpoint: '',
      revocation_endpoint: null,
      client_id: clientId ?? '',
      token_endpoint_auth_method: 'none',
      resource: state.configuration.resource_url ?? null,
      iss_parameter_supported: false,
    };
  }

  /**
   * Records a failure on a connection. `keep-active`: a failed authorization leaves an
   * active connection active (a pending one goes to `error`); `error`: the connection can
   * no longer be used (its refresh failed for good).
   */
  async recordFailure(
    id: string,
    failure: { code: string; description: string },
    mode: 'keep-active' | 'error' = 'keep-active',
    generation?: number,
  ): Promise<'active' | 'error'> {
    const error = connectionFailure(failure);
    const event: EventSpec =
      mode === 'error'
        ? {
            type: 'connection.reauthorization_required',
            actor: 'system',
            resource: id,
            data: { error: error.code },
          }
        : {
            type: 'connection.failed',
            actor: 'system',
            resource: id,
            data: { error: error.code, phase: 'authorization' },
          };
    const written = await this.update(id, (record) => {
      const state = connectionState(record);
      // A verdict on the tokens of one authorization, recorded once: not again once the
      // connection is in error, nor on a newer authorization's.
      if (
        generation !== undefined &&
        (record.status !== 'active' || state.generation !== generation)
      ) {
        return null;
      }
      return {
        record: {
          ...record,
          status: mode === 'keep-active' && record.status === 'active' ? 'active' : 'error',
          state: { ...state, error } satisfies ConnectionState,
        },
        event,
      };
    });
    return written?.status === 'active' ? 'active' : 'error';
  }

  /**
   * Puts a connection in `error` for good and answers the error the caller gets. With the
   * `generation` of the tokens the verdict is about, only while they are the connection's
   * and it is active: the verdict (and its event) is written once.
   */
  async requireReauthorization(
    id: string,
    failure: { code: string; description: string },
    message: string,
    generation?: number,
  ): Promise<KeywayError> {
    await this.recordFailure(id, failure, 'error', generation);
    return new KeywayError('reauthorization_required', message);
  }

  /**
   * A connection's incarnation, the connection created `pending` first when `existing` is
   * `null` (audited `connection.created`). `null` when it was deleted meanwhile.
   *
   * @throws {KeywayError} `conflict` when another provider's connection took the id meanwhile.
   */
  async ensure(
    existing: ConnectionRecord | null,
    created: { id: string; providerId: string; scopes: string[]; actor: string },
  ): Promise<string | null> {
    if (existing !== null) return incarnationOf(existing);
    const { id, providerId, scopes, actor } = created;
    const now = this.#deps.now();
    const record: ConnectionRecord = {
      id,
      providerId,
      status: 'pending',
      state: {
        scopes,
        token_expires_at: null,
        authorized_at: null,
        last_refreshed_at: null,
        error: null,
        generation: 0,
        incarnation: toBase64Url(this.#deps.randomBytes(16)),
      } satisfies ConnectionState,
      version: 1,
      createdAt: now,
      updatedAt: now,
    };
    const inserted = await this.#deps.events.recorded(
      { type: 'connection.created', actor, resource: id, data: { provider_id: providerId } },
      (events) => this.#deps.storage.insertConnection(record, undefined, events),
    );
    if (inserted) return incarnationOf(record);
    const raced = await this.get(id);
    if (raced !== null && raced.providerId !== providerId) {
      throw new KeywayError(
        'conflict',
        `connection ${JSON.stringify(id)} belongs to another provider`,
      );
    }
    return raced === null ? null : incarnationOf(raced);
  }

  /** Writes the tokens of a completed authorization: a new generation, active. */
  async activate(
    id: string,
    received: Omit<ConnectionTokens, 'generation'> & { answer?: TokenAnswer; account?: string },
    requestedScopes: string[],
    actor: string,
    grant?: 'client_credentials' | 'jwt_bearer' | 'enterprise',
  ): Promise<ConnectionRecord | null> {
    const { answer, account, ...tokens } = received;
    const now = this.#deps.now();
    const scopes = tokens.scope.length > 0 ? tokens.scope : requestedScopes;
    // A client that gets its own tokens gets the next one as it got this one.
    const refreshable = tokens.refresh_token !== null || ownGrant(grant);
    return this.update(id, (record) => {
      const previous = connectionState(record);
      const generation = previous.generation + 1;
      return {
        event: {
          type: 'connection.authorized',
          actor,
          resource: id,
          data: {
            scopes,
            token_expires_at: isoTimeOrNull(tokens.expires_at),
            refreshable,
          },
        },
        record: {
          ...record,
          status: 'active',
          state: {
            scopes,
            token_expires_at: tokens.expires_at,
            authorized_at: now,
            last_refreshed_at: null,
            error: null,
            generation,
            refreshable,
            ...(grant === undefined ? {} : { grant }),
            ...(previous.incarnation === undefined ? {} : { incarnation: previous.incarnation }),
            // What a user set for the portal outlives any authorization.
            ...(previous.alias === undefined ? {} : { alias: previous.alias }),
            ...(previous.tools === undefined ? {} : { tools: previous.tools }),
            ...(tokens.metadata === undefined ? {} : { metadata: tokens.metadata }),
            ...(answer === undefined ? {} : { token_response: answer }),
            ...refreshTokenExpiry(answer, now),
            // The account of this authorization only: another consent may be another account.
            ...(account === undefined ? {} : { account }),
          } satisfies ConnectionState,
        },
        tokens: { ...tokens, generation },
      };
    });
  }

  /**
   * Puts every active connection of a provider in `error` with `reauthorization_required`,
   * after the provider moved to another authorization server or client: their tokens
   * belong to the old one, and are never sent to the new one.
   *
   * @returns how many connections were affected.
   */
  async requireReauthorizationOf(
    providerId: string,
    failure: ConnectionFailure = PARTY_CHANGED,
  ): Promise<number> {
    let affected = 0;
    let after: string | undefined;
    for (;;) {
      const page = await this.#deps.storage.listConnections({
        providerId,
        status: 'active',
        limit: 200,
        ...(after === undefined ? {} : { after }),
      });
      for (const record of page) {
        const written = await this.update(record.id, (current) =>
          current.status !== 'active'
            ? null
            : {
                record: {
                  ...current,
                  status: 'error',
                  state: { ...connectionState(current), error: failure },
                },
                event: {
                  type: 'connection.reauthorization_required',
                  actor: 'system',
                  resource: record.id,
                  data: { error: failure.code },
                },
              },
        );
        if (written?.status === 'error' && written.version > record.version) affected++;
      }
      const last = page[page.length - 1];
      if (page.length < 200 || last === undefined) return affected;
      after = last.id;
    }
  }
}

/**
 * When a refresh token just issued expires, where its answer said
 * (`refresh_token_expires_in`), as the state keeps it.
 */
export function refreshTokenExpiry(
  answer: TokenAnswer | undefined,
  receivedAt: number,
): { refresh_token_expires_at?: number } {
  const seconds = answer?.refresh_token === 'present' ? answer.refresh_token_expires_in : null;
  return typeof seconds === 'number'
    ? { refresh_token_expires_at: receivedAt + seconds * 1000 }
    : {};
}
