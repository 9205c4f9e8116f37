import { AUTHORIZATION_CODE } from './authorization-code.js';
import { CLIENT_CREDENTIALS, JWT_BEARER } from './client-credentials.js';
import type { Grant, GrantName } from './grant.js';
import { ENTERPRISE } from './token-exchange.js';

/** Every grant, by the name a connection records (docs/api.md §14). */
const GRANTS: { readonly [N in GrantName]: Grant } = {
  authorization_code: AUTHORIZATION_CODE,
  client_credentials: CLIENT_CREDENTIALS,
  jwt_bearer: JWT_BEARER,
  enterprise: ENTERPRISE,
};

/**
 * The grant of a connection or provider, by the name it records: absent is a user's consent
 * (the authorization code grant).
 */
export function grantNamed(name: GrantName | undefined): Grant {
  return GRANTS[name ?? 'authorization_code'];
}
