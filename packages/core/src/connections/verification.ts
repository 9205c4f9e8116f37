import { actorOf, assertCoversPath, type Principal } from '../auth/principal.js';
import { KeywayError } from '../contract/errors.js';
import { VerifyBody, type VerifyInput } from '../contract/schemas.js';
import { parseShape } from '../contract/validation.js';
import { hashFlowId } from '../grants/consent.js';
import {
  ConnectionTokensSchema,
  PendingRecordStateSchema,
  readSealed,
  readStored,
  TokenAnswerSchema,
} from '../storage/states.js';
import type { ConnectionDeps } from './deps.js';
import { type ConnectionRecords, VERIFICATION_TOKENS_KIND } from './records.js';
import { type ConnectionView, connectionView } from './view.js';

/**
 * Confirms a user-verification flow (API.md §5 "User verification"): the app, having
 * checked that the user who consented is its user, takes the flow once and the connection
 * becomes active with the tokens the callback sealed.
 *
 * @throws {KeywayError} `invalid_request` (unknown, expired or used flow), `insufficient_scope`,
 *   `not_found` (the connection was deleted meanwhile).
 */
export async function verifyFlow(
  deps: ConnectionDeps,
  records: ConnectionRecords,
  principal: Principal,
  input: VerifyInput,
): Promise<ConnectionView> {
  const o = deps;
  const { flow_id } = parseShape(VerifyBody, input);
  const flowHash = hashFlowId(flow_id);
  const taken = await o.storage.takePendingAuthorization(flowHash, o.now());
  const flow =
    taken === null ? null : readStored(PendingRecordStateSchema, taken.state, 'verification flow');
  if (taken === null || flow === null || flow.kind !== 'verification') {
    const message = 'this flow is unknown, expired or already used';
    throw new KeywayError('invalid_request', message, {
      details: [{ path: 'flow_id', message }],
    });
  }
  assertCoversPath(principal, taken.connectionId);
  const tokens = readSealed(
    // The token response's description waits with them, for the connection state.
    ConnectionTokensSchema.omit({ generation: true }).extend({
      answer: TokenAnswerSchema.optional(),
    }),
    await o.vault().open({
      kind: VERIFICATION_TOKENS_KIND,
      key: flowHash,
      ciphertext: flow.tokens,
      keyId: '',
    }),
    'verification tokens',
  );
  const written = await records.activate(
    taken.connectionId,
    tokens,
    flow.scopes,
    actorOf(principal),
  );
  if (written === null)
    throw new KeywayError('not_found', `no connection ${JSON.stringify(taken.connectionId)}`);
  return connectionView(written, o.now());
}
