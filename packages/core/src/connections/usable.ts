import { KeywayError } from '../contract/errors.js';
import type { ConnectionRecord, VaultEntryRecord } from '../storage/record-types.js';
import { type ConnectionTokens, renewable } from '../storage/states.js';
import type { ConnectionDeps } from './deps.js';
import { readWithTokens, readWithTokensNow } from './hand-out.js';
import { type ConnectionRecords, notFound } from './records.js';
import type { Refresher } from './refresh.js';

/**
 * A connection's tokens ready for use: the connection active, its access token refreshed
 * first when it expires within the margin or when `force` asks (single-flight, §5). Shared
 * by hand-outs, the probe and the gateway; the caller checks the principal first. A value
 * when nothing had to be waited for, a promise otherwise; its errors may be thrown before
 * any promise (await it, or call it where a throw is caught as a rejection is).
 *
 * @throws {KeywayError} `not_found`, `connection_not_active`, `refresh_unavailable` (forced
 *   on a connection without a refresh token whose token is still valid),
 *   `reauthorization_required`, `upstream_error`.
 */
export function usableTokens(
  deps: Pick<ConnectionDeps, 'now' | 'storage'>,
  records: ConnectionRecords,
  refresher: Refresher,
  connectionId: string,
  force: boolean,
): Usable | Promise<Usable> {
  // Without waiting where the storage reads synchronously and the tokens are opened and
  // not due: the gateway's common case, with no promise between its request and its send.
  const now = readWithTokensNow(deps.storage, connectionId);
  if (now === undefined) return usableTokensRead(deps, records, refresher, connectionId, force);
  if (now === null) throw notFound(connectionId);
  const record = now.connection;
  const { vaultEntry } = now;
  const ready =
    force || record.status !== 'active' || vaultEntry === null
      ? undefined
      : records.openedTokens(record, vaultEntry);
  if (ready !== undefined && !refresher.due(ready)) return { record, tokens: ready };
  // Anything else as usableTokensOf has it: opened, refreshed, or refused.
  return usableTokensOf(deps, records, refresher, record, force, vaultEntry).then((tokens) => ({
    record,
    tokens,
  }));
}

/** A connection and its tokens ready for use ({@link usableTokens}). */
export interface Usable {
  record: ConnectionRecord;
  tokens: ConnectionTokens;
}

/** {@link usableTokens} on a storage that answers its reads as promises. */
async function usableTokensRead(
  deps: Pick<ConnectionDeps, 'now' | 'storage'>,
  records: ConnectionRecords,
  refresher: Refresher,
  connectionId: string,
  force: boolean,
): Promise<Usable> {
  // The connection and its sealed tokens in one read where the storage can.
  const read = await readWithTokens(deps.storage, connectionId);
  if (read === null) throw notFound(connectionId);
  const record = read.connection;
  return {
    record,
    tokens: await usableTokensOf(deps, records, refresher, record, force, read.vaultEntry),
  };
}

/** {@link usableTokens} of a connection already read (and its vault entry, when given). */
export async function usableTokensOf(
  deps: Pick<ConnectionDeps, 'now'>,
  records: ConnectionRecords,
  refresher: Refresher,
  record: ConnectionRecord,
  force: boolean,
  vaultEntry?: VaultEntryRecord | null,
): Promise<ConnectionTokens> {
  const connectionId = record.id;
  let tokens = record.status === 'active' ? await records.tokensOf(record, vaultEntry) : null;
  if (tokens === null) {
    throw new KeywayError(
      'connection_not_active',
      `connection ${JSON.stringify(connectionId)} is ${record.status}: authorize it first`,
    );
  }
  const expired = tokens.expires_at !== null && tokens.expires_at <= deps.now();
  if (force && !renewable(tokens) && !expired) {
    // Never a 200 with the same token: the caller asked for a new one (docs/api.md §5).
    throw new KeywayError(
      'refresh_unavailable',
      `connection ${JSON.stringify(connectionId)} holds no refresh token (the authorization server gave none), so it ` +
        `cannot be refreshed: authorize it again for a new token`,
    );
  }
  if (force || refresher.due(tokens))
    tokens = await refresher.refreshOnce(connectionId, tokens, force);
  return tokens;
}
