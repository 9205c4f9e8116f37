/** Where the MCP server publishes its protected-resource metadata (RFC 9728). */
export type MetadataLocation =
  /** Only in the 401 challenge's `resource_metadata`, at a URL no well-known rule finds. */
  | 'header'
  /** Only at the path-inserted well-known URL, with no `resource_metadata` in the challenge. */
  | 'path'
  /** Only at the root well-known URL, with no `resource_metadata` in the challenge. */
  | 'root'
  /** At this URL, named in the challenge. */
  | { url: string };

/** Where the authorization server publishes its metadata. */
export type AuthorizationServerMetadataLocation =
  /** RFC 8414: `/.well-known/oauth-authorization-server<path>`. */
  | 'oauth'
  /** OpenID Connect, path-inserted: `/.well-known/openid-configuration<path>`. */
  | 'openid-inserted'
  /** OpenID Connect, appended: `<path>/.well-known/openid-configuration`. */
  | 'openid-appended';

/** How a token endpoint writes its answers: each field a quirk of some real server. */
export interface TokenResponseQuirks {
  /** `token_type` as given (any case); `null` leaves it out. Default `Bearer`. */
  tokenType?: string | null;
  /** `expires_in` as a number (default), a string, left out, or `0`. */
  expiresIn?: 'number' | 'string' | 'absent' | 'zero';
  /** `scope` space-separated (default), left out, comma-separated, or padded with spaces. */
  scope?: 'space' | 'absent' | 'comma' | 'padded';
  /** An error answered with status 200 and an `error` field. */
  errorsWithStatus200?: boolean;
  /** An `id_token` (an unsigned JWT naming `alice`, `alice@example.test`) beside the access token. */
  idToken?: boolean;
}

/**
 * Quirks of classic OAuth 2 APIs, as the `oauth2` template's profiles describe them
 * (docs/api.md §15): each switch reproduces how some real server behaves.
 */
export interface ClassicQuirks {
  /** The endpoints at other URLs than the issuer's (a profile's own). */
  endpoints?: { authorize?: string; token?: string; refresh?: string; revoke?: string };
  /** `ignored`: no PKCE — no challenge needed at consent, no verifier checked. Default `required`. */
  pkce?: 'required' | 'ignored';
  /** How the authorization request separates its scopes. Default a space. */
  scopeSeparator?: ' ' | ',';
  /** The parameter the scopes come in: `user_scope` for Slack's user tokens. Default `scope`. */
  scopeParam?: 'scope' | 'user_scope';
  /** Authorization parameters the server requires, with their values (`access_type=offline`). */
  requiredAuthorizationParams?: Record<string, string>;
  /** The token request's body: a body of the other format is refused. Default `form`. */
  tokenRequestFormat?: 'form' | 'json';
  /** Headers every token request must carry, with their values. */
  requiredTokenHeaders?: Record<string, string>;
  /** Answers (errors too, with status 200) form-encoded, as GitHub's without `Accept: application/json`. */
  formEncodedAnswers?: boolean;
  /** `ok: true` on every answer and `ok: false` with status 200 on every error, as Slack. */
  okField?: boolean;
  /**
   * The connection's tokens nested under this key, while the top level holds another
   * access token (Slack's `authed_user` beside its bot token).
   */
  nestTokensUnder?: string;
  /**
   * Errors named and described in other fields than RFC 6749's `error` and
   * `error_description` (Notion: `code` and `message`), with the error's status.
   */
  errorFields?: { error: string; description: string };
  /** Fields added to every token answer (`instance_url`, `team: { id }`). */
  answerExtra?: Record<string, unknown>;
  /** Parameters added to the redirect back (QuickBooks' `realmId`). */
  redirectExtra?: Record<string, string>;
  /**
   * An API served under this base (the proxy's upstream): any request with a valid access
   * token answers `200` with what it received — `{ method, url, headers, body }`, every
   * header but `authorization` — and without one `401 invalid_token`.
   */
  apiBase?: string;
  /**
   * A `GET` with a valid access token at `url` answers `answer` (Atlassian's
   * `accessible-resources`, for a profile's `after_connect`); without one, `401`.
   */
  afterConnect?: { url: string; answer: unknown };
}

/** What a faulty endpoint does. */
export type Failure =
  /** `500` with an OAuth error body. */
  | 'server_error'
  /** Never answers (until the request's signal aborts). */
  | 'timeout'
  /** `200` with a body that is not JSON. */
  | 'malformed_json'
  /** `200` with a 2 MiB JSON body. */
  | 'oversized';

/** The endpoints a failure can be injected into. */
export type Endpoint =
  | 'probe'
  | 'resource_metadata'
  | 'authorization_server_metadata'
  | 'registration'
  | 'client_metadata_document'
  | 'token'
  | 'revocation'
  | 'mcp';

/** Options of {@link createTestWorld}. Every one has a default that makes a conformant world. */
export interface TestWorldOptions {
  /** The MCP endpoint. Default `https://mcp.example.test/mcp`. */
  resourceUrl?: string;
  /** The authorization server's issuer (may have a path). Default `https://auth.example.test`. */
  issuer?: string;
  metadataLocation?: MetadataLocation;
  authorizationServerMetadata?: AuthorizationServerMetadataLocation;
  /** Offer dynamic client registration (RFC 7591). Default true. */
  dynamicRegistration?: boolean;
  /** Advertise `client_id_metadata_document_supported`. Default false. */
  clientIdMetadataDocuments?: boolean;
  /** `code_challenge_methods_supported`; `null` leaves it out. Default `['S256']`. */
  codeChallengeMethods?: string[] | null;
  /** The `scope` of the 401 challenge, if any. */
  challengeScope?: string;
  /** `scopes_supported` of the protected-resource metadata, if any. */
  resourceScopesSupported?: string[];
  /** `scopes_supported` of the authorization server metadata, if any. */
  serverScopesSupported?: string[];
  /** `token_endpoint_auth_methods_supported`. Default `['client_secret_basic', 'client_secret_post', 'none']`. */
  tokenEndpointAuthMethods?: string[];
  /**
   * A `resource` in the metadata other than the resource URL: a mismatch, or a matching
   * prefix such as the pathless origin. The authorization server takes exactly this value
   * as the audience.
   */
  metadataResource?: string;
  /** An `issuer` in the server metadata other than the one its URL was built from (mismatch). */
  metadataIssuer?: string;
  /**
   * Fields merged over the authorization server's metadata, as a misbehaving or hostile
   * server would publish them (e.g. `{ authorization_endpoint: 'javascript:alert(1)' }`).
   */
  serverMetadataOverrides?: Record<string, unknown>;
  /** Also list a second, unrelated authorization server (after the first). */
  extraAuthorizationServer?: string;
  /** Advertise `authorization_response_iss_parameter_supported` and send `iss`. Default true. */
  issParameter?: boolean;
  /** Issue a new refresh token on every refresh. Default true. */
  rotateRefreshTokens?: boolean;
  /**
   * Issue refresh tokens at all. Default true; `false` gives an access token only, as many
   * servers do for some clients.
   */
  issueRefreshTokens?: boolean;
  /**
   * Issue a refresh token for `offline_access` only when the authorization request carried
   * `prompt=consent`, as an OpenID provider must (OpenID Connect Core §11) and
   * `oidc-provider` does. Default false.
   */
  offlineAccessNeedsConsentPrompt?: boolean;
  /** How the token endpoint writes its answers, as real servers do (each a quirk of one). */
  tokenResponse?: TokenResponseQuirks;
  /**
   * What the consent page does with a `client_id` it does not know: show its own error page
   * (`consent()` throws, as RFC 6749 §4.1.2.1 asks), or redirect back with
   * `error=invalid_client`, as some servers do. Default `error_page`.
   */
  unknownClientAtConsent?: 'error_page' | 'redirect';
  /**
   * The revocation endpoint refuses access tokens with `400 unsupported_token_type` (RFC
   * 7009 §2.2.1), as servers with self-contained access tokens do.
   */
  revocationRefusesAccessTokens?: boolean;
  /** Access-token lifetime, seconds. Default 3600. */
  accessTokenLifetime?: number;
  /** Lifetime of a dynamically registered client secret, seconds; 0 = never expires. Default 0. */
  clientSecretLifetime?: number;
  /**
   * The registration endpoint is advertised but refuses every request with this status and
   * OAuth error: GitHub's remote MCP server answers `422`, Figma's `403`. A registered
   * application's credentials are then the way in. Default: registration works.
   */
  registrationRefused?: { status: 400 | 403 | 422; error?: string; description?: string };
  /**
   * Register only clients whose `client_name` is one of these; any other registration is
   * refused with `403`. Figma's remote MCP server registers only the MCP clients of its
   * catalog and answers others `403 Forbidden`
   * (https://developers.figma.com/docs/figma-mcp-server/remote-server-installation/,
   * https://www.figma.com/mcp-catalog/). Default: any name.
   */
  registrationClientNames?: string[];
  /**
   * Registration refuses a redirect URI that is not https, on a loopback host too
   * (`invalid_redirect_uri`), as AppSignal's MCP server does. Default false: plain http is
   * taken for a `native` client on a loopback host (RFC 8252 §7.3).
   */
  registrationHttpsOnly?: boolean;
  /** The status of a successful registration answer: RFC 7591 says 201, some send 200. Default 201. */
  registrationStatus?: 200 | 201;
  /** Leave `client_secret_expires_at` out of the registration answer (a secret that never expires). Default false. */
  omitSecretExpiry?: boolean;
  /** The client id and secret the next registrations issue (e.g. with `-`, `:`, `%`, space, non-ASCII). Default random. */
  issuedClient?: { client_id?: string; client_secret?: string };
  /**
   * How the token endpoint reads `client_secret_basic`: `form` decodes id and secret as
   * RFC 6749 §2.3.1 says; `raw` compares them undecoded, as some servers do. Default `form`.
   */
  basicCredentials?: 'form' | 'raw';
  /** Quirks of a classic OAuth 2 API (the `oauth2` template). */
  classic?: ClassicQuirks;
  /**
   * Accept the JWT bearer grant (RFC 7523 §2.1, workload identity): ES256 assertions that
   * `issuer` signed with the key of `publicJwk`, for this server, unexpired.
   */
  jwtBearer?: { issuer: string; publicJwk: JsonWebKey };
  /** Endpoints that fail, and how. */
  failures?: Partial<Record<Endpoint, Failure>>;
  /** A scope `tools/call` requires; without it the MCP server answers 403 insufficient_scope. */
  toolScope?: string;
  /**
   * A server of the 2025-03-26 revision (fixed at creation): no protected-resource metadata
   * (the challenge names none, the well-known URLs answer 404), and the authorization server
   * at the MCP server's origin, with its metadata at `/.well-known/oauth-authorization-server`
   * (`metadata`), or with none and the default endpoints `/authorize`, `/token`, `/register`
   * (`defaults`). Default: neither, a current server.
   */
  legacy?: 'metadata' | 'defaults';
  /**
   * What the token endpoint does when a rotated (already used) refresh token comes back:
   * `reject` it (`invalid_grant`), or `revoke-family`: reject it and revoke every token of
   * that grant (RFC 9700 §4.14.2), as servers that detect replay do. Notion's hosted MCP
   * server answers `invalid_grant` "OAuth grant revoked" and logs out every session of the
   * grant (its MCP client guide, which tells clients not to retry such a refresh:
   * https://github.com/makenotion/notion-cookbook/blob/main/docs/mcp-client-integration.md);
   * Atlassian rotates its refresh tokens on every use and refuses a spent one with
   * "Unknown or invalid refresh token"
   * (https://developer.atlassian.com/cloud/oauth/getting-started/refresh-tokens). Default
   * `reject`.
   */
  refreshTokenReuse?: 'reject' | 'revoke-family';
  /**
   * Rotation with a grace window: a refresh token rotated away less than this many seconds
   * ago works once more (it rotates again), as long as its successor was not used; later,
   * it is a reuse. Linear rotates its refresh tokens
   * (https://linear.app/docs/oauth/authentication) and has been seen to take the previous
   * one for a while after, then answer "Grant not found" (the window is not documented
   * there). Default 0: none.
   */
  refreshTokenReuseGraceSeconds?: number;
  /**
   * The `error_description` of a refused refresh token (`invalid_grant`), as the server
   * writes it: Notion "OAuth grant revoked", Linear "Grant not found", Atlassian "Unknown or
   * invalid refresh token". Default "unknown or revoked refresh token".
   */
  invalidGrantDescription?: string;
  /**
   * A refresh token not used within this many seconds of its issue is refused at its first
   * use (`invalid_grant`). Miro's refresh tokens rotate and expire 60 days after issue
   * (https://developers.miro.com/reference/get-new-access-token-using-refresh-token): a
   * connection left unused that long finds its token refused on first use. Seconds here, so
   * that a test runs it. Default 0: they live as long as the grant.
   */
  refreshTokenUnusedLifetimeSeconds?: number;
  /**
   * Refresh tokens end this many seconds after their issue, used or not, and every answer
   * that issues one says so in `refresh_token_expires_in`. GitHub Apps' user refresh tokens
   * last six months and their answers carry `refresh_token_expires_in`
   * (https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/refreshing-user-access-tokens).
   * Seconds here, so that a test runs it. Default 0: no stated end.
   */
  refreshTokenLifetimeSeconds?: number;
  /**
   * The RFC 8707 `resource` values the authorization server takes, each compared exactly
   * (character for character: a trailing `/` is another value). Default: only the one the
   * protected-resource metadata publishes, as Microsoft Entra ID does — it refuses any
   * other with AADSTS9010010 (its error reference:
   * https://learn.microsoft.com/en-us/entra/identity-platform/reference-error-codes). Sentry's
   * MCP server takes its origin or its `/mcp` path (https://docs.sentry.io/product/sentry-mcp/).
   */
  acceptedResources?: string[];
  /**
   * The `error_description` of a refused `resource` (`invalid_target`), as the server
   * writes it: Entra's "AADSTS9010010: The resource parameter provided in the request
   * doesn't match with the requested scopes." Default "resource mismatch".
   */
  invalidTargetDescription?: string;
  /**
   * The token endpoint takes the client secret in the request body only
   * (`client_secret_post`), whatever the client was registered with, and its metadata lists
   * no methods (which RFC 8414 §2 reads as `client_secret_basic`). HubSpot's MCP server
   * wants a pre-registered MCP auth app whose secret goes in the body
   * (https://developers.hubspot.com/docs/apps/developer-platform/build-apps/integrate-with-the-remote-hubspot-mcp-server).
   * Default false.
   */
  clientSecretPostOnly?: boolean;
  /**
   * Whether a refresh must repeat the authorization's RFC 8707 `resource` (some servers
   * refuse a refresh without it: `invalid_target`). Default `optional`.
   */
  resourceOnRefresh?: 'required' | 'optional';
  /** The clock, epoch ms. Default `Date.now`. */
  now?: () => number;
}

/** A client the authorization server knows. */
export interface RegisteredClient {
  client_id: string;
  client_secret?: string;
  token_endpoint_auth_method: string;
  redirect_uris: string[];
  grant_types: string[];
  application_type: string;
  /** The `client_name` it registered with, if any. */
  client_name?: string;
  registration_access_token?: string;
  client_secret_expires_at: number;
  /** `private_key_jwt`: the client's public key (ES256), which its assertions verify with. */
  public_jwk?: JsonWebKey;
  /** How it came to be known. */
  via: 'dynamic' | 'metadata_document' | 'preregistered';
}

/** Counters, for asserting what a flow did. */
export interface WorldStats {
  probes: number;
  registrations: number;
  /** Clients deleted by their registration access token (RFC 7592 §2.3). */
  unregistrations: number;
  authorizations: number;
  codeExchanges: number;
  refreshes: number;
  revocations: number;
  mcpCalls: number;
  /** Client credentials grants answered (RFC 6749 §4.4). */
  clientCredentialsGrants: number;
  /** JWT bearer grants asked for (RFC 7523 §2.1), accepted or not. */
  jwtBearerGrants: number;
  /** Requests to the classic API (`classic.apiBase`, `classic.afterConnect`) with a valid token. */
  apiCalls: number;
  /** Refresh requests that presented a refresh token already used once. */
  refreshTokenReuses: number;
  /** Refresh tokens refused at their first use for being older than their unused lifetime. */
  refreshTokensExpiredUnused: number;
}

/** A test world: one MCP server, one authorization server, in memory. */
export interface TestWorld {
  /** A `fetch` that answers for both servers; `404` for anything else. */
  readonly fetch: (url: string | URL | Request, init?: RequestInit) => Promise<Response>;
  readonly resourceUrl: string;
  readonly issuer: string;
  /** Every request the world received, in order (method and URL; no bodies). */
  readonly requests: { method: string; url: string }[];
  /**
   * The parameters of every token request, in order (code exchanges and refreshes, secrets
   * included), for asserting what a client sent.
   */
  readonly tokenRequests: Record<string, string>[];
  readonly stats: WorldStats;
  /** Clients by id. */
  readonly clients: Map<string, RegisteredClient>;
  /** Registers a client directly, as an operator would for `custom` credentials. */
  preregister(client: Partial<RegisteredClient> & { redirect_uris: string[] }): RegisteredClient;
  /**
   * Plays the user at the consent page: validates the authorization request the way a
   * server must (client, redirect URI, PKCE S256, resource) and answers the redirect back
   * to the client, with a code or with `error=access_denied` when `decision` is `deny`.
   */
  consent(authorizationUrl: string, decision?: 'approve' | 'deny'): string;
  /** Whether an access token is currently valid at the MCP server. */
  isValidAccessToken(token: string): boolean;
  /** Changes an option while the world runs (e.g. inject a failure mid-flow). */
  set(options: Partial<TestWorldOptions>): void;
  /**
   * Forgets every dynamically registered client, as a server that dropped or expired its
   * registrations does: their token requests then fail with `invalid_client`.
   */
  forgetRegisteredClients(): void;
  /**
   * Revokes every refresh token, as a server does when the user withdraws consent or an
   * administrator ends the grants: refreshes then fail with `invalid_grant`.
   */
  revokeRefreshTokens(): void;
  /**
   * Every secret the world issued or saw: access and refresh tokens, client secrets,
   * registration access tokens, codes, PKCE verifiers and states. For asserting that none
   * of them leaked into a response, a log line or an event.
   */
  secrets(): string[];
}
