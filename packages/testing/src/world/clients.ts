import { assertionProblem } from './assertion.js';
import { oauthError } from './http.js';
import type { RegisteredClient } from './options.js';
import type { WorldState } from './state.js';

/* The clients the world's authorization server knows, and how they authenticate (RFC 6749 §2.3). */

const JWT_BEARER = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

export function createClients(world: WorldState) {
  const { opt, issuerString, endpoint, now, clients } = world;

  /** The client behind a `client_id`; a URL client is known when documents are supported. */
  function clientOf(clientId: string): RegisteredClient | null {
    const known = clients.get(clientId);
    if (known !== undefined) return known;
    if (opt('clientIdMetadataDocuments', false) && clientId.startsWith('https://')) {
      return {
        client_id: clientId,
        token_endpoint_auth_method: 'none',
        redirect_uris: [],
        grant_types: ['authorization_code', 'refresh_token'],
        application_type: 'web',
        client_secret_expires_at: 0,
        via: 'metadata_document',
      };
    }
    return null;
  }

  /** Client authentication at the token and revocation endpoints (RFC 6749 §2.3). */
  async function authenticateClient(
    request: Request,
    form: URLSearchParams,
  ): Promise<RegisteredClient | Response> {
    const header = request.headers.get('authorization');
    let clientId = form.get('client_id');
    let secret: string | null = null;
    let method = 'none';
    const assertion = form.get('client_assertion');
    if (form.get('client_assertion_type') === JWT_BEARER && assertion !== null) {
      // RFC 7523 §3: the client is the assertion's subject.
      const payload = assertion.split('.')[1] ?? '';
      try {
        const claims = JSON.parse(atob(payload.replace(/-/g, '+').replace(/_/g, '/')));
        clientId = typeof claims.sub === 'string' ? claims.sub : null;
      } catch {
        clientId = null;
      }
      const client = clientId === null ? null : clientOf(clientId);
      if (client === null) return oauthError(401, 'invalid_client', 'unknown client');
      if (client.token_endpoint_auth_method !== 'private_key_jwt')
        return oauthError(
          401,
          'invalid_client',
          `this client authenticates with ${client.token_endpoint_auth_method}`,
        );
      const problem = await assertionProblem(
        assertion,
        { iss: client.client_id, sub: client.client_id },
        client.public_jwk,
        [issuerString, endpoint('token')],
        now(),
        world.seenJtis,
      );
      return problem === null ? client : oauthError(401, 'invalid_client', problem);
    }
    if (header?.toLowerCase().startsWith('basic ')) {
      const decoded = atob(header.slice(6));
      const colon = decoded.indexOf(':');
      const parts = colon === -1 ? [decoded] : [decoded.slice(0, colon), decoded.slice(colon + 1)];
      const [id, pass] =
        opt('basicCredentials', 'form') === 'raw'
          ? parts
          : parts.map((part) => decodeURIComponent(part.replace(/\+/g, ' ')));
      clientId = id ?? null;
      secret = pass ?? null;
      method = 'client_secret_basic';
    } else if (form.has('client_secret')) {
      secret = form.get('client_secret');
      method = 'client_secret_post';
    }
    const client = clientId === null ? null : clientOf(clientId);
    if (client === null) return oauthError(401, 'invalid_client', 'unknown client');
    // A server that reads the secret from the body only: Basic is no authentication to it.
    const postOnly = opt('clientSecretPostOnly', false);
    if (postOnly && method === 'client_secret_basic')
      return oauthError(401, 'invalid_client', 'client authentication failed');
    const registered =
      postOnly && client.client_secret !== undefined
        ? 'client_secret_post'
        : client.token_endpoint_auth_method;
    if (registered !== method) {
      return oauthError(
        401,
        'invalid_client',
        `this client authenticates with ${client.token_endpoint_auth_method}`,
      );
    }
    if (method !== 'none' && secret !== client.client_secret)
      return oauthError(401, 'invalid_client', 'wrong secret');
    if (client.client_secret_expires_at !== 0 && client.client_secret_expires_at * 1000 <= now()) {
      return oauthError(401, 'invalid_client', 'the client secret has expired');
    }
    return client;
  }

  return { clientOf, authenticateClient };
}
