import type { SuiteVersion } from './harness.js';

/**
 * The client-authorization scenarios of the authorization-code flow in the two pinned
 * releases of the suite, and the extension scenarios (docs/api.md §14): client credentials
 * (SEP-1046), workload identity (SEP-1933), enterprise-managed authorization (SEP-990, in
 * both its forms) and DPoP (SEP-1932).
 */
const BOTH_REVISIONS = [
  'auth/metadata-default',
  'auth/metadata-var1',
  'auth/metadata-var2',
  'auth/metadata-var3',
  'auth/basic-cimd',
  'auth/pre-registration',
  'auth/scope-from-www-authenticate',
  'auth/scope-from-scopes-supported',
  'auth/scope-omitted-when-undefined',
  'auth/scope-step-up',
  'auth/scope-retry-limit',
  'auth/token-endpoint-auth-basic',
  'auth/token-endpoint-auth-post',
  'auth/token-endpoint-auth-none',
];
const LEGACY = [
  'auth/2025-03-26-oauth-metadata-backcompat',
  'auth/2025-03-26-oauth-endpoint-fallback',
];
const DRAFT_IN_BOTH = [
  'auth/resource-mismatch',
  'auth/offline-access-scope',
  'auth/offline-access-not-supported',
];
const NEW_IN_2026 = [
  ...DRAFT_IN_BOTH,
  'auth/authorization-server-migration',
  'auth/iss-supported',
  'auth/iss-not-advertised',
  'auth/iss-supported-missing',
  'auth/iss-wrong-issuer',
  'auth/iss-unexpected',
  'auth/iss-normalized',
  'auth/metadata-issuer-mismatch',
];

/** The extension scenarios Keyway passes (docs/api.md §14), in both releases. */
const EXTENSIONS = ['auth/client-credentials-basic', 'auth/client-credentials-jwt'];
/** Extension scenarios of the older release only: SEP-990 in its earlier form. */
const OLD_EXTENSIONS = ['auth/cross-app-access-complete-flow'];
/** Extension scenarios of the newest release only. */
const NEW_EXTENSIONS = ['auth/wif-jwt-bearer', 'auth/enterprise-managed-authorization'];
/** DPoP (SEP-1932): the gateway's only, its token never leaving the broker. */
const DPOP = ['auth/dpop', 'auth/dpop-nonce'];

/** A run: the suite release, the scenario, and the spec version (the wire) it runs at. */
export interface Run {
  suite: SuiteVersion;
  scenario: string;
  specVersion: string | null;
  /** Run at `specVersion` although the scenario belongs to no revision (an extension). */
  force?: boolean;
  /** Through the gateway only: the token is DPoP-bound and never handed out (§14). */
  gatewayOnly?: boolean;
}

export const RUNS: Run[] = [
  // 0.1.16 has no --spec-version for these: it picks each scenario's own (stateful wire).
  ...[...BOTH_REVISIONS, ...LEGACY, ...DRAFT_IN_BOTH, ...EXTENSIONS, ...OLD_EXTENSIONS].map(
    (scenario) => ({
      suite: '0.1.16' as const,
      scenario,
      specVersion: null,
    }),
  ),
  ...BOTH_REVISIONS.flatMap((scenario) =>
    ['2025-11-25', '2026-07-28'].map((specVersion) => ({
      suite: '0.2.0-alpha.12' as const,
      scenario,
      specVersion,
    })),
  ),
  ...LEGACY.map((scenario) => ({
    suite: '0.2.0-alpha.12' as const,
    scenario,
    specVersion: '2025-03-26',
  })),
  ...NEW_IN_2026.map((scenario) => ({
    suite: '0.2.0-alpha.12' as const,
    scenario,
    specVersion: '2026-07-28',
  })),
  // Extensions belong to no spec revision: each at the suite's default wire, and forced
  // onto the stateless one of 2026-07-28.
  ...[...EXTENSIONS, ...NEW_EXTENSIONS, ...DPOP].flatMap((scenario) => {
    const gatewayOnly = DPOP.includes(scenario) ? { gatewayOnly: true } : {};
    return [
      { suite: '0.2.0-alpha.12' as const, scenario, specVersion: null, ...gatewayOnly },
      {
        suite: '0.2.0-alpha.12' as const,
        scenario,
        specVersion: '2026-07-28',
        force: true,
        ...gatewayOnly,
      },
    ];
  }),
];
