import { z } from 'zod';
import { namespaceTemplateProblem } from './namespace.js';

/*
 * How an operator turns on sign-in for MCP clients (docs/api.md §17): which ways a user may
 * sign in, the upstream OpenID provider of the `oidc` way and the namespace its users map
 * to, and how long access tokens and grants live. Off unless given.
 */

/** An access token lives at most an hour (docs/api.md §17). */
export const MAX_ACCESS_TOKEN_TTL = 3600;
/** A grant lasts 30 days unless the operator says otherwise. */
export const DEFAULT_GRANT_TTL = 30 * 24 * 3600;

const ACCESS_TTL = `"signIn.accessTokenTtl" must be an integer from 60 to ${MAX_ACCESS_TOKEN_TTL} (seconds)`;
const GRANT_TTL = '"signIn.grantTtl" must be an integer from 3600 to 31536000 (seconds)';

/** The upstream OpenID provider users of the `oidc` way sign in with. */
const OidcSchema = z.object({
  /** The provider's issuer (its metadata is read from `/.well-known/openid-configuration`). */
  issuer: z.url({ error: '"signIn.oidc.issuer" must be an absolute URL' }),
  /** Keyway's client id at the provider. */
  clientId: z
    .string({ error: '"signIn.oidc.clientId" must be a string' })
    .min(1, '"signIn.oidc.clientId" must not be empty'),
  /** Its secret; without one Keyway is a public client (PKCE protects the code). */
  clientSecret: z.string().min(1).optional(),
  /** Scopes to ask for; default `openid email profile`. `openid` is always asked for. */
  scopes: z
    .array(z.string().regex(/^[\x21\x23-\x5b\x5d-\x7e]+$/))
    .max(32)
    .optional(),
  /**
   * The namespace a user gets, as a path template: `acme/users/{sub}`. Each of `{sub}`,
   * `{email}` (used only when the provider says `email_verified: true`) and
   * `{preferred_username}` must fill exactly one valid path segment, or the sign-in is
   * refused with the reason.
   */
  namespace: z.string({ error: '"signIn.oidc.namespace" must be a string' }),
});

/** `signIn` of createBroker. */
export const SignInSchema = z
  .object({
    /** How a user proves who they are: a pasted broker token, an upstream OpenID provider. */
    methods: z
      .array(z.enum(['token', 'oidc'], { error: '"signIn.methods" takes "token" and "oidc"' }))
      .min(1, '"signIn.methods" names at least one way to sign in: "token", "oidc"')
      .refine((methods) => new Set(methods).size === methods.length, {
        message: '"signIn.methods" names a way twice',
      }),
    oidc: OidcSchema.optional(),
    /** Lifetime of an access token, in seconds: 60 to 3600, default 3600. */
    accessTokenTtl: z
      .number({ error: ACCESS_TTL })
      .int(ACCESS_TTL)
      .min(60, ACCESS_TTL)
      .max(MAX_ACCESS_TOKEN_TTL, ACCESS_TTL)
      .optional(),
    /** Lifetime of a grant (its refresh tokens), in seconds; default 30 days. */
    grantTtl: z
      .number({ error: GRANT_TTL })
      .int(GRANT_TTL)
      .min(3600, GRANT_TTL)
      .max(365 * 24 * 3600, GRANT_TTL)
      .optional(),
  })
  .superRefine((value, context) => {
    if (value.methods.includes('oidc') && value.oidc === undefined) {
      context.addIssue({
        code: 'custom',
        path: ['oidc'],
        message: '"signIn.oidc" is required with the "oidc" way: issuer, clientId, namespace',
      });
    }
    const problem =
      value.oidc === undefined ? null : namespaceTemplateProblem(value.oidc.namespace);
    if (problem !== null) {
      context.addIssue({
        code: 'custom',
        path: ['oidc', 'namespace'],
        message: `"signIn.oidc.namespace" ${problem}`,
      });
    }
  });

/** `signIn` as createBroker was given it. */
export type SignInConfig = z.input<typeof SignInSchema>;

/** Sign-in as the broker runs it, defaults applied. */
export interface SignInSettings {
  methods: readonly ('token' | 'oidc')[];
  oidc: {
    issuer: string;
    clientId: string;
    clientSecret: string | null;
    scopes: readonly string[];
    namespace: string;
  } | null;
  /** Seconds. */
  accessTokenTtl: number;
  /** Seconds. */
  grantTtl: number;
}

/** The settings of a parsed `signIn`. */
export function signInSettings(config: z.output<typeof SignInSchema>): SignInSettings {
  const oidc = config.oidc;
  return {
    methods: config.methods,
    oidc:
      oidc === undefined
        ? null
        : {
            issuer: oidc.issuer,
            clientId: oidc.clientId,
            clientSecret: oidc.clientSecret ?? null,
            scopes: [...new Set(['openid', ...(oidc.scopes ?? ['email', 'profile'])])],
            namespace: oidc.namespace,
          },
    accessTokenTtl: config.accessTokenTtl ?? MAX_ACCESS_TOKEN_TTL,
    grantTtl: config.grantTtl ?? DEFAULT_GRANT_TTL,
  };
}
