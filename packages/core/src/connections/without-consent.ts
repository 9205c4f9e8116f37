import { actorOf, assertCoversPath, type Principal } from '../auth/principal.js';
import { parseResourcePath } from '../auth/resource-path.js';
import { KeywayError, OutboundError } from '../contract/errors.js';
import { AuthorizeBody, type AuthorizeInput } from '../contract/schemas.js';
import { parseShape } from '../contract/validation.js';
import { authenticationOf } from '../grants/client-auth.js';
import { requestedScopes } from '../grants/consent.js';
import { newDpopKey, wantsDpop } from '../grants/dpop.js';
import { grantNamed } from '../grants/lookup.js';
import { describeOAuthFailure } from '../grants/token-endpoint.js';
import { EnterpriseRefused } from '../grants/token-exchange.js';
import { currentParty } from '../providers/party.js';
import { connectionState } from '../storage/states.js';
import type { ConnectionDeps } from './deps.js';
import type { ConnectionRecords } from './records.js';
import { type ConnectionView, connectionView } from './view.js';

/*
 * Authorize for a provider whose tokens need no consent page (docs/api.md §14): the grant
 * the provider names obtains them at once.
 */

/**
 * Authorize for a provider whose tokens need no consent page: client credentials and JWT
 * bearer obtain the token at once; `enterprise` exchanges the user's ID token
 * (`subject_token`) for it. The connection is active with it (created when new) and
 * answered as its view. A refusal leaves an active connection active and a new one in
 * `error`, as a refused consent does.
 *
 * @throws {KeywayError} `invalid_request` (`redirect_to` or `verify_user`: there is no
 *   browser; `subject_token` missing for `enterprise`, given for another), `invalid_path`,
 *   `insufficient_scope`, `not_found`, `conflict`, `upstream_error` (the server refused or
 *   failed; the connection says why).
 */
export async function connectWithoutConsent(
  deps: ConnectionDeps,
  records: ConnectionRecords,
  principal: Principal,
  providerId: string,
  input: AuthorizeInput,
): Promise<ConnectionView> {
  const provider = parseResourcePath(providerId);
  const shape = parseShape(AuthorizeBody, input);
  const connectionId = parseResourcePath(shape.connection_id, 'connection_id');
  const { state } = await deps.providers.forAuthorization(provider);
  const name = state.grant ?? 'client_credentials';
  for (const field of ['redirect_to', 'verify_user'] as const) {
    if (shape[field] !== undefined) {
      const message = `provider ${JSON.stringify(provider)} uses the ${name} grant: no browser, no "${field}"`;
      throw new KeywayError('invalid_request', message, { details: [{ path: field, message }] });
    }
  }
  if ((shape.subject_token === undefined) === (name === 'enterprise')) {
    const message =
      name === 'enterprise'
        ? `provider ${JSON.stringify(provider)} is enterprise-managed: "subject_token" is the user's ID token from ` +
          `its identity provider`
        : '"subject_token" is for a provider of mode "enterprise"';
    throw new KeywayError('invalid_request', message, {
      details: [{ path: 'subject_token', message }],
    });
  }
  assertCoversPath(principal, connectionId);
  assertCoversPath(principal, provider);
  const existing = await records.get(connectionId);
  if (existing !== null && existing.providerId !== provider) {
    throw new KeywayError(
      'conflict',
      `connection ${JSON.stringify(connectionId)} belongs to provider ${JSON.stringify(existing.providerId)}`,
    );
  }
  const party = currentParty(state);
  if (party === null) throw new KeywayError('internal_error', `provider ${provider} has no client`);
  const scopes = requestedScopes(
    shape.scopes,
    state,
    existing === null ? null : connectionState(existing),
  );
  const actor = actorOf(principal);
  const incarnation = await records.ensure(existing, {
    id: connectionId,
    providerId: provider,
    scopes,
    actor,
  });
  if (incarnation === null) throw new KeywayError('not_found', 'the connection was deleted');
  const auth = await authenticationOf(deps, provider, party, 'current');
  if (auth === null) {
    throw new KeywayError(
      'reauthorization_required',
      `provider ${JSON.stringify(provider)} no longer uses this client: authorize again`,
    );
  }
  // DPoP (RFC 9449) as for consent.
  const dpop = wantsDpop(state, state.authorization_server) ? await newDpopKey() : undefined;
  let tokens: Awaited<ReturnType<ReturnType<typeof grantNamed>['obtain']>>;
  try {
    tokens = await grantNamed(name).obtain(
      deps,
      { providerId: provider, provider: state, party, scopes, auth, dpop },
      shape.subject_token === undefined ? {} : { subjectToken: shape.subject_token },
    );
  } catch (error) {
    // Keyway's own refusals go as they are; a server that could not be reached is the
    // grant's failure, recorded on the connection.
    if (error instanceof KeywayError && !(error instanceof OutboundError)) throw error;
    const failure =
      error instanceof EnterpriseRefused ? error.failure : describeOAuthFailure(error);
    await records.recordFailure(connectionId, failure);
    throw new KeywayError(
      'upstream_error',
      `the ${name} grant was refused: ${failure.code} (${failure.description})`,
      { cause: error },
    );
  }
  const { answer: _, ...kept } = tokens;
  const written = await records.activate(connectionId, kept, scopes, actor, name);
  if (written === null) throw new KeywayError('not_found', 'the connection was deleted meanwhile');
  return connectionView(written, deps.now());
}
