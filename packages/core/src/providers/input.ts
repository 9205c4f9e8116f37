import { ProviderBody, type ProviderInput } from '../contract/schemas.js';
import { parseShape } from '../contract/validation.js';
import type { AuthorizationServerInfo, StoredRegistration } from '../storage/states.js';
import { invalid } from './client.js';
import { customAuthMethod } from './registration.js';

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

/**
 * Checks a provider's extra parameters (already shaped by the schema): none may be one of
 * {@link RESERVED_PARAMS}, nor start with `code_challenge` or `client_assertion`.
 *
 * @throws {KeywayError} `invalid_request` naming the parameter.
 */
function checkExtraParams(
  field: string,
  params: Record<string, string> | undefined,
): Record<string, string> | undefined {
  if (params === undefined) return undefined;
  for (const name of Object.keys(params)) {
    const lower = name.toLowerCase();
    if (
      RESERVED.has(lower) ||
      lower.startsWith('code_challenge') ||
      lower.startsWith('client_assertion')
    ) {
      throw invalid(
        `${field}.${name}`,
        `"${field}" cannot set ${JSON.stringify(name)}: Keyway sends that parameter itself`,
      );
    }
  }
  return Object.keys(params).length === 0 ? undefined : { ...params };
}

/** A provider's input, checked: what a write of it needs, before any request is sent. */
export interface ProviderSpec {
  label: string | undefined;
  /** `false`: inject-only (docs/api.md §13). */
  handOut: boolean;
  /** The MCP endpoint, as `checkUrl` answered it. */
  resourceUrl: string;
  configuredScopes: string[];
  authorizationParams: Record<string, string> | undefined;
  tokenParams: Record<string, string> | undefined;
  pkce: 'assume_s256' | undefined;
  mode: 'register' | 'custom';
  clientId: string | undefined;
  clientSecret: string | undefined;
  callback: StoredRegistration['callback'] | undefined;
}

/**
 * Parses a provider to create or replace (API.md §4): the `mcp` template only, its
 * endpoint checked by `checkUrl`, credentials that fit their mode, extra parameters that
 * set none of Keyway's own.
 *
 * @throws {KeywayError} `invalid_request` naming the field.
 */
export function parseProviderInput(
  input: ProviderInput,
  checkUrl: (text: string) => string,
): ProviderSpec {
  const shape = parseShape(ProviderBody, input);
  if (shape.template !== 'mcp')
    throw invalid(
      'template',
      `unknown template ${JSON.stringify(shape.template.slice(0, 40))}; the only one is "mcp"`,
    );
  const resourceUrl = checkUrl(shape.configuration.resource_url);
  const mode = shape.credentials?.mode ?? 'register';
  const clientId = shape.credentials?.client_id;
  const clientSecret = shape.credentials?.client_secret;
  if (mode === 'custom' && clientId === undefined)
    throw invalid('credentials.client_id', 'mode "custom" needs a "client_id"');
  if (mode === 'register' && (clientId !== undefined || clientSecret !== undefined)) {
    throw invalid(
      'credentials',
      'mode "register" takes no client_id or client_secret; use mode "custom"',
    );
  }
  const callback = shape.credentials?.callback;
  if (mode === 'register' && callback !== undefined) {
    throw invalid(
      'credentials.callback',
      'mode "register" chooses the redirect URI itself; "callback" is for mode "custom"',
    );
  }
  return {
    label: shape.label,
    handOut: shape.hand_out ?? true,
    resourceUrl,
    configuredScopes: shape.configuration.scopes ?? [],
    authorizationParams: checkExtraParams(
      'configuration.authorization_params',
      shape.configuration.authorization_params,
    ),
    tokenParams: checkExtraParams('configuration.token_params', shape.configuration.token_params),
    pkce: shape.configuration.pkce,
    mode,
    clientId,
    clientSecret,
    callback,
  };
}

/**
 * The stored registration of a `custom` client at a server: its secret kept when the
 * input leaves it out for the same client id, its token-endpoint authentication chosen
 * from what the server supports.
 */
export function customRegistration(
  spec: Pick<ProviderSpec, 'clientSecret' | 'callback'> & { clientId: string },
  before: StoredRegistration | undefined,
  server: AuthorizationServerInfo,
): StoredRegistration {
  const keepSecret =
    spec.clientSecret === undefined &&
    before?.client_id === spec.clientId &&
    before?.client_secret_set === true;
  const hasSecret = spec.clientSecret !== undefined || keepSecret;
  return {
    issuer: server.issuer,
    client_id: spec.clientId,
    registration: 'manual',
    token_endpoint_auth_method: customAuthMethod(
      server.token_endpoint_auth_methods_supported,
      hasSecret,
    ),
    client_secret_expires_at: null,
    registration_client_uri: null,
    client_secret_set: hasSecret,
    callback: spec.callback ?? 'shared',
  };
}
