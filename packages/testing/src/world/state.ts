import { withPath } from './http.js';
import type { RegisteredClient, TestWorldOptions, WorldStats } from './options.js';

/** Everything the world's servers share: its options, its URLs and what it has issued. */
export type WorldState = ReturnType<typeof createWorldState>;

/** The state of one test world, from its options. */
export function createWorldState(initial: TestWorldOptions) {
  let options: TestWorldOptions = { ...initial };
  const opt = <K extends keyof TestWorldOptions>(
    key: K,
    fallback: NonNullable<TestWorldOptions[K]>,
  ) => (options[key] ?? fallback) as NonNullable<TestWorldOptions[K]>;
  const resourceUrl = new URL(opt('resourceUrl', 'https://mcp.example.test/mcp'));
  const legacy = initial.legacy;
  const issuer = new URL(
    legacy === undefined ? opt('issuer', 'https://auth.example.test') : resourceUrl.origin,
  );
  const issuerString = issuer.pathname === '/' ? issuer.origin : issuer.href.replace(/\/$/, '');
  const moved = initial.classic?.endpoints ?? {};
  const endpoint = (name: string) =>
    moved[name as keyof typeof moved] ??
    (legacy === 'defaults' ? `${issuerString}/${name}` : `${issuerString}/oauth/${name}`);
  const now = () => (options.now ?? Date.now)();

  /** The form of every token request, in order (secrets included: a test kit's record). */
  const tokenRequests: Record<string, string>[] = [];
  const requests: { method: string; url: string }[] = [];
  const stats: WorldStats = {
    probes: 0,
    registrations: 0,
    unregistrations: 0,
    authorizations: 0,
    codeExchanges: 0,
    refreshes: 0,
    revocations: 0,
    mcpCalls: 0,
    apiCalls: 0,
    clientCredentialsGrants: 0,
    jwtBearerGrants: 0,
    refreshTokenReuses: 0,
    refreshTokensExpiredUnused: 0,
  };
  const clients = new Map<string, RegisteredClient>();
  const codes = new Map<
    string,
    {
      clientId: string;
      redirectUri: string;
      challenge: string;
      resource: string | null;
      scope: string;
      used: boolean;
      /** The authorization request carried `prompt=consent`. */
      consentPrompt: boolean;
    }
  >();
  const accessTokens = new Map<
    string,
    { expiresAt: number; scope: string; resource: string | null; revoked: boolean }
  >();
  const refreshTokens = new Map<
    string,
    {
      clientId: string;
      scope: string;
      resource: string | null;
      revoked: boolean;
      /** The grant it descends from: one family per code exchange. */
      family: string;
      /** Used once already (rotated away). */
      used: boolean;
      /** When it was issued, and when it was rotated away (`null`: still current). */
      issuedAt: number;
      rotatedAt: number | null;
      /** The refresh token its rotation issued: what a reuse within the grace window gets. */
      successor: string | null;
    }
  >();
  /** Secrets seen in requests: PKCE verifiers and states. */
  const seen = new Set<string>();
  /** The `jti` of every client assertion accepted: a replayed one is refused. */
  const seenJtis = new Set<string>();

  const prmUrl = (): string | null => {
    if (legacy !== undefined) return null;
    const location = opt('metadataLocation', 'header');
    if (location === 'header')
      return `${resourceUrl.origin}/keyway-test/resource-metadata${resourceUrl.pathname}`;
    if (location === 'path') return withPath(resourceUrl, 'oauth-protected-resource', 'inserted');
    if (location === 'root') return withPath(resourceUrl, 'oauth-protected-resource', 'root');
    return location.url;
  };
  const challengeNamesMetadata = () => {
    if (legacy !== undefined) return false;
    const location = opt('metadataLocation', 'header');
    return location === 'header' || typeof location === 'object';
  };
  const asMetadataUrl = (): string | null => {
    if (legacy === 'metadata') return `${issuerString}/.well-known/oauth-authorization-server`;
    if (legacy === 'defaults') return null;
    const kind = opt('authorizationServerMetadata', 'oauth');
    if (kind === 'oauth') return withPath(issuer, 'oauth-authorization-server', 'inserted');
    return withPath(
      issuer,
      'openid-configuration',
      kind === 'openid-inserted' ? 'inserted' : 'appended',
    );
  };

  return {
    get options(): TestWorldOptions {
      return options;
    },
    set options(next: TestWorldOptions) {
      options = next;
    },
    opt,
    resourceUrl,
    legacy,
    issuer,
    issuerString,
    endpoint,
    now,
    requests,
    tokenRequests,
    stats,
    clients,
    codes,
    accessTokens,
    refreshTokens,
    seen,
    seenJtis,
    prmUrl,
    challengeNamesMetadata,
    asMetadataUrl,
  };
}
