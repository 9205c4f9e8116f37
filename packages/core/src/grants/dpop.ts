import * as oauth from 'oauth4webapi';
import { setBounded } from '../platform/bounded.js';
import type { AuthorizationServerInfo, ProviderState } from '../storage/states.js';

/*
 * DPoP (RFC 9449; the MCP extension SEP-1932) for connections whose authorization server
 * asks for it: one ES256 key pair per connection, made at its code exchange and sealed in
 * the vault with its tokens; a proof on every token request and every request that
 * presents the token (`ath`), through oauth4webapi's DPoP handle; a server nonce
 * (`use_dpop_nonce`) retried once. A DPoP-bound token is useless without its key, which
 * never leaves the broker: such connections are inject-only (docs/api.md §13, §14).
 */

/** A connection's DPoP key pair, as sealed with its tokens (JWKs; the private one secret). */
export interface DpopKey {
  private_jwk: JsonWebKey;
  public_jwk: JsonWebKey;
}

const EC = { name: 'ECDSA', namedCurve: 'P-256' } as const;

/**
 * Whether a provider's new connections are DPoP-bound: it says so (`dpop: true`), or it is
 * inject-only and its authorization server takes ES256 proofs (RFC 9449 §5.1). A provider
 * whose tokens are handed out keeps Bearer tokens (docs/api.md §14).
 */
export function wantsDpop(
  provider: Pick<ProviderState, 'dpop' | 'hand_out'>,
  server: Pick<AuthorizationServerInfo, 'dpop_signing_alg_values_supported'>,
) {
  if (provider.dpop === true) return true;
  return (
    provider.hand_out === false &&
    server.dpop_signing_alg_values_supported?.includes('ES256') === true
  );
}

/** A new key pair for one connection. */
export async function newDpopKey(): Promise<DpopKey> {
  const pair = (await crypto.subtle.generateKey(EC, true, ['sign', 'verify'])) as CryptoKeyPair;
  return {
    private_jwk: await crypto.subtle.exportKey('jwk', pair.privateKey),
    public_jwk: await crypto.subtle.exportKey('jwk', pair.publicKey),
  };
}

/** Handles by public key: each keeps the nonces its servers sent, so proofs reuse them. */
const handles = new Map<string, oauth.DPoPHandle>();
const MAX_HANDLES = 1000;

/** The DPoP handle of a key (its private half imported unextractable). */
export async function dpopHandle(key: DpopKey): Promise<oauth.DPoPHandle> {
  const id = `${key.public_jwk.x}.${key.public_jwk.y}`;
  const known = handles.get(id);
  if (known !== undefined) return known;
  const privateKey = await crypto.subtle.importKey('jwk', key.private_jwk, EC, false, ['sign']);
  const publicKey = await crypto.subtle.importKey('jwk', key.public_jwk, EC, true, ['verify']);
  const handle = oauth.DPoP({}, { privateKey, publicKey });
  setBounded(handles, id, handle, MAX_HANDLES);
  return handle;
}

/** The options of a request with `key`'s proofs, or none without a key. */
export async function dpopOptions(key: DpopKey | undefined) {
  return key === undefined ? {} : { DPoP: await dpopHandle(key) };
}

/**
 * `send` once, and once more when the server asked for a nonce (RFC 9449 §8, §9): the
 * handle has kept the one it sent.
 */
export async function withNonceRetry<T>(send: () => Promise<T>): Promise<T> {
  try {
    return await send();
  } catch (error) {
    if (!oauth.isDPoPNonceError(error)) throw error;
    return send();
  }
}
