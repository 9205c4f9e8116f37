import * as oauth from 'oauth4webapi';
import { KeywayError } from '../contract/errors.js';
import { isoTimeOrNull, parseDuration } from '../contract/time.js';
import { toBase64Url } from '../platform/bytes.js';
import type { ConnectionRecord } from '../storage/records.js';
import {
  type ConnectionState,
  type ConnectionTokens,
  ownGrant,
  type ProviderState,
  type TokenAnswer,
} from '../storage/states.js';
import type { RefreshOutcome } from '../telemetry/observation.js';
import { inSpan, PROVIDER } from '../telemetry/tracing.js';
import { CLIENT_REFUSED, clientCredentialsTokens } from './client-credentials.js';
import { dpopOptions, withNonceRetry } from './dpop.js';
import {
  describeOAuthFailure,
  oauthErrorCode,
  oauthPartyOf,
  resourceParam,
  tokensFrom,
} from './party.js';
import { metadataOf, readTokenAnswer, tokenParamsOf, tokenRequestOptions } from './quirks.js';
import { type ConnectionRecords, notFound } from './state.js';
import { connectionState, FORGOTTEN_CLIENT, PARTY_CHANGED, partyChangeOf } from './view.js';

/** New tokens, and their token response described for the connection state. */
type Received = ConnectionTokens & { answer?: TokenAnswer };

export const REFRESH_IDLE =
  '"refreshIdleAfter" must be false, milliseconds (at least 1000) or a duration such as "7d"';

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

/**
 * Refresh (docs/api.md §5): single flight per connection, in this process (concurrent callers
 * join the running refresh) and across every instance sharing the storage (a lease).
 */
export class Refresher {
  /** Refreshes in flight in this process, by connection: concurrent callers share one. */
  readonly #refreshing = new Map<string, Promise<ConnectionTokens>>();
  /** This instance's name on leases. */
  readonly #owner: string;

  constructor(readonly records: ConnectionRecords) {
    this.#owner = toBase64Url(records.o.randomBytes(12));
  }

  /** Whether tokens are due: they expire within the refresh margin. */
  due(tokens: ConnectionTokens): boolean {
    const { o } = this.records;
    return tokens.expires_at !== null && tokens.expires_at - o.now() <= o.refreshMarginMs;
  }

  /** One refresh per connection in this process: later callers join the running one. */
  refreshOnce(id: string, seen: ConnectionTokens): Promise<ConnectionTokens> {
    let running = this.#refreshing.get(id);
    if (running === undefined) {
      running = this.#acrossInstances(id, seen).finally(() => this.#refreshing.delete(id));
      this.#refreshing.set(id, running);
    }
    return running;
  }

  /**
   * One refresh per connection across instances: take the storage lease, re-read the
   * tokens (another instance may have refreshed while we waited), refresh only if still
   * needed, release. Without the lease, wait for its holder's result, at most one lease
   * period and a margin by the broker's clock. The lease is renewed while the refresh runs,
   * so a slow server (or the discovery of a provider declared in code) never lets a second
   * instance start the same refresh.
   */
  async #acrossInstances(id: string, seen: ConnectionTokens): Promise<ConnectionTokens> {
    const { o } = this.records;
    const leaseMs = o.refreshLeaseMs;
    const key = `refresh:${id}`;
    const deadline = o.now() + leaseMs + 5_000;
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
          const current = await this.records.currentTokens(id);
          if (current === null)
            throw new KeywayError(
              'connection_not_active',
              `connection ${JSON.stringify(id)} has no tokens`,
            );
          // Someone refreshed while we waited for the lease: theirs is our result.
          if (current.access_token !== seen.access_token) return current;
          return await this.#observed(id, current);
        } finally {
          clearInterval(renewal);
          await o.storage.releaseLease(key, this.#owner).catch(() => {});
        }
      }
      const current = await this.records.currentTokens(id);
      if (current !== null && current.access_token !== seen.access_token) return current;
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
   * {@link Refresher.#refresh} in a `keyway.refresh` span, its outcome observed (docs/api.md
   * §16): `refreshed`, `kept` (the current token is still the answer), `superseded`,
   * `reauthorization_required` or `failed`.
   */
  async #observed(id: string, tokens: ConnectionTokens): Promise<ConnectionTokens> {
    const { o } = this.records;
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

  /** The refresh token grant at the party the tokens came from, read as its profile says. */
  async #refreshGrant(
    tokens: ConnectionTokens,
    provider: ProviderState,
    auth: oauth.ClientAuth,
  ): Promise<Received> {
    const { o } = this.records;
    const { as, client } = oauthPartyOf(tokens.party, true);
    // A DPoP-bound connection proves its key at each refresh too (RFC 9449 §5).
    const dpop = await dpopOptions(tokens.dpop);
    const result = await withNonceRetry(async () => {
      const response = await oauth.refreshTokenGrantRequest(
        as,
        client,
        auth,
        tokens.refresh_token as string,
        {
          ...tokenRequestOptions(o.outbound, provider.oauth2),
          ...dpop,
          additionalParameters: {
            ...tokenParamsOf(provider),
            ...resourceParam(tokens.party),
          },
        },
      );
      return oauth.processRefreshTokenResponse(
        as,
        client,
        await readTokenAnswer(response, provider.oauth2),
      );
    });
    const metadata = metadataOf(result, null, provider.oauth2, tokens.metadata);
    const next: Received = {
      ...tokensFrom(result, tokens, o.now(), 'refresh_token'),
      ...(tokens.dpop === undefined ? {} : { dpop: tokens.dpop }),
      ...(tokens.grant === undefined ? {} : { grant: tokens.grant }),
    };
    if (metadata !== undefined) next.metadata = metadata;
    return next;
  }

  async #refresh(
    id: string,
    record: ConnectionRecord,
    tokens: ConnectionTokens,
    note: { superseded?: true },
  ): Promise<ConnectionTokens> {
    const { o } = this.records;
    const now = o.now();
    const stillValid = tokens.expires_at === null || tokens.expires_at > now;
    // The client credentials grant: the next token is obtained as the first was (§14).
    const own = ownGrant(connectionState(record).grant);
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
      );
    }
    // The refresh token goes only to the server and client it came from, and only while
    // the provider still uses them: a provider re-pointed elsewhere never receives it.
    const auth = await this.records.authenticationOf(record.providerId, tokens.party, 'current');
    if (auth === null) {
      const { state } = await o.providers.resolve(record.providerId);
      const moved = partyChangeOf(state, tokens.party) ?? PARTY_CHANGED;
      throw await this.records.requireReauthorization(id, moved, moved.description);
    }
    const { state: provider } = await o.providers.resolve(record.providerId);
    let received: Received;
    try {
      if (own) {
        const obtained = await clientCredentialsTokens(
          this.records,
          record.providerId,
          provider,
          tokens.party,
          connectionState(record).scopes,
          tokens.dpop,
          auth,
        );
        received = { ...obtained, generation: tokens.generation };
      } else received = await this.#refreshGrant(tokens, provider, auth);
    } catch (error) {
      const code = await oauthErrorCode(error);
      if (own && code !== null && (CLIENT_REFUSED.has(code) || code === 'invalid_grant')) {
        // Asking again with the same client or assertion cannot succeed (SEP-1933: no retry).
        throw await this.records.requireReauthorization(
          id,
          describeOAuthFailure(error),
          `the authorization server refused the client's own grant (${code}): fix the provider's client or assertion source, then authorize again`,
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
        );
      }
      // A transient failure: the connection stays as it is, and the failure is recorded.
      const failure = describeOAuthFailure(error);
      await o.events.append({
        type: 'connection.failed',
        actor: 'system',
        resource: id,
        data: { error: failure.code, phase: 'refresh', token_still_valid: stillValid },
      });
      // While the current token is still valid, keep using it.
      if (stillValid) return tokens;
      throw new KeywayError(
        'upstream_error',
        `the token could not be refreshed: ${failure.code} (${failure.description})`,
        { cause: error },
      );
    }
    const { answer, ...next } = received;
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
      return {
        record: {
          ...current,
          status: 'active',
          state: {
            ...state,
            ...(next.scope.length > 0 ? { scopes: next.scope } : {}),
            token_expires_at: next.expires_at,
            last_refreshed_at: refreshedAt,
            error: null,
            refreshable: next.refresh_token !== null || own,
            ...(next.metadata === undefined ? {} : { metadata: next.metadata }),
            ...(answer === undefined ? {} : { token_response: answer }),
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
