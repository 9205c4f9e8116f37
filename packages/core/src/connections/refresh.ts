import * as oauth from 'oauth4webapi';
import { KeywayError } from '../contract/errors.js';
import { isoTimeOrNull, parseDuration } from '../contract/time.js';
import { authenticationOf } from '../grants/client-auth.js';
import { CLIENT_REFUSED } from '../grants/client-credentials.js';
import { grantNamed } from '../grants/lookup.js';
import { describeOAuthFailure, oauthErrorCode } from '../grants/token-endpoint.js';
import { toBase64Url } from '../platform/bytes.js';
import { FORGOTTEN_CLIENT, PARTY_CHANGED, partyChangeOf } from '../providers/party.js';
import type { ConnectionRecord } from '../storage/record-types.js';
import {
  type ConnectionState,
  type ConnectionTokens,
  connectionState,
  type TokenAnswer,
} from '../storage/states.js';
import type { RefreshOutcome } from '../telemetry/observation.js';
import { inSpan, PROVIDER } from '../telemetry/tracing.js';
import type { ConnectionDeps } from './deps.js';
import { type ConnectionRecords, notFound, refreshTokenExpiry } from './records.js';
import {
  failureError,
  inactiveError,
  standingFailure,
  transientVerdict,
  type VerdictMark,
  verdictMark,
} from './refresh-verdict.js';

/** New tokens, and their token response described for the connection state. */
type Received = ConnectionTokens & { answer?: TokenAnswer; account?: string };

export const REFRESH_IDLE =
  '"refreshIdleAfter" must be false, milliseconds (at least 1000) or a duration such as "7d"';

export const REFRESH_AHEAD = '"refreshAhead" must be false, "rotating" or "all"';
export const EXPIRING_NOTICE =
  '"expiringNotice" must be milliseconds (at least 60000) or a duration such as "7d"';

/** `expiringNotice` in milliseconds (default 7 days). @throws {TypeError} naming the option. */
export function expiringNoticeMs(value: number | string | undefined): number {
  if (value === undefined) return 7 * 86_400_000;
  let ms: number;
  try {
    ms = typeof value === 'number' ? value : parseDuration(value);
  } catch (error) {
    throw new TypeError(
      `invalid broker configuration: "expiringNotice": ${(error as Error).message}`,
    );
  }
  if (!Number.isSafeInteger(ms) || ms < 60_000)
    throw new TypeError(`invalid broker configuration: ${EXPIRING_NOTICE}`);
  return ms;
}

/** `refreshIdleAfter` in milliseconds, or `false`. @throws {TypeError} naming the option. */
export function refreshIdleAfterMs(value: number | string | false | undefined): number | false {
  if (value === undefined || value === false) return false;
  let ms: number;
  try {
    ms = typeof value === 'number' ? value : parseDuration(value);
  } catch (error) {
    throw new TypeError(
      `invalid broker configuration: "refreshIdleAfter": ${(error as Error).message}`,
    );
  }
  if (!Number.isInteger(ms) || ms < 1000) {
    throw new TypeError(`invalid broker configuration: ${REFRESH_IDLE}`);
  }
  return ms;
}

/** Waits `ms` milliseconds. */
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A token served to a caller is one valid for at least this long. */
const STILL_VALID_MS = 1_000;

/** Whether tokens are valid now and for a moment more: what may be served without waiting. */
const stillValid = (tokens: ConnectionTokens, now: number) =>
  tokens.expires_at === null || tokens.expires_at > now + STILL_VALID_MS;

/** A refresh in flight in this process, and whether it must end with new tokens. */
interface Flight {
  force: boolean;
  promise: Promise<ConnectionTokens>;
}

/**
 * Refresh (docs/api.md §5): single flight per connection, in this process (concurrent callers
 * join the running refresh) and across every instance sharing the storage (a lease) — for
 * its failures as for its successes: a verdict on a refresh token is recorded once, and every
 * caller on every instance reads it rather than presenting that token again.
 */
export class Refresher {
  /** Refreshes in flight in this process, by connection: concurrent callers share one. */
  readonly #refreshing = new Map<string, Flight>();
  /** This instance's name on leases. */
  readonly #owner: string;

  readonly #deps: ConnectionDeps;

  constructor(
    deps: ConnectionDeps,
    readonly records: ConnectionRecords,
  ) {
    this.#deps = deps;
    this.#owner = toBase64Url(deps.randomBytes(12));
  }

  /**
   * Whether tokens are due: they expire within the refresh margin, which is never more than
   * half of their lifetime (a server whose tokens live 60 s or less is not due at every call).
   */
  due(tokens: ConnectionTokens): boolean {
    const o = this.#deps;
    if (tokens.expires_at === null) return false;
    const margin =
      tokens.issued_at === undefined
        ? o.refreshMarginMs
        : Math.min(o.refreshMarginMs, (tokens.expires_at - tokens.issued_at) / 2);
    return tokens.expires_at - o.now() <= margin;
  }

  /**
   * One refresh per connection in this process: later callers join the running one. A
   * `force`d caller (it must get new tokens: `force_refresh`, an upstream's `401`) that
   * joined a refresh which answered the tokens it had starts one of its own.
   */
  refreshOnce(id: string, seen: ConnectionTokens, force = false): Promise<ConnectionTokens> {
    const running = this.#refreshing.get(id);
    if (running !== undefined) {
      if (!force || running.force) return running.promise;
      return running.promise.then(
        (tokens) =>
          tokens.access_token !== seen.access_token ? tokens : this.refreshOnce(id, tokens, true),
        () => this.refreshOnce(id, seen, true),
      );
    }
    const flight: Flight = {
      force,
      promise: this.#acrossInstances(id, seen, force).finally(() => {
        if (this.#refreshing.get(id) === flight) this.#refreshing.delete(id);
      }),
    };
    this.#refreshing.set(id, flight);
    return flight.promise;
  }

  /**
   * One refresh per connection across instances: take the storage lease, read what is
   * settled (another instance may have refreshed, or recorded a failure, while we waited),
   * refresh only if still needed, release. Without the lease: what its holder settles is
   * our result; meanwhile a caller that need not have new tokens is served the still-valid
   * ones at once, and one that must waits at most one lease period and a margin (a dead
   * holder's lease runs out and this instance takes over). The lease is renewed while the
   * refresh runs, so a slow server (or the discovery of a provider declared in code) never
   * lets a second instance start the same refresh.
   */
  async #acrossInstances(
    id: string,
    seen: ConnectionTokens,
    force: boolean,
  ): Promise<ConnectionTokens> {
    const o = this.#deps;
    const leaseMs = o.refreshLeaseMs;
    const key = `refresh:${id}`;
    const deadline = o.now() + leaseMs + 5_000;
    // A verdict recorded from now on is this caller's answer too; one from before is not.
    const since = verdictMark(await this.records.get(id));
    for (let wait = 10; ; wait = Math.min(wait * 2, 200)) {
      const now = o.now();
      if (await o.storage.acquireLease(key, this.#owner, now + leaseMs, now)) {
        const renewal = setInterval(
          () => {
            const at = o.now();
            o.storage.acquireLease(key, this.#owner, at + leaseMs, at).catch(() => {});
          },
          Math.max(Math.floor(leaseMs / 3), 1),
        );
        (renewal as { unref?: () => void }).unref?.();
        try {
          const settled = await this.#settled(id, seen, force, since);
          if ('tokens' in settled) return settled.tokens;
          return await this.#observed(id, settled.current);
        } finally {
          clearInterval(renewal);
          await o.storage.releaseLease(key, this.#owner).catch(() => {});
        }
      }
      const settled = await this.#settled(id, seen, force, since);
      if ('tokens' in settled) return settled.tokens;
      // The holder is refreshing (or dead): a valid token needs no waiting.
      if (!force && stillValid(seen, o.now())) return seen;
      if (o.now() > deadline) {
        throw new KeywayError(
          'upstream_error',
          'another instance is refreshing this connection and has not finished',
        );
      }
      await sleep(wait);
    }
  }

  /**
   * What is settled of a refresh of `seen`: other tokens (another instance refreshed, or a
   * new authorization); or the verdict of an attempt made while this caller waited — the
   * connection's error, or a failure of this refresh token (the tokens served while still
   * valid, unless `force`d) — or of an older attempt still in its back-off, which holds a
   * caller that needs no new token; or `current`, the tokens to refresh.
   *
   * @throws {KeywayError} the error the connection is in, or the recorded failure's.
   */
  async #settled(
    id: string,
    seen: ConnectionTokens,
    force: boolean,
    since: VerdictMark,
  ): Promise<{ tokens: ConnectionTokens } | { current: ConnectionTokens }> {
    const record = await this.records.get(id);
    if (record === null) throw notFound(id);
    if (record.status !== 'active') throw inactiveError(record);
    const current = await this.records.tokensOf(record);
    if (current === null) throw inactiveError(record);
    if (current.access_token !== seen.access_token) return { tokens: current };
    const now = this.#deps.now();
    const standing = standingFailure(record, current, since, now);
    if (standing === null) return { current };
    const valid = !force && stillValid(current, now);
    if (valid) return { tokens: current };
    if (standing.as === 'hold') return { current };
    throw failureError(standing.failure);
  }

  /**
   * {@link Refresher.#refresh} in a `keyway.refresh` span, its outcome observed (docs/api.md
   * §16): `refreshed`, `kept` (the current token is still the answer), `superseded`,
   * `reauthorization_required` or `failed`.
   */
  async #observed(id: string, tokens: ConnectionTokens): Promise<ConnectionTokens> {
    const o = this.#deps;
    const record = await this.records.get(id);
    if (record === null) throw notFound(id);
    const note: { superseded?: true } = {};
    let outcome: RefreshOutcome = 'failed';
    try {
      return await inSpan(
        'keyway.refresh',
        { [PROVIDER]: record.providerId },
        async () => {
          const result = await this.#refresh(id, record, tokens, note);
          outcome = note.superseded ? 'superseded' : result === tokens ? 'kept' : 'refreshed';
          return result;
        },
        () => outcome,
      );
    } catch (error) {
      if (error instanceof KeywayError && error.code === 'reauthorization_required') {
        outcome = 'reauthorization_required';
      }
      throw error;
    } finally {
      o.observe({ kind: 'refresh', provider: record.providerId, outcome });
    }
  }

  async #refresh(
    id: string,
    record: ConnectionRecord,
    tokens: ConnectionTokens,
    note: { superseded?: true },
  ): Promise<ConnectionTokens> {
    const o = this.#deps;
    const now = o.now();
    const stillValid = tokens.expires_at === null || tokens.expires_at > now;
    // The grant the connection records says how its tokens are renewed (docs/api.md §14):
    // with the refresh token, or obtained again as the first were.
    const grant = grantNamed(connectionState(record).grant);
    const own = grant.ownTokens;
    if (tokens.refresh_token === null && !own) {
      // Nothing to refresh with: a valid token is still the best answer, even when forced.
      if (stillValid) return tokens;
      throw await this.records.requireReauthorization(
        id,
        {
          code: 'token_expired',
          description: 'the access token expired and there is no refresh token',
        },
        'the access token expired and cannot be refreshed: authorize again',
        tokens.generation,
      );
    }
    // The refresh token goes only to the server and client it came from, and only while
    // the provider still uses them: a provider re-pointed elsewhere never receives it.
    const auth = await authenticationOf(o, record.providerId, tokens.party, 'current');
    if (auth === null) {
      const { state } = await o.providers.resolve(record.providerId);
      const moved = partyChangeOf(state, tokens.party) ?? PARTY_CHANGED;
      throw await this.records.requireReauthorization(
        id,
        moved,
        moved.description,
        tokens.generation,
      );
    }
    const { state: provider } = await o.providers.resolve(record.providerId);
    let received: Received;
    try {
      const request = {
        providerId: record.providerId,
        provider,
        party: tokens.party,
        scopes: connectionState(record).scopes,
        auth,
        dpop: tokens.dpop,
      };
      received = { ...(await grant.renew(o, request, tokens)), generation: tokens.generation };
    } catch (error) {
      const code = await oauthErrorCode(error);
      if (own && code !== null && (CLIENT_REFUSED.has(code) || code === 'invalid_grant')) {
        // Asking again with the same client or assertion cannot succeed (SEP-1933: no retry).
        throw await this.records.requireReauthorization(
          id,
          describeOAuthFailure(error),
          `the authorization server refused the client's own grant (${code}): fix the provider's client or assertion ` +
            `source, then authorize again`,
          tokens.generation,
        );
      }
      if (
        code === 'invalid_client' &&
        (await o.providers.markRegistrationStale(
          record.providerId,
          tokens.party.issuer,
          tokens.party.client_id,
        ))
      ) {
        throw await this.records.requireReauthorization(
          id,
          FORGOTTEN_CLIENT,
          'the authorization server no longer knows the registered client: authorize again',
          tokens.generation,
        );
      }
      if (code === 'invalid_grant') {
        // Another instance may have refreshed (and the server rotated the refresh token)
        // after this one read the tokens, e.g. past an expired lease: its tokens are then
        // in storage, and the rejection is of a refresh token already replaced.
        const current = await this.records.currentTokens(id);
        if (
          current !== null &&
          current.generation === tokens.generation &&
          current.refresh_token !== tokens.refresh_token
        ) {
          note.superseded = true;
          return current;
        }
        throw await this.records.requireReauthorization(
          id,
          {
            code: 'invalid_grant',
            description:
              (error instanceof oauth.ResponseBodyError ? error.error_description : undefined) ??
              'the refresh token was rejected',
          },
          'the authorization server rejected the refresh token: authorize again',
          tokens.generation,
        );
      }
      // A transient failure: the connection stays as it is, and the verdict is recorded
      // with the refresh token it concerns, once, so no instance presents it again before
      // it may be tried once more.
      const failure = describeOAuthFailure(error);
      await this.records.update(id, (current) => {
        const state = connectionState(current);
        if (current.status !== 'active' || state.generation !== tokens.generation) return null;
        return {
          record: {
            ...current,
            state: {
              ...state,
              refresh_failure: transientVerdict(current, tokens, failure, o.now()),
            } satisfies ConnectionState,
          },
          event: {
            type: 'connection.failed',
            actor: 'system',
            resource: id,
            data: { error: failure.code, phase: 'refresh', token_still_valid: stillValid },
          },
        };
      });
      // While the current token is still valid, keep using it.
      if (stillValid) return tokens;
      throw new KeywayError(
        'upstream_error',
        `the token could not be refreshed: ${failure.code} (${failure.description})`,
        { cause: error },
      );
    }
    // The account an ID token names is the connection's label, not one of its tokens.
    const { answer, account, ...next } = received;
    const refreshedAt = o.now();
    let superseded = false;
    const written = await this.records.update(id, (current) => {
      const state = connectionState(current);
      // A newer authorization (or a provider change) happened while we refreshed: its
      // tokens win, and ours are dropped.
      if (current.status !== 'active' || state.generation !== tokens.generation) {
        superseded = true;
        return null;
      }
      const rotated = next.refresh_token !== tokens.refresh_token;
      // A new refresh token brings its own expiry (or none); an unrotated one keeps the old.
      const expiry = rotated
        ? refreshTokenExpiry(answer, refreshedAt)
        : state.refresh_token_expires_at === undefined
          ? {}
          : { refresh_token_expires_at: state.refresh_token_expires_at };
      return {
        record: {
          ...current,
          status: 'active',
          state: {
            ...state,
            refresh_token_expires_at: undefined,
            ...expiry,
            ...(rotated ? { rotating: true } : {}),
            ...(next.scope.length > 0 ? { scopes: next.scope } : {}),
            token_expires_at: next.expires_at,
            last_refreshed_at: refreshedAt,
            error: null,
            refresh_failure: undefined,
            refreshable: next.refresh_token !== null || own,
            ...(next.metadata === undefined ? {} : { metadata: next.metadata }),
            ...(answer === undefined ? {} : { token_response: answer }),
            ...(account === undefined ? {} : { account }),
          } satisfies ConnectionState,
        },
        tokens: next,
        event: {
          type: 'connection.refreshed',
          actor: 'system',
          resource: id,
          data: {
            token_expires_at: isoTimeOrNull(next.expires_at),
            refresh_token_rotated: next.refresh_token !== tokens.refresh_token,
          },
        },
      };
    });
    if (written === null)
      throw new KeywayError('not_found', `connection ${JSON.stringify(id)} was deleted meanwhile`);
    if (superseded) {
      const current = written.status === 'active' ? await this.records.tokensOf(written) : null;
      if (current === null) {
        throw new KeywayError(
          'connection_not_active',
          `connection ${JSON.stringify(id)} changed while it was refreshed: it is ${written.status}`,
        );
      }
      note.superseded = true;
      return current;
    }
    return next;
  }
}
