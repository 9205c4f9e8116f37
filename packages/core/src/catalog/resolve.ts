import { TokenResponseSchema } from '../storage/quirks.js';
import type { AuthorizationServerInfo, OAuth2Quirks } from '../storage/states.js';
import {
  PLACEHOLDER,
  type Profile,
  ProfileSchema,
  placeholdersOf,
  UNSAFE_VALUE,
} from './schema.js';

/*
 * A profile made concrete for one provider (docs/api.md §15): its placeholders filled from
 * the operator's `configuration.params`, each value checked so that it fills its own place
 * only, and the endpoints that result checked like discovered ones.
 */

/** A profile's problem, naming the field of the provider body (or of the profile) at fault. */
export class ProfileProblem extends Error {
  override readonly name = 'ProfileProblem';
  constructor(
    readonly path: string,
    message: string,
  ) {
    super(message);
  }
}

/** The endpoints and the quirks of an `oauth2` provider. */
export interface ResolvedProfile {
  server: AuthorizationServerInfo;
  quirks: OAuth2Quirks;
}

/** An endpoint checker: the URL as WHATWG writes it, or a throw naming `field`. */
export type EndpointCheck = (text: string, field: string) => string;

/**
 * The parameters Keyway sends itself in authorization and token requests: a provider's
 * extra parameters can never set or override one (API.md §4), in any letter case.
 */
export const RESERVED_PARAMS: readonly string[] = [
  'response_type',
  'client_id',
  'redirect_uri',
  'state',
  'code_challenge',
  'code_challenge_method',
  'scope',
  'resource',
  'grant_type',
  'code',
  'code_verifier',
  'refresh_token',
  'client_secret',
  'client_assertion',
  'client_assertion_type',
];
const RESERVED = new Set(RESERVED_PARAMS);

/** Whether an extra parameter's name is one Keyway sends itself (any letter case). */
export function reservedParam(name: string): boolean {
  const lower = name.toLowerCase();
  return (
    RESERVED.has(lower) ||
    lower.startsWith('code_challenge') ||
    lower.startsWith('client_assertion')
  );
}

/** The texts of a profile that may hold placeholders, by field. */
function templated(profile: Profile): [string, string][] {
  const fields: [string, string | null | undefined][] = [
    ['issuer', profile.issuer],
    ['authorization_endpoint', profile.authorization_endpoint],
    ['token_endpoint', profile.token_endpoint],
    ['refresh_endpoint', profile.refresh_endpoint],
    ['revocation_endpoint', profile.revocation_endpoint],
    ['api_base_url', profile.api_base_url],
    ['after_connect.url', profile.after_connect?.url],
  ];
  return fields.filter((field): field is [string, string] => typeof field[1] === 'string');
}

/**
 * Checks what the schema cannot: every placeholder is a declared parameter and every
 * parameter is used, patterns compile and take their defaults, placeholders sit inside a
 * host label or a path segment, and no extra parameter is one of Keyway's own.
 *
 * @throws {ProfileProblem} naming the profile's field.
 */
export function checkProfile(input: unknown): Profile {
  const parsed = ProfileSchema.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ProfileProblem(issue?.path.join('.') ?? '', issue?.message ?? 'not a profile');
  }
  const profile = parsed.data;
  const declared = new Map(profile.params.map((param) => [param.name, param]));
  if (declared.size !== profile.params.length)
    throw new ProfileProblem('params', 'a parameter is declared twice');
  const perConnection = checkConnectionValues(profile, declared);
  const used = new Set<string>();
  for (const [field, text] of templated(profile)) {
    for (const name of placeholdersOf(text)) {
      if (field === 'api_base_url' && perConnection.has(name)) continue;
      if (!declared.has(name))
        throw new ProfileProblem(field, `{${name}} is not a declared parameter`);
      used.add(name);
    }
    // A placeholder fills a whole path segment or part of a host label, nothing else.
    const url = new URL(text.replace(PLACEHOLDER, 'x'));
    const bare = text.replace(PLACEHOLDER, '');
    if (/[{}]/.test(bare) || url.search !== '' || url.hash !== '')
      throw new ProfileProblem(field, 'a placeholder is malformed, or the URL has a query');
  }
  for (const param of profile.params) {
    if (!used.has(param.name))
      throw new ProfileProblem('params', `"${param.name}" is used by no endpoint`);
    const pattern = compiled(param.pattern, `params.${param.name}.pattern`);
    if (param.default !== undefined && !pattern.test(param.default))
      throw new ProfileProblem(`params.${param.name}.default`, 'does not match its pattern');
  }
  // What a connection keeps as metadata is shown in its view: never a credential.
  const kept: [string, Record<string, string>][] = [
    ['token_response.extra', profile.token_response.extra],
    ['after_connect.metadata', profile.after_connect?.metadata ?? {}],
  ];
  for (const [field, paths] of kept) {
    for (const [name, path] of Object.entries(paths)) {
      if (SECRET_NAME.test(path.slice(path.lastIndexOf('.') + 1)) || SECRET_NAME.test(name))
        throw new ProfileProblem(
          `${field}.${name}`,
          'a token or a secret is never kept as metadata',
        );
    }
  }
  for (const name of profile.redirect_params) {
    if (['code', 'state'].includes(name.toLowerCase()) || SECRET_NAME.test(name))
      throw new ProfileProblem('redirect_params', `"${name}" is never kept as metadata`);
  }
  for (const field of ['authorization_params', 'token_params'] as const) {
    for (const name of Object.keys(profile[field])) {
      if (reservedParam(name))
        throw new ProfileProblem(`${field}.${name}`, 'Keyway sends this parameter itself');
    }
  }
  return profile;
}

/** A pattern of the catalog, anchored. @throws {ProfileProblem} naming `field`. */
function compiled(pattern: string, field: string): RegExp {
  try {
    return anchored(pattern);
  } catch {
    throw new ProfileProblem(field, 'not a regular expression');
  }
}

/**
 * The connection values' rules: each is metadata the profile keeps, used in `api_base_url`
 * (an `origin` as its whole host), named apart from the parameters, with a pattern that
 * compiles. Answers their names.
 */
function checkConnectionValues(profile: Profile, params: Map<string, unknown>): Set<string> {
  const kept = new Set([
    ...Object.keys(profile.token_response.extra),
    ...profile.redirect_params,
    ...Object.keys(profile.after_connect?.metadata ?? {}),
  ]);
  const names = new Set<string>();
  const base = profile.api_base_url ?? '';
  for (const [index, value] of profile.connection_values.entries()) {
    const field = `connection_values.${index}`;
    if (names.has(value.name) || params.has(value.name))
      throw new ProfileProblem(`${field}.name`, `"${value.name}" is declared twice`);
    names.add(value.name);
    if (!kept.has(value.name))
      throw new ProfileProblem(
        `${field}.name`,
        `"${value.name}" is not metadata the profile keeps (token_response.extra, redirect_params or ` +
          `after_connect.metadata)`,
      );
    const placeholder = `{${value.name}}`;
    if (!base.includes(placeholder))
      throw new ProfileProblem(`${field}.name`, `api_base_url has no ${placeholder}`);
    const origin = `https://${placeholder}`;
    if (
      value.kind === 'origin' &&
      (!base.startsWith(origin) || !['', '/'].includes(base.charAt(origin.length)))
    )
      throw new ProfileProblem(`${field}.kind`, `an origin is the whole host: ${origin}/…`);
    compiled(value.pattern, `${field}.pattern`);
  }
  return names;
}

/** A text checked by `check`, kept as written (an issuer is compared byte for byte). */
function asWritten(text: string, check: (text: string) => unknown): string {
  check(text);
  return text;
}

/** An API base without its last `/`: the proxy joins `<base>/<rest>` (docs/api.md §13). */
const withoutSlash = (url: string) => url.replace(/\/$/, '');

/** A name that says it holds a credential: never metadata (the view shows metadata). */
const SECRET_NAME = /token|secret|password|assertion|code_verifier/i;

const anchored = (pattern: string) => new RegExp(`^(?:${pattern})$`, 'u');

/**
 * The values of a profile's parameters: each given one checked, defaults filled.
 *
 * @throws {ProfileProblem} naming `configuration.params.<name>`.
 */
function paramValues(profile: Profile, given: Record<string, string>): Record<string, string> {
  const values: Record<string, string> = {};
  for (const name of Object.keys(given)) {
    if (!profile.params.some((param) => param.name === name)) {
      const known = profile.params.map((param) => param.name).join(', ') || 'none';
      throw new ProfileProblem(
        `configuration.params.${name}`,
        `profile "${profile.id}" has no parameter "${name}" (its parameters: ${known})`,
      );
    }
  }
  for (const param of profile.params) {
    const field = `configuration.params.${param.name}`;
    const value = given[param.name] ?? param.default;
    if (value === undefined)
      throw new ProfileProblem(
        field,
        `profile "${profile.id}" needs "${param.name}": ${param.description}`,
      );
    if (
      value === '' ||
      value === '.' ||
      value === '..' ||
      UNSAFE_VALUE.test(value) ||
      !anchored(param.pattern).test(value)
    ) {
      throw new ProfileProblem(
        field,
        `"${param.name}" is not a valid value (${param.description}; it must match ${param.pattern})`,
      );
    }
    values[param.name] = value;
  }
  return values;
}

/**
 * A profile made concrete: placeholders filled from `params` and every endpoint checked.
 *
 * @throws {ProfileProblem} naming the provider body's field; what `check` throws.
 */
export function resolveProfile(
  profile: Profile,
  given: Record<string, string>,
  check: EndpointCheck,
  source: string | null,
): ResolvedProfile {
  const values = paramValues(profile, given);
  // A connection value's placeholder stays, for the proxy to fill per connection.
  const fill = (text: string) =>
    text.replace(PLACEHOLDER, (whole, name: string) => values[name] ?? whole);
  const at = (field: string, text: string) =>
    check(fill(text), source === null ? `configuration.${field}` : `profile ${field}`);
  const authorization = at('authorization_endpoint', profile.authorization_endpoint);
  // Compared byte for byte with an `iss` (RFC 9207): kept as filled, once checked.
  const issuer =
    profile.issuer === undefined
      ? new URL(authorization).origin
      : asWritten(fill(profile.issuer), (text) => at('issuer', text));
  const revocation =
    profile.revocation_endpoint === undefined
      ? null
      : at('revocation_endpoint', profile.revocation_endpoint);
  return {
    server: {
      issuer,
      authorization_endpoint: authorization,
      token_endpoint: at('token_endpoint', profile.token_endpoint),
      registration_endpoint: null,
      revocation_endpoint: revocation,
      scopes_supported: null,
      code_challenge_methods_supported: profile.pkce === 'S256' ? ['S256'] : [],
      token_endpoint_auth_methods_supported: [profile.token_endpoint_auth_method],
      client_id_metadata_document_supported: false,
      authorization_response_iss_parameter_supported: false,
    },
    quirks: {
      profile: source,
      params: values,
      scopes_always: profile.scopes_always,
      scope_separator: profile.scope_separator,
      scope_param: profile.scope_param,
      pkce: profile.pkce,
      token_request_format: profile.token_request_format,
      token_request_headers: profile.token_request_headers,
      authorization_params: profile.authorization_params,
      token_params: profile.token_params,
      token_response: profile.token_response,
      redirect_params: profile.redirect_params,
      refresh_endpoint:
        profile.refresh_endpoint === undefined
          ? null
          : at('refresh_endpoint', profile.refresh_endpoint),
      api_base_url: profile.api_base_url === null ? null : apiBase(profile, fill, at),
      api_headers: profile.api_headers,
      connection_values: profile.connection_values,
      after_connect:
        profile.after_connect === undefined
          ? null
          : {
              url: at('after_connect.url', profile.after_connect.url),
              metadata: profile.after_connect.metadata,
            },
    },
  };
}

/**
 * A profile's API base, its parameters filled and checked: with no connection value, as
 * `check` writes it; with some, as filled, checked with a sample in each place (the proxy
 * checks the URL it builds again).
 */
function apiBase(
  profile: Profile,
  fill: (text: string) => string,
  at: (field: string, text: string) => string,
): string {
  const base = fill(profile.api_base_url as string);
  if (profile.connection_values.length === 0) return withoutSlash(at('api_base_url', base));
  at('api_base_url', base.replace(PLACEHOLDER, 'x'));
  return withoutSlash(base);
}

/** The configuration of an `oauth2` provider without a profile (docs/api.md §4). */
export interface ExplicitOAuth2 {
  authorization_endpoint?: string | undefined;
  token_endpoint?: string | undefined;
  revocation_endpoint?: string | undefined;
  issuer?: string | undefined;
  scope_separator?: ' ' | ',' | undefined;
  scope_param?: 'scope' | 'user_scope' | undefined;
  pkce?: 'S256' | 'none' | undefined;
  token_endpoint_auth_method?: 'client_secret_basic' | 'client_secret_post' | undefined;
  api_base_url?: string | undefined;
  /** How the token endpoint answers, as a profile's `token_response` says (Slack's shape). */
  token_response?: Record<string, unknown> | undefined;
}

/**
 * An operator's `token_response`, checked as a profile's is.
 *
 * @throws {ProfileProblem} naming `configuration.token_response.<field>`.
 */
function tokenResponseOf(given: Record<string, unknown>) {
  const parsed = TokenResponseSchema.safeParse(given);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const path = ['configuration.token_response', ...(issue?.path ?? []).map(String)].join('.');
  throw new ProfileProblem(path, issue?.message ?? 'not a token response description');
}

/**
 * An `oauth2` provider whose operator names its endpoints: a profile of its own, every
 * other quirk at its default, resolved as a catalog profile is (the endpoints checked by
 * `check`, errors naming `configuration.<field>`).
 *
 * @throws {ProfileProblem} naming the missing endpoint; what `check` throws.
 */
export function explicitProfile(
  configuration: ExplicitOAuth2,
  check: EndpointCheck,
): ResolvedProfile {
  const { authorization_endpoint: authorization, token_endpoint: token } = configuration;
  for (const [field, value] of [
    ['authorization_endpoint', authorization],
    ['token_endpoint', token],
  ]) {
    if (value === undefined)
      throw new ProfileProblem(
        `configuration.${field}`,
        `an "oauth2" provider without a "profile" names its "${field}"`,
      );
  }
  const profile = ProfileSchema.parse({
    id: 'named',
    label: 'named endpoints',
    docs_url: 'https://invalid',
    authorization_endpoint: 'https://invalid',
    token_endpoint: 'https://invalid',
    scopes_example: [],
    scope_separator: configuration.scope_separator ?? ' ',
    scope_param: configuration.scope_param ?? 'scope',
    ...(configuration.token_response === undefined
      ? {}
      : { token_response: tokenResponseOf(configuration.token_response) }),
    pkce: configuration.pkce ?? 'S256',
    token_endpoint_auth_method: configuration.token_endpoint_auth_method ?? 'client_secret_basic',
    api_base_url: null,
    refresh: 'stable',
  });
  // The operator's endpoints as written (http for allowed hosts included): `check` judges them.
  return resolveProfile(
    {
      ...profile,
      authorization_endpoint: authorization as string,
      token_endpoint: token as string,
      issuer: configuration.issuer,
      revocation_endpoint: configuration.revocation_endpoint,
      api_base_url: configuration.api_base_url ?? null,
    },
    {},
    check,
    null,
  );
}
