import { z } from 'zod';
import type { Principal } from '../auth/principal.js';
import { canonicalizeScopes, setCoversPath } from '../auth/scope.js';
import { isoTime } from '../contract/time.js';
import { toBase64Url } from '../platform/bytes.js';
import type { TokenRecord } from '../storage/record-types.js';
import { TOKEN_ID_BYTES } from '../tokens/format.js';
import type { SignInDeps } from './deps.js';
import { endpointPath } from './documents.js';
import { keep, newSecret, take } from './pending.js';
import {
  type CodeState,
  GRANT_KIND,
  type GrantEntry,
  GrantEntrySchema,
  RefreshStateSchema,
  type SignedIn,
  SpentStateSchema,
} from './shapes.js';

/*
 * A grant (docs/api.md §17): what one client may do at one endpoint for whoever signed in.
 * It is anchored by a broker token that is never shown: the delegated child of the pasted
 * token (`<name>.signin-<id>`), or for a user of the upstream provider a token of its own
 * (`signin-<id>`), bound to the endpoint and scoped to its path. Access tokens are the
 * anchor's children, so deleting or narrowing the pasted token, or the anchor, reaches them
 * on the next request. Refresh tokens are single use: each one rotates, and a rotated one
 * presented again revokes the grant.
 */

/** A token answer of the token endpoint (RFC 6749 §5.1). */
export interface TokenAnswer {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  refresh_token: string;
}

/** How long a spent code is remembered: a replay within it revokes what the code issued. */
const SPENT_CODE_MS = 3600 * 1000;

/** A refused token request (RFC 6749 §5.2): `invalid_grant`, the grant revoked if `revoke`. */
export class GrantRefused extends Error {
  override readonly name = 'GrantRefused';
}

/** The grant's anchor: the broker token its access tokens are children of. */
async function liveAnchor(deps: SignInDeps, grant: GrantEntry): Promise<TokenRecord | null> {
  const anchor = await deps.storage.findLiveTokenByName(grant.anchor, deps.now());
  if (anchor === null || anchor.audience !== grant.endpoint) return null;
  // Narrowed away from the endpoint: the grant can issue nothing any more.
  return setCoversPath(anchor.scopes, endpointPath(grant.endpoint)) ? anchor : null;
}

/** A grant's entry, or `null`. */
export async function readGrant(deps: SignInDeps, id: string): Promise<GrantEntry | null> {
  const entry = await deps.storage.getVaultEntry(GRANT_KIND, id);
  if (entry === null) return null;
  return GrantEntrySchema.parse(JSON.parse(await deps.vault().open(entry)));
}

async function writeGrant(deps: SignInDeps, grant: GrantEntry): Promise<void> {
  const sealed = await deps
    .vault()
    .seal({ kind: GRANT_KIND, key: grant.id }, JSON.stringify(grant));
  await deps.storage.putVaultEntry(sealed, deps.now());
}

/**
 * Revokes a grant: its anchor token and every access token under it, and its entry, with
 * one `grant.revoked` event. @returns whether there was one.
 */
export async function revokeGrant(
  deps: SignInDeps,
  id: string,
  actor: string,
  reason: 'revoked' | 'code_replayed' | 'refresh_token_replayed' | 'client_mismatch',
): Promise<boolean> {
  const grant = await readGrant(deps, id);
  if (grant === null) return false;
  await deps.storage.deleteTokenTree(grant.anchor, deps.now());
  return deps.events.recorded(
    {
      type: 'grant.revoked',
      actor,
      resource: grant.endpoint,
      data: { grant: grant.id, client_id: grant.client_id, reason },
    },
    (events) => deps.storage.deleteVaultEntry(GRANT_KIND, grant.id, events),
  );
}

/** Mints an access token under the anchor, bound to the endpoint. */
async function accessToken(
  deps: SignInDeps,
  anchor: TokenRecord,
  generation: number,
): Promise<{ token: string; expiresIn: number }> {
  const now = deps.now();
  const { token, idHash } = deps.codec.issue(deps.randomBytes(TOKEN_ID_BYTES));
  const expiresAt = Math.min(now + deps.settings.accessTokenTtl * 1000, anchor.expiresAt);
  const record: TokenRecord = {
    idHash,
    name: `${anchor.name}.a${generation}`,
    scopes: anchor.scopes,
    expiresAt,
    createdAt: now,
    createdBy: `token:${anchor.name}`,
    ...(anchor.audience === undefined ? {} : { audience: anchor.audience }),
    ...(anchor.tools === undefined ? {} : { tools: anchor.tools }),
  };
  // No event: a grant's events are its creation and its revocation, never a refresh.
  if (!(await deps.storage.insertToken(record, now))) {
    throw new GrantRefused('the grant cannot issue a token now; authorize again');
  }
  return { token, expiresIn: Math.max(1, Math.floor((expiresAt - now) / 1000)) };
}

/** Issues a refresh token of `generation` for the grant. */
async function refreshToken(
  deps: SignInDeps,
  grant: GrantEntry,
  generation: number,
): Promise<string> {
  const secret = newSecret(deps, 'kwr_');
  await keep(
    deps,
    secret,
    grant.endpoint,
    { kind: 'sign_in_refresh', grant: grant.id, client_id: grant.client_id, generation },
    grant.expires_at,
  );
  return secret;
}

/** The principal a grant's tokens are delegated from, live, or why there is none. */
async function parentOf(
  deps: SignInDeps,
  signedIn: SignedIn,
  path: string,
): Promise<{ name: string | null; expiresAt: number; tools?: string[] } | string> {
  if (signedIn.method === 'oidc') {
    return { name: null, expiresAt: Number.POSITIVE_INFINITY };
  }
  const parent = await deps.storage.findLiveTokenByName(signedIn.name, deps.now());
  if (parent === null || parent.idHash !== signedIn.id_hash) {
    return 'the token you signed in with has been deleted or has expired';
  }
  if (!setCoversPath(parent.scopes, path)) {
    return 'the token you signed in with no longer covers this endpoint';
  }
  // The portal's tool globs of the pasted token bind its grants too (docs/api.md §18).
  return {
    name: parent.name,
    expiresAt: parent.expiresAt,
    ...(parent.tools === undefined ? {} : { tools: parent.tools }),
  };
}

/**
 * Creates the grant of a redeemed code: its anchor, its first access and refresh tokens, its
 * entry, and one `grant.created` event.
 *
 * @throws {GrantRefused} when whoever signed in can no longer grant the endpoint.
 */
export async function createGrant(
  deps: SignInDeps,
  code: CodeState,
): Promise<{ grant: GrantEntry; answer: TokenAnswer }> {
  const now = deps.now();
  const path = endpointPath(code.endpoint);
  const parent = await parentOf(deps, code.signed_in, path);
  if (typeof parent === 'string') throw new GrantRefused(parent);
  const id = toBase64Url(deps.randomBytes(12));
  const label = `signin-${id}`;
  const name = parent.name === null ? label : `${parent.name}.${label}`;
  if (name.length > 240) {
    throw new GrantRefused('the name of the token you signed in with is too long to delegate from');
  }
  const expiresAt = Math.min(now + deps.settings.grantTtl * 1000, parent.expiresAt);
  const { idHash } = deps.codec.issue(deps.randomBytes(TOKEN_ID_BYTES));
  const anchor: TokenRecord = {
    idHash,
    name,
    scopes: canonicalizeScopes([path]),
    expiresAt,
    createdAt: now,
    createdBy: parent.name === null ? 'root' : `token:${parent.name}`,
    audience: code.endpoint,
    ...(parent.tools === undefined ? {} : { tools: parent.tools }),
  };
  const grant: GrantEntry = {
    id,
    client_id: code.client_id,
    client_name: code.client_name,
    verified_host: code.verified_host,
    endpoint: code.endpoint,
    resource: code.resource,
    signed_in: code.signed_in,
    anchor: name,
    created_at: now,
    expires_at: expiresAt,
    last_used_at: now,
    generation: 1,
  };
  const inserted = await deps.events.recorded(
    {
      type: 'grant.created',
      actor: parent.name === null ? `sign-in:${code.signed_in.method}` : `token:${parent.name}`,
      resource: code.endpoint,
      data: {
        grant: id,
        client_id: code.client_id,
        expires_at: isoTime(expiresAt),
      },
    },
    (events) => deps.storage.insertToken(anchor, now, events),
  );
  if (!inserted) throw new GrantRefused('the grant could not be created; authorize again');
  await writeGrant(deps, grant);
  const access = await accessToken(deps, anchor, 1);
  return {
    grant,
    answer: {
      access_token: access.token,
      token_type: 'Bearer',
      expires_in: access.expiresIn,
      refresh_token: await refreshToken(deps, grant, 1),
    },
  };
}

/** Remembers a redeemed code, so that a replay revokes the grant it created. */
export async function spendCode(deps: SignInDeps, code: string, grant: GrantEntry): Promise<void> {
  await keep(
    deps,
    code,
    grant.endpoint,
    { kind: 'sign_in_spent', grant: grant.id },
    deps.now() + SPENT_CODE_MS,
  );
}

/**
 * The refresh token grant (RFC 6749 §6) with rotation: the presented token is spent, a new
 * one issued with a new access token. A spent one presented again, or one presented by
 * another client, revokes the grant (RFC 9700 §4.14.2).
 *
 * @throws {GrantRefused} `invalid_grant`.
 */
export async function refreshGrant(
  deps: SignInDeps,
  presented: string,
  clientId: string,
): Promise<TokenAnswer> {
  const record = await take(deps, presented, z.union([RefreshStateSchema, SpentStateSchema]));
  if (record === null) throw new GrantRefused('the refresh token is unknown or has expired');
  if (record.kind === 'sign_in_spent') {
    await revokeGrant(deps, record.grant, `client:${clientId}`, 'refresh_token_replayed');
    throw new GrantRefused('the refresh token was already used: the grant is revoked');
  }
  if (record.client_id !== clientId) {
    await revokeGrant(deps, record.grant, `client:${clientId}`, 'client_mismatch');
    throw new GrantRefused('the refresh token was issued to another client: the grant is revoked');
  }
  const grant = await readGrant(deps, record.grant);
  if (grant === null || grant.generation !== record.generation) {
    throw new GrantRefused('the grant has been revoked or has expired');
  }
  // Spent from here on: presented again, it revokes the grant.
  await keep(
    deps,
    presented,
    grant.endpoint,
    { kind: 'sign_in_spent', grant: grant.id },
    grant.expires_at,
  );
  const anchor = await liveAnchor(deps, grant);
  if (anchor === null) {
    await revokeGrant(deps, grant.id, `client:${clientId}`, 'revoked');
    throw new GrantRefused('the grant has been revoked, narrowed away or has expired');
  }
  const generation = grant.generation + 1;
  const access = await accessToken(deps, anchor, generation);
  await writeGrant(deps, { ...grant, generation, last_used_at: deps.now() });
  return {
    access_token: access.token,
    token_type: 'Bearer',
    expires_in: access.expiresIn,
    refresh_token: await refreshToken(deps, grant, generation),
  };
}

/**
 * Revokes what a presented token belongs to (RFC 7009): a refresh token revokes its grant;
 * an access token issued to a client is deleted. Anything else is ignored, as RFC 7009 §2.2
 * says (the client cannot tell).
 */
export async function revokePresented(
  deps: SignInDeps,
  presented: string,
  clientId: string | null,
): Promise<void> {
  if (presented.startsWith('kwr_')) {
    // Whoever holds a refresh token may end its grant: revoking only ever takes access away.
    const record = await take(deps, presented, z.union([RefreshStateSchema, SpentStateSchema]));
    if (record !== null) {
      await revokeGrant(deps, record.grant, `client:${clientId ?? 'unknown'}`, 'revoked');
    }
    return;
  }
  const idHash = deps.codec.open(presented);
  if (idHash === null) return;
  const record = await deps.storage.findTokenByIdHash(idHash);
  // Only a token issued to a client (bound to an endpoint) may be revoked this way.
  if (record === null || record.audience === undefined) return;
  await deps.storage.deleteTokenTree(record.name, deps.now());
}

/** A grant as the console and the API show it. */
export interface GrantView {
  id: string;
  client_id: string;
  client_name: string | null;
  /** The host the client's metadata document proved; `null`: registered, unverified. */
  verified_host: string | null;
  /** `mcp/<connection path>`. */
  endpoint: string;
  /** Who signed in: a token's name, or the user at the identity provider. */
  user: string;
  created_at: string;
  expires_at: string;
  /** When the client last obtained an access token. */
  last_used_at: string;
}

export function grantView(grant: GrantEntry): GrantView {
  return {
    id: grant.id,
    client_id: grant.client_id,
    client_name: grant.client_name,
    verified_host: grant.verified_host,
    endpoint: grant.endpoint,
    user: grant.signed_in.method === 'token' ? grant.signed_in.name : grant.signed_in.display,
    created_at: isoTime(grant.created_at),
    expires_at: isoTime(grant.expires_at),
    last_used_at: isoTime(grant.last_used_at),
  };
}

/**
 * Whether `principal` may see and revoke a grant: the root, or a token whose delegation
 * tree the grant's anchor is in (the token signed in with, or an ancestor of it).
 */
export function managesGrant(principal: Principal, grant: GrantEntry): boolean {
  if (principal.kind === 'root') return true;
  return principal.audience === undefined && grant.anchor.startsWith(`${principal.name}.`);
}
