import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import { KeywayError } from '../contract/errors.js';
import { utf8 } from '../platform/bytes.js';
import type { ConnectionRecord } from '../storage/record-types.js';
import type { ConnectionState, ConnectionTokens } from '../storage/states.js';
import { connectionState } from '../storage/states.js';

/*
 * A refresh's failure is as single-flight as its success. A rotating server revokes the
 * whole grant when a consumed refresh token is presented again, and a refused one is refused
 * every time: so the verdict on a refresh token is recorded once, with the token it concerns,
 * and every caller on every instance reads it instead of presenting that token again.
 */

/** How long a transient failure stands before one more attempt: doubling, from 10 s to 10 min. */
const FIRST_RETRY_MS = 10_000;
const LAST_RETRY_MS = 600_000;

/** The name under which a verdict concerns a refresh token: a hash, never the token. */
export function refreshTokenKey(refreshToken: string | null): string {
  return refreshToken === null
    ? 'none'
    : bytesToHex(sha256(utf8(`keyway-refresh:${refreshToken}`))).slice(0, 32);
}

/** A recorded verdict on a refresh token, as a caller noted it when it began to wait. */
export type VerdictMark = { token: string; attempts: number } | null;

/** The verdict a connection holds now, to tell a later one from it. */
export function verdictMark(record: ConnectionRecord | null): VerdictMark {
  const failure = record === null ? undefined : connectionState(record).refresh_failure;
  return failure === undefined ? null : { token: failure.token, attempts: failure.attempts };
}

/**
 * What a caller makes of a failure recorded for the refresh of `tokens`: `read` — it was
 * recorded while the caller waited (`since`), so it is this caller's answer too; `hold` —
 * an older one still in its back-off, and the caller needs no new token now; else `null`,
 * the caller may try (the server may be back).
 */
export function standingFailure(
  record: ConnectionRecord,
  tokens: ConnectionTokens,
  since: VerdictMark,
  now: number,
): { failure: NonNullable<ConnectionState['refresh_failure']>; as: 'read' | 'hold' } | null {
  const failure = connectionState(record).refresh_failure;
  if (failure === undefined || failure.token !== refreshTokenKey(tokens.refresh_token)) return null;
  const newer =
    since === null || since.token !== failure.token || failure.attempts > since.attempts;
  if (newer) return { failure, as: 'read' };
  return failure.retry_at > now ? { failure, as: 'hold' } : null;
}

/** The verdict of a transient failure of `tokens`' refresh, counting the attempts on it. */
export function transientVerdict(
  record: ConnectionRecord,
  tokens: ConnectionTokens,
  failure: { code: string; description: string },
  now: number,
): NonNullable<ConnectionState['refresh_failure']> {
  const token = refreshTokenKey(tokens.refresh_token);
  const before = connectionState(record).refresh_failure;
  const attempts = before?.token === token ? before.attempts + 1 : 1;
  const wait = Math.min(FIRST_RETRY_MS * 2 ** (attempts - 1), LAST_RETRY_MS);
  return { token, ...failure, at: now, retry_at: now + wait, attempts };
}

/** The error a caller gets from a standing failure when no valid token is left. */
export function failureError(failure: { code: string; description: string }): KeywayError {
  return new KeywayError(
    'upstream_error',
    `the token could not be refreshed: ${failure.code} (${failure.description})`,
  );
}

/**
 * The error of a connection that is no longer active, as a caller waiting on its refresh gets
 * it: `reauthorization_required` when its refresh failed for good, else `connection_not_active`.
 */
export function inactiveError(record: ConnectionRecord): KeywayError {
  const { error } = connectionState(record);
  if (record.status === 'error' && error !== null) {
    return new KeywayError(
      'reauthorization_required',
      `connection ${JSON.stringify(record.id)} needs authorizing again: ${error.code} (${error.description})`,
    );
  }
  return new KeywayError(
    'connection_not_active',
    `connection ${JSON.stringify(record.id)} is ${record.status}: authorize it first`,
  );
}
