import type * as oauth from 'oauth4webapi';
import type {
  ConnectionTokens,
  OAuthParty,
  ProviderState,
  TokenAnswer,
} from '../storage/states.js';
import type { GrantDeps } from './deps.js';
import type { DpopKey } from './dpop.js';

/*
 * A grant is a strategy of a connection (docs/api.md §5, §14): how its tokens are obtained
 * and how they are renewed. Refresh and connect look the grant up by the name the
 * connection records, never by branching on its fields; DPoP is a property of the request,
 * honoured by every grant.
 */

/** The grants of a connection, by the name its state and tokens record. */
export type GrantName = 'authorization_code' | 'client_credentials' | 'jwt_bearer' | 'enterprise';

/** What every token request of a grant is made with. */
export interface GrantRequest {
  providerId: string;
  provider: ProviderState;
  /** The server and client the tokens come from, and go back to. */
  party: OAuthParty;
  scopes: readonly string[];
  /** How Keyway authenticates as the party's client. */
  auth: oauth.ClientAuth;
  /** The connection's DPoP key (RFC 9449): a proof on every token request when present. */
  dpop?: DpopKey | undefined;
}

/** The code of a consent, as the authorization code grant exchanges it (RFC 6749 §4.1.3). */
export interface AuthorizationCode {
  /** The redirect back's parameters. */
  query: URLSearchParams;
  /** The `state` the authorization request carried. */
  state: string;
  /** The `redirect_uri` of the authorization request, repeated. */
  redirectUri: string;
  /** The PKCE verifier, or `null` for a server that cannot do PKCE. */
  verifier: string | null;
  /** The provider's `token_params` when the authorization started. */
  tokenParams?: Record<string, string> | undefined;
}

/** What the first token request of a grant needs beyond its {@link GrantRequest}. */
export interface GrantInput {
  /** The authorization code grant: the code of the consent. */
  code?: AuthorizationCode;
  /** Token exchange (SEP-990): the user's identity assertion. */
  subjectToken?: string;
}

/** Tokens a grant obtained, and the token response described (never a token). */
export type ObtainedTokens = Omit<ConnectionTokens, 'generation'> & {
  answer?: TokenAnswer;
  /** The account the answer's ID token names (a label, never checked): the connection keeps it. */
  account?: string;
};

/** One grant: how a connection's tokens are obtained, and renewed. */
export interface Grant {
  readonly name: GrantName;
  /**
   * Its tokens are the client's own (no user): renewed by obtaining new ones as the first
   * were, never with a refresh token; a refusal is final until the operator acts.
   */
  readonly ownTokens: boolean;
  /**
   * A connection's first tokens from the party's token endpoint.
   *
   * @throws what oauth4webapi throws for a refused or malformed answer.
   */
  obtain(deps: GrantDeps, request: GrantRequest, input: GrantInput): Promise<ObtainedTokens>;
  /**
   * A connection's next tokens: the refresh token grant (RFC 6749 §6), or, for a grant of
   * {@link Grant.ownTokens}, new ones obtained as the first were.
   *
   * @throws what oauth4webapi throws for a refused or malformed answer.
   */
  renew(deps: GrantDeps, request: GrantRequest, tokens: ConnectionTokens): Promise<ObtainedTokens>;
}
