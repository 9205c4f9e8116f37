import * as oauth from 'oauth4webapi';
import { libraryOptions } from '../outbound/oauth-fetch.js';
import { isInSubtree } from '../storage/contract.js';
import type { SignInDeps } from './deps.js';
import { endpointPath, SIGN_IN_PATHS } from './documents.js';
import { fillNamespace } from './namespace.js';
import type { RequestState, SignedIn } from './shapes.js';

/*
 * Sign-in through the operator's OpenID provider (docs/api.md §17): Keyway is its client
 * (authorization code with PKCE and a nonce, the ID token checked by oauth4webapi), and the
 * user lands in the namespace the provider's claims fill. Every request goes through the
 * guarded fetch.
 */

/** How long the provider's metadata is kept before it is read again. */
const METADATA_TTL_MS = 10 * 60 * 1000;

/** The upstream provider of one broker: its metadata, read once in a while. */
export class UpstreamProvider {
  readonly #deps: SignInDeps;
  #metadata: { server: oauth.AuthorizationServer; until: number } | null = null;

  constructor(deps: SignInDeps) {
    this.#deps = deps;
  }

  #settings() {
    const oidc = this.#deps.settings.oidc;
    if (oidc === null) throw new Error('the upstream way of signing in is not configured');
    return oidc;
  }

  get #client(): oauth.Client {
    return { client_id: this.#settings().clientId };
  }

  get #auth(): oauth.ClientAuth {
    const secret = this.#settings().clientSecret;
    return secret === null ? oauth.None() : oauth.ClientSecretPost(secret);
  }

  get #redirectUri(): string {
    return `${this.#deps.issuer}${SIGN_IN_PATHS.upstreamCallback}`;
  }

  /** The provider's metadata (OpenID Connect Discovery), cached. */
  async #server(): Promise<oauth.AuthorizationServer> {
    const now = this.#deps.now();
    if (this.#metadata !== null && this.#metadata.until > now) return this.#metadata.server;
    const issuer = new URL(this.#settings().issuer);
    const response = await oauth.discoveryRequest(issuer, {
      algorithm: 'oidc',
      ...libraryOptions(this.#deps.outbound),
    });
    const server = await oauth.processDiscoveryResponse(issuer, response);
    this.#metadata = { server, until: now + METADATA_TTL_MS };
    return server;
  }

  /**
   * Where to send the user: the provider's authorization URL for a request handle (its
   * `state`), with a fresh PKCE verifier and nonce for the request to keep.
   */
  async authorizationUrl(state: string): Promise<{ url: string; verifier: string; nonce: string }> {
    const server = await this.#server();
    if (server.authorization_endpoint === undefined) {
      throw new Error('the identity provider publishes no authorization endpoint');
    }
    const verifier = oauth.generateRandomCodeVerifier();
    const nonce = oauth.generateRandomNonce();
    const url = new URL(server.authorization_endpoint);
    url.searchParams.set('response_type', 'code');
    url.searchParams.set('client_id', this.#settings().clientId);
    url.searchParams.set('redirect_uri', this.#redirectUri);
    url.searchParams.set('scope', this.#settings().scopes.join(' '));
    url.searchParams.set('state', state);
    url.searchParams.set('nonce', nonce);
    url.searchParams.set('code_challenge', await oauth.calculatePKCECodeChallenge(verifier));
    url.searchParams.set('code_challenge_method', 'S256');
    return { url: url.href, verifier, nonce };
  }

  /**
   * The user the provider's answer signed in, in the namespace their claims fill, or why
   * not, in words for the user (the provider refused, the claims fill no namespace, the
   * namespace does not cover the endpoint).
   */
  async signedIn(
    query: URLSearchParams,
    request: RequestState,
    state: string,
  ): Promise<SignedIn | string> {
    const upstream = request.upstream;
    if (upstream === null) return 'the sign-in was not waiting for the identity provider';
    const server = await this.#server();
    let params: URLSearchParams;
    try {
      params = oauth.validateAuthResponse(server, this.#client, query, state);
    } catch (error) {
      if (error instanceof oauth.AuthorizationResponseError) {
        const detail = error.error_description ? ` (${error.error_description})` : '';
        return `the identity provider refused: ${error.error}${detail}`;
      }
      return 'the identity provider’s answer could not be checked';
    }
    let claims: oauth.IDToken;
    try {
      const response = await oauth.authorizationCodeGrantRequest(
        server,
        this.#client,
        this.#auth,
        params,
        this.#redirectUri,
        upstream.verifier,
        libraryOptions(this.#deps.outbound),
      );
      const result = await oauth.processAuthorizationCodeResponse(server, this.#client, response, {
        expectedNonce: upstream.nonce,
        requireIdToken: true,
      });
      const idToken = oauth.getValidatedIdTokenClaims(result);
      if (idToken === undefined) return 'the identity provider sent no ID token';
      claims = idToken;
    } catch {
      return 'the identity provider did not complete the sign-in';
    }
    const settings = this.#settings();
    const filled = fillNamespace(settings.namespace, claims);
    if ('problem' in filled) return `Keyway cannot place you in its namespace: ${filled.problem}`;
    const path = endpointPath(request.endpoint);
    if (!isInSubtree(filled.namespace, path)) {
      return `your namespace is ${filled.namespace}, which does not hold ${path}`;
    }
    const display =
      (claims.email_verified === true && typeof claims.email === 'string' ? claims.email : null) ??
      (typeof claims.preferred_username === 'string' ? claims.preferred_username : null) ??
      claims.sub;
    return {
      method: 'oidc',
      subject: `${server.issuer} ${claims.sub}`,
      namespace: filled.namespace,
      display,
    };
  }
}
