import type { Principal } from '../auth/principal.js';
import { KeywayError } from '../contract/errors.js';
import { listPage, type Page } from '../contract/pagination.js';
import { GrantListQuery } from '../contract/schemas.js';
import { parseQuery } from '../contract/validation.js';
import { SignInClients } from './clients.js';
import type { SignInDeps } from './deps.js';
import {
  authorizationServerMetadata,
  authorizationServerMetadataPath,
  protectedResourceMetadata,
  resourceMetadataUrl,
} from './documents.js';
import {
  type GrantView,
  grantView,
  managesGrant,
  readGrant,
  revokeGrant,
  type TokenAnswer,
} from './grants.js';
import { type SignInAnswer, SignInAuthorization } from './pages.js';
import { GRANT_KIND, type GrantEntry, GrantEntrySchema } from './shapes.js';
import { OAuthError, revocationRequest, tokenRequest } from './token-requests.js';
import { UpstreamProvider } from './upstream.js';

/** The query of {@link SignInService.grants}: `limit` (1–500), `cursor`. */
export type GrantListQueryInput = { limit?: number; cursor?: string };

/**
 * Keyway as the authorization server of its own MCP endpoints (docs/api.md §17), so that an
 * MCP client reaches a connection by its URL alone and never holds an upstream token: its
 * metadata, the authorization endpoint's pages, the token, registration and revocation
 * endpoints, and the grants it made. Off unless `signIn` is configured: then every method
 * but {@link SignInService.enabled} throws `not_found`.
 *
 * @see [docs/api.md §17](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#17-sign-in-for-mcp-clients-keyway-as-the-authorization-server-of-its-mcp-endpoints)
 */
export class SignInService {
  readonly #deps: SignInDeps | null;
  readonly #clients: SignInClients | null;
  readonly #authorization: SignInAuthorization | null;
  readonly #upstream: UpstreamProvider | null;

  constructor(deps: SignInDeps | null) {
    this.#deps = deps;
    this.#clients = deps === null ? null : new SignInClients(deps);
    this.#authorization =
      deps === null || this.#clients === null ? null : new SignInAuthorization(deps, this.#clients);
    this.#upstream = deps?.settings.oidc ? new UpstreamProvider(deps) : null;
  }

  /** Whether sign-in is on. */
  get enabled(): boolean {
    return this.#deps !== null;
  }

  #on(): { deps: SignInDeps; clients: SignInClients; authorization: SignInAuthorization } {
    if (this.#deps === null || this.#clients === null || this.#authorization === null) {
      throw new KeywayError('not_found', 'sign-in for MCP clients is not turned on');
    }
    return { deps: this.#deps, clients: this.#clients, authorization: this.#authorization };
  }

  /** The issuer: the deployment's base URL. */
  get issuer(): string {
    return this.#on().deps.issuer;
  }

  /** The authorization server metadata (RFC 8414), and the path it is served at. */
  metadata(): { path: string; document: Record<string, unknown> } {
    const { issuer } = this.#on().deps;
    return {
      path: authorizationServerMetadataPath(issuer),
      document: authorizationServerMetadata(issuer),
    };
  }

  /** The protected-resource metadata (RFC 9728) of an endpoint (`mcp/<connection path>`). */
  resourceMetadata(endpoint: string): Record<string, unknown> {
    return protectedResourceMetadata(this.#on().deps.issuer, endpoint);
  }

  /** Where an endpoint's protected-resource metadata is: its challenge names it. */
  resourceMetadataUrl(endpoint: string): string {
    return resourceMetadataUrl(this.#on().deps.issuer, endpoint);
  }

  /** `GET /oauth/authorize`. `binding`: the browser's binding cookie, if any. */
  authorize(query: URLSearchParams, binding: string | null): Promise<SignInAnswer> {
    return this.#on().authorization.begin(query, binding);
  }

  /** The sign-in form with a pasted broker token. */
  signInWithToken(
    request: string,
    token: string,
    binding: string | null,
    clientAddress: string | null,
  ): Promise<SignInAnswer> {
    return this.#on().authorization.withToken(request, token, binding, clientAddress);
  }

  /** The sign-in form's other way: to the upstream OpenID provider. */
  async signInUpstream(request: string, binding: string | null): Promise<SignInAnswer> {
    const { authorization } = this.#on();
    const taken = await authorization.forUpstream(request, binding);
    if ('step' in taken) return taken;
    const upstream = this.#upstream;
    if (upstream === null || !this.#on().deps.settings.methods.includes('oidc')) {
      return authorization.afterUpstream(taken.request, 'this way of signing in is not turned on');
    }
    // The request's next handle is the provider's `state`.
    const pending = { ...taken.request };
    const { url, verifier, nonce } = await upstream.authorizationUrl('');
    const state = await authorization.upstreamPending(pending, verifier, nonce);
    const location = new URL(url);
    location.searchParams.set('state', state);
    return { step: { kind: 'redirect', location: location.href }, binding: null };
  }

  /** Where the upstream provider sends the user back. */
  async upstreamCallback(query: URLSearchParams, binding: string | null): Promise<SignInAnswer> {
    const { authorization } = this.#on();
    const state = query.get('state') ?? '';
    const request = await authorization.takeForUpstream(state, binding);
    if (request === null || this.#upstream === null) {
      return {
        step: {
          kind: 'error',
          title: 'Start again',
          message:
            'This sign-in has expired, was already used, or was opened in another browser. ' +
            'Start again from your MCP client.',
        },
        binding: null,
      };
    }
    return authorization.afterUpstream(
      request,
      await this.#upstream.signedIn(query, request, state),
    );
  }

  /** The consent form: `approve` or `deny`. */
  decide(request: string, decision: string, binding: string | null): Promise<SignInAnswer> {
    return this.#on().authorization.decide(request, decision, binding);
  }

  /**
   * `POST /oauth/token`.
   *
   * @throws {OAuthError} as RFC 6749 §5.2 names it.
   */
  token(form: URLSearchParams): Promise<TokenAnswer> {
    return tokenRequest(this.#on().deps, form);
  }

  /** `POST /oauth/revoke` (RFC 7009). @throws {OAuthError} `invalid_request`. */
  revoke(form: URLSearchParams): Promise<void> {
    return revocationRequest(this.#on().deps, form);
  }

  /**
   * `POST /oauth/register` (RFC 7591): a public client.
   *
   * @throws {OAuthError} `invalid_redirect_uri`, `invalid_client_metadata`;
   *   {@link KeywayError} `rate_limited`.
   */
  async register(body: unknown, clientAddress: string | null): Promise<Record<string, unknown>> {
    try {
      return await this.#on().clients.register(body, clientAddress);
    } catch (error) {
      if (!(error instanceof KeywayError) || error.code !== 'invalid_request') throw error;
      const field = error.details?.[0]?.path;
      throw new OAuthError(
        field === 'redirect_uris' ? 'invalid_redirect_uri' : 'invalid_client_metadata',
        error.message,
      );
    }
  }

  /** The live grants `principal` may see, ordered by id (docs/api.md §1.4 pages). */
  grants(principal: Principal, query?: GrantListQueryInput): Promise<Page<GrantView>> {
    const { deps } = this.#on();
    return listPage(
      parseQuery(GrantListQuery, query),
      async ({ limit, after }) => {
        const found: GrantEntry[] = [];
        let cursor = after;
        for (;;) {
          const page = await deps.storage.listVaultEntries({
            kind: GRANT_KIND,
            limit: 200,
            ...(cursor === undefined ? {} : { after: cursor }),
          });
          for (const entry of page) {
            const grant = GrantEntrySchema.parse(JSON.parse(await deps.vault().open(entry)));
            if (grant.expires_at > deps.now() && managesGrant(principal, grant)) found.push(grant);
            if (found.length >= limit) return found;
          }
          if (page.length < 200) return found;
          cursor = page.at(-1)?.key;
        }
      },
      (grant) => grant.id,
      grantView,
    );
  }

  /** Revokes a grant `principal` manages. @throws {KeywayError} `not_found`. */
  async revokeGrant(principal: Principal, id: string): Promise<void> {
    const { deps } = this.#on();
    const grant = await readGrant(deps, id);
    if (grant === null || !managesGrant(principal, grant)) {
      throw new KeywayError('not_found', 'no such grant');
    }
    const actor = principal.kind === 'root' ? 'root' : `token:${principal.name}`;
    await revokeGrant(deps, id, actor, 'revoked');
  }

  /** Forgets clients registered and unused for 30 days. @returns how many. */
  forgetIdleClients(): Promise<number> {
    return this.#clients === null ? Promise.resolve(0) : this.#clients.forgetIdle();
  }
}
