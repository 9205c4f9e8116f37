import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import type { z } from 'zod';
import { toBase64Url, utf8 } from '../platform/bytes.js';
import type { StoredState } from '../storage/record-types.js';
import type { SignInDeps } from './deps.js';

/*
 * The single-use state of sign-in (docs/api.md §17): each page's request handle, each code,
 * each refresh token is a random secret whose hash keys one record of the pending
 * authorizations, taken (read and removed in one step) when it is presented. What a
 * presented secret was used for once stays behind as a spent mark, so that presenting it
 * again is told apart from presenting nonsense: a replayed code or rotated refresh token
 * revokes the grant it produced.
 */

/** The provider id the pending records of sign-in carry (no provider is involved). */
const SIGN_IN = 'sign-in';

/** A fresh secret: 32 random bytes, base64url, with a prefix saying what it is. */
export function newSecret(deps: SignInDeps, prefix: string): string {
  return `${prefix}${toBase64Url(deps.randomBytes(32))}`;
}

/** The key a secret's record is stored under: hex SHA-256, never the secret. */
export const secretKey = (secret: string) => bytesToHex(sha256(utf8(secret)));

/** Stores `state` under a secret until `expiresAt`; `resource` names what it is about. */
export async function keep(
  deps: SignInDeps,
  secret: string,
  resource: string,
  state: StoredState,
  expiresAt: number,
): Promise<void> {
  await deps.storage.insertPendingAuthorization({
    stateHash: secretKey(secret),
    connectionId: resource,
    providerId: SIGN_IN,
    state,
    expiresAt,
    createdAt: deps.now(),
  });
}

/**
 * Takes the record of a presented secret, as one of `schemas` reads it: `null` when it is
 * unknown, expired, of another kind or already taken. One caller of many presenting the
 * same secret gets it.
 */
export async function take<S extends z.ZodType>(
  deps: SignInDeps,
  secret: string,
  schema: S,
): Promise<z.infer<S> | null> {
  if (secret === '' || secret.length > 200) return null;
  const record = await deps.storage.takePendingAuthorization(secretKey(secret), deps.now());
  if (record === null || record.providerId !== SIGN_IN) return null;
  // A record of another kind (a page's handle presented as a code) is not this use.
  const parsed = schema.safeParse(record.state);
  return parsed.success ? parsed.data : null;
}
