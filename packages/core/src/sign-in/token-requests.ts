import { z } from 'zod';
import type { SignInDeps } from './deps.js';
import {
  createGrant,
  GrantRefused,
  refreshGrant,
  revokeGrant,
  revokePresented,
  spendCode,
  type TokenAnswer,
} from './grants.js';
import { verifierAnswers } from './pages.js';
import { take } from './pending.js';
import { CodeStateSchema, SpentStateSchema } from './shapes.js';

/*
 * The token endpoint (RFC 6749 §3.2, §4.1.3, §6) and the revocation endpoint (RFC 7009) of
 * Keyway's sign-in (docs/api.md §17). Clients are public: they name themselves with
 * `client_id`, and PKCE proves the code was theirs. A code is single use and bound to its
 * client, redirect URI, challenge and resource; a second redemption revokes what the first
 * one issued.
 */

/*
 * An error of Keyway's own OAuth endpoints (docs/api.md §17), in the vocabulary of the
 * RFCs rather than Keyway's API codes: the token and revocation endpoints answer
 * `{ error, error_description }` (RFC 6749 §5.2), registration its own codes (RFC 7591
 * §3.2.2). Never a secret in the description.
 */

/** The error codes of the token and registration endpoints. */
export type OAuthErrorCode =
  | 'invalid_request'
  | 'invalid_client'
  | 'invalid_grant'
  | 'unsupported_grant_type'
  | 'invalid_target'
  | 'invalid_redirect_uri'
  | 'invalid_client_metadata'
  | 'temporarily_unavailable';

export class OAuthError extends Error {
  override readonly name = 'OAuthError';

  constructor(
    readonly code: OAuthErrorCode,
    readonly description: string,
    /** 400, or 401 for `invalid_client` (RFC 6749 §5.2). */
    readonly status = code === 'invalid_client' ? 401 : 400,
  ) {
    super(description);
  }

  /** The answer's body. */
  toJSON(): { error: OAuthErrorCode; error_description: string } {
    return { error: this.code, error_description: this.description };
  }
}

/** Each form field of a token request once at most (RFC 6749 §3.2). */
function fieldsOf(form: URLSearchParams): Map<string, string> {
  const fields = new Map<string, string>();
  for (const [name, value] of form) {
    if (fields.has(name)) throw new OAuthError('invalid_request', `"${name}" is given twice`);
    fields.set(name, value);
  }
  return fields;
}

/** A refusal of the grant, as the token endpoint answers it. */
const invalidGrant = (reason: string) => new OAuthError('invalid_grant', reason);

/**
 * A token request.
 *
 * @throws {OAuthError} as RFC 6749 §5.2 names it.
 */
export async function tokenRequest(deps: SignInDeps, form: URLSearchParams): Promise<TokenAnswer> {
  const fields = fieldsOf(form);
  const clientId = fields.get('client_id');
  if (clientId === undefined || clientId === '') {
    throw new OAuthError('invalid_client', 'client_id is required (Keyway’s clients are public)');
  }
  const grantType = fields.get('grant_type');
  try {
    if (grantType === 'authorization_code') return await redeem(deps, fields, clientId);
    if (grantType === 'refresh_token') {
      const presented = fields.get('refresh_token');
      if (presented === undefined)
        throw new OAuthError('invalid_request', 'refresh_token is required');
      const answer = await refreshGrant(deps, presented, clientId);
      return answer;
    }
  } catch (error) {
    if (error instanceof GrantRefused) throw invalidGrant(error.message);
    throw error;
  }
  throw new OAuthError(
    'unsupported_grant_type',
    'Keyway takes authorization_code and refresh_token',
  );
}

/** The authorization code grant (RFC 6749 §4.1.3) with PKCE (RFC 7636 §4.5). */
async function redeem(
  deps: SignInDeps,
  fields: Map<string, string>,
  clientId: string,
): Promise<TokenAnswer> {
  const code = fields.get('code');
  if (code === undefined) throw new OAuthError('invalid_request', 'code is required');
  const record = await take(deps, code, z.union([CodeStateSchema, SpentStateSchema]));
  if (record === null) throw invalidGrant('the code is unknown, expired or already used');
  if (record.kind === 'sign_in_spent') {
    await revokeGrant(deps, record.grant, `client:${clientId}`, 'code_replayed');
    throw invalidGrant('the code was already used: what it issued is revoked');
  }
  if (record.client_id !== clientId) throw invalidGrant('the code was issued to another client');
  if (fields.get('redirect_uri') !== record.redirect_uri) {
    throw invalidGrant('redirect_uri is not the one of the authorization request');
  }
  if (!verifierAnswers(fields.get('code_verifier') ?? '', record.code_challenge)) {
    throw invalidGrant('code_verifier does not answer the code challenge');
  }
  const resource = fields.get('resource');
  if (resource !== undefined && resource !== record.resource) {
    throw new OAuthError('invalid_target', 'resource is not the one the code was issued for');
  }
  const { grant, answer } = await createGrant(deps, record);
  await spendCode(deps, code, grant);
  return answer;
}

/**
 * A revocation request (RFC 7009 §2.1): answered `200` whatever the token was, once a
 * client names itself.
 *
 * @throws {OAuthError} `invalid_request` without a token.
 */
export async function revocationRequest(deps: SignInDeps, form: URLSearchParams): Promise<void> {
  const fields = fieldsOf(form);
  const token = fields.get('token');
  if (token === undefined || token === '')
    throw new OAuthError('invalid_request', 'token is required');
  await revokePresented(deps, token, fields.get('client_id') ?? null);
}
