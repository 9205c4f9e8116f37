import { mcpCatalog } from '../catalog/mcp-profiles.js';
import { isoTime } from '../contract/time.js';
import { providerState } from '../providers/state.js';
import type { ConnectionRecord } from '../storage/record-types.js';
import { type ConnectionState, connectionState, renewable } from '../storage/states.js';
import type { ConnectionDeps } from './deps.js';
import type { ConnectionRecords } from './records.js';
import type { Refresher } from './refresh.js';

/*
 * Refresh ahead and the expiring notice (docs/connections.md "Refresh ahead"): a sweep of
 * the active connections, run in the background on every instance. A connection whose
 * refresh tokens rotate is refreshed before its access token expires — by the one instance
 * that takes its refresh lease — instead of at first use by whichever callers come; and a
 * refresh token whose end is known (`refresh_token_expires_in`, or the documented lifetime
 * of its catalog profile) is announced once, `connection.expiring`, while there is time to
 * authorize again.
 */

/** What the sweep knows of a provider from its catalog profile. */
interface ProviderFacts {
  /** The profile says its refresh tokens rotate. */
  rotating: boolean;
  /** The documented lifetime of a refresh token, ms; `null` when none is documented. */
  lifetimeMs: number | null;
}

const UNKNOWN: ProviderFacts = { rotating: false, lifetimeMs: null };

/** The facts of a provider's catalog profile (`mcp` or `oauth2`); none for others. */
async function factsOf(deps: ConnectionDeps, providerId: string): Promise<ProviderFacts> {
  let state: ReturnType<typeof providerState>;
  try {
    state = providerState(await deps.providers.require(providerId));
  } catch {
    return UNKNOWN;
  }
  const mcp = state.profile === undefined ? undefined : mcpCatalog().get(state.profile);
  if (mcp !== undefined) {
    const days = mcp.refresh_token_lifetime_days;
    return {
      rotating: mcp.refresh === 'rotating',
      lifetimeMs: days === undefined ? null : days * 86_400_000,
    };
  }
  const classic = state.oauth2?.profile;
  const profile =
    classic === undefined || classic === null ? undefined : deps.providers.profiles().get(classic);
  return { rotating: profile?.refresh === 'rotating', lifetimeMs: null };
}

/**
 * When the connection's current refresh token ends, and who said: its token answer, or its
 * profile's documented lifetime counted from its issue (the last rotation, else the
 * authorization). `null`: unknown.
 */
export function refreshTokenEnd(
  state: ConnectionState,
  facts: ProviderFacts,
): { at: number; source: 'token_response' | 'profile' } | null {
  if (state.refreshable !== true) return null;
  if (state.refresh_token_expires_at !== undefined)
    return { at: state.refresh_token_expires_at, source: 'token_response' };
  const issued = state.rotating
    ? (state.last_refreshed_at ?? state.authorized_at)
    : state.authorized_at;
  if (facts.lifetimeMs === null || issued === null) return null;
  return { at: issued + facts.lifetimeMs, source: 'profile' };
}

/** Every active connection, a page at a time. */
export async function* activeConnections(deps: ConnectionDeps): AsyncGenerator<ConnectionRecord> {
  let after: string | undefined;
  for (;;) {
    const page = await deps.storage.listConnections({
      status: 'active',
      limit: 200,
      ...(after === undefined ? {} : { after }),
    });
    yield* page;
    const last = page[page.length - 1];
    if (page.length < 200 || last === undefined) return;
    after = last.id;
  }
}

/** What one sweep did. */
export interface AheadOutcome {
  /** Connections whose access token was due for refresh ahead. */
  due: number;
  refreshed: number;
  failed: number;
  /** `connection.expiring` events sent. */
  expiring: number;
}

/**
 * One sweep: refresh ahead (mode `rotating`: connections whose server rotates refresh
 * tokens, seen or documented; `all`: every refreshable one) the connections whose access
 * token expires within twice the refresh margin (at most half its lifetime), and announce
 * the refresh tokens that end within the notice.
 */
export async function sweepAhead(
  deps: ConnectionDeps,
  records: ConnectionRecords,
  refresher: Refresher,
): Promise<AheadOutcome> {
  const outcome: AheadOutcome = { due: 0, refreshed: 0, failed: 0, expiring: 0 };
  const facts = new Map<string, ProviderFacts>();
  for await (const record of activeConnections(deps)) {
    const state = connectionState(record);
    let known = facts.get(record.providerId);
    if (known === undefined) {
      known = await factsOf(deps, record.providerId);
      facts.set(record.providerId, known);
    }
    if (dueAhead(deps, state, known)) {
      outcome.due++;
      const result = await refreshNow(records, refresher, record);
      if (result !== 'skipped') outcome[result]++;
      // Its refresh token may have rotated, with a new end: the next round judges that one.
      if (result === 'refreshed') continue;
    }
    if (await noticeExpiring(deps, records, record, state, known)) outcome.expiring++;
  }
  return outcome;
}

/**
 * Refreshes one connection of a sweep (its lease taken): `refreshed` with new tokens,
 * `failed` (recorded by the refresh: an event, the connection's error, or the current
 * tokens kept after a transient failure), `skipped` when it has nothing to refresh with,
 * or when the connection changed since the sweep read `record` (another instance refreshed
 * it: the next round judges the tokens it wrote).
 */
export async function refreshNow(
  records: ConnectionRecords,
  refresher: Refresher,
  record: ConnectionRecord,
): Promise<'refreshed' | 'failed' | 'skipped'> {
  try {
    const tokens = await records.tokensOf(record);
    if (tokens === null || !renewable(tokens)) return 'skipped';
    // The tokens are read now, the record was read by the sweep's list: the tokens judged due
    // are those only if the record has not been written since (its version). A refresh
    // writes the tokens and the record in one transaction, so the record read after the
    // tokens tells; without this, tokens another instance had just renewed were refreshed
    // again.
    const current = await records.get(record.id);
    if (current === null || current.version !== record.version) return 'skipped';
    const next = await refresher.refreshOnce(record.id, tokens);
    return next.access_token === tokens.access_token ? 'failed' : 'refreshed';
  } catch {
    return 'failed';
  }
}

/** Whether a connection's access token is due for refresh ahead. */
function dueAhead(deps: ConnectionDeps, state: ConnectionState, facts: ProviderFacts): boolean {
  const mode = deps.refreshAhead;
  if (mode === false || state.refreshable !== true || state.token_expires_at === null) return false;
  if (mode === 'rotating' && state.rotating !== true && !facts.rotating) return false;
  const lifetime = state.token_response?.expires_in;
  const window = Math.min(
    2 * deps.refreshMarginMs,
    typeof lifetime === 'number' ? (lifetime * 1000) / 2 : Number.POSITIVE_INFINITY,
  );
  return state.token_expires_at - deps.now() <= window;
}

/**
 * Sends `connection.expiring` once for a refresh token that ends within the notice: the
 * write of `expiring_noticed` is compare-and-set, so of instances sweeping at once one
 * sends it.
 *
 * @returns whether this call sent it.
 */
async function noticeExpiring(
  deps: ConnectionDeps,
  records: ConnectionRecords,
  record: ConnectionRecord,
  state: ConnectionState,
  facts: ProviderFacts,
): Promise<boolean> {
  const end = refreshTokenEnd(state, facts);
  if (end === null || state.expiring_noticed === end.at) return false;
  if (end.at - deps.now() > deps.expiringNoticeMs) return false;
  let sent = false;
  await records.update(record.id, (current) => {
    const now = connectionState(current);
    const still = refreshTokenEnd(now, facts);
    if (
      current.status !== 'active' ||
      still === null ||
      still.at !== end.at ||
      now.expiring_noticed === end.at
    )
      return null;
    sent = true;
    return {
      record: { ...current, state: { ...now, expiring_noticed: end.at } },
      event: {
        type: 'connection.expiring',
        actor: 'system',
        resource: current.id,
        data: {
          refresh_token_expires_at: isoTime(end.at),
          source: end.source,
          action: 'authorize the connection again before then (POST /api/oauth/authorize)',
        },
      },
    };
  });
  return sent;
}
