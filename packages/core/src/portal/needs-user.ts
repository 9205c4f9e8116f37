import { UrlElicitationRequiredError } from '@modelcontextprotocol/server';
import type { Principal } from '../auth/principal.js';
import { setCoversPath } from '../auth/scope.js';
import type { AuthorizeResult } from '../connections/authorization.js';
import { isKeywayError, KeywayError } from '../contract/errors.js';
import { toBase64Url } from '../platform/bytes.js';
import { connectionState } from '../storage/states.js';
import type { PortalConnection } from './gathering.js';

/*
 * A connection of the portal that needs its user (docs/api.md §18): a URL elicitation with a
 * fresh consent URL when the caller may authorize through the provider, else an error that
 * says who must do what.
 */

/** The consent answer of a connection that needs its user (docs/api.md §18). */
export async function consentAnswer(
  hub: {
    authorize: (
      principal: Principal,
      providerId: string,
      input: { connection_id: string; scopes?: string[] },
    ) => Promise<AuthorizeResult>;
    randomBytes: (length: number) => Uint8Array;
  },
  principal: Principal,
  connection: PortalConnection,
  challenged: string[] | undefined,
): Promise<Error> {
  const { record, alias } = connection;
  const providerId = record.providerId;
  const mayAuthorize = principal.kind === 'root' || setCoversPath(principal.scopes, providerId);
  const what = `connection ${alias} (${record.id}) needs its user's consent (it is ${record.status})`;
  if (mayAuthorize) {
    try {
      const granted = connectionState(record).scopes;
      const started = await hub.authorize(principal, providerId, {
        connection_id: record.id,
        ...(challenged !== undefined && challenged.length > 0
          ? { scopes: [...new Set([...granted, ...challenged])] }
          : {}),
      });
      return new UrlElicitationRequiredError(
        [
          {
            mode: 'url',
            elicitationId: toBase64Url(hub.randomBytes(16)),
            url: started.authorization_url,
            message:
              `Keyway needs your consent to use ${providerId} for ${record.id}: ` +
              'open the link to authorize it, then retry.',
          },
        ],
        `This request needs the user to authorize ${alias}.`,
      );
    } catch (error) {
      // A provider without a consent page (client credentials, JWT bearer) says so below.
      if (!(isKeywayError(error) && error.code === 'invalid_request')) throw error;
    }
  }
  return new KeywayError(
    'reauthorization_required',
    `${what}: whoever manages provider ${providerId} must authorize it again ` +
      `(POST /api/oauth/authorize/${providerId} with connection_id ${record.id})`,
  );
}
