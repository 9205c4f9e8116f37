import { sha256 } from '@noble/hashes/sha2.js';
import * as oauth from 'oauth4webapi';
import { KeywayError } from '../contract/errors.js';
import type { OutboundFetch } from '../outbound/fetch.js';
import { OutboundError } from '../outbound/network-failure.js';
import { editJsonAnswer, libraryOptions } from '../outbound/oauth-fetch.js';
import { toBase64Url, utf8 } from '../platform/bytes.js';
import type { AuthorizationServerInfo } from '../storage/states.js';

/** How a client authenticates at the token endpoint. */
export type TokenEndpointAuthMethod =
  | 'client_secret_basic'
  | 'client_secret_post'
  | 'private_key_jwt'
  | 'none';

/**
 * Which of the deployment's callbacks a client redirects to: `{base}/api/oauth/callback`
 * (`shared`), or `{base}/api/oauth/callback/<key of its server>` (`per_server`).
 */
export type CallbackKind = 'shared' | 'per_server';

/** How Keyway came to hold a client (docs/api.md §4 `registration`). */
export type RegistrationKind = 'dynamic' | 'metadata_document' | 'manual';

/** A client at one authorization server. Secrets are returned apart, for the vault. */
export interface ClientRegistration {
  issuer: string;
  client_id: string;
  registration: RegistrationKind;
  token_endpoint_auth_method: TokenEndpointAuthMethod;
  /** Epoch ms; `null` when the secret does not expire (or there is none). */
  client_secret_expires_at: number | null;
  registration_client_uri: string | null;
  /**
   * Which redirect URI the client was registered with: the shared callback, or the
   * server's own ({@link serverRedirectUri}).
   */
  callback: CallbackKind;
}

/** A registration with the secrets the server handed out (never stored in clear). */
export interface RegisteredClient extends ClientRegistration {
  client_secret: string | null;
  registration_access_token: string | null;
  /**
   * The registration answer (RFC 7591 §3.2.1) as the server sent it, its secrets masked:
   * for a person debugging the provider. Only for dynamic registration.
   */
  response?: Record<string, unknown>;
}

/** Client metadata an operator sets for dynamic registration (RFC 7591 §2), as stored. */
export type ClientMetadata = Record<string, string | string[]>;

/** What stands in a shown registration answer for a secret the server handed out. */
export const MASKED = '(masked)';

/** A registration answer with its secrets masked: the client secret, the access token. */
function maskedAnswer(answer: Record<string, unknown>): Record<string, unknown> {
  const shown = { ...answer };
  for (const field of ['client_secret', 'registration_access_token']) {
    if (shown[field] !== undefined && shown[field] !== null && shown[field] !== '')
      shown[field] = MASKED;
  }
  return shown;
}

/** What the deployment tells authorization servers about itself. */
export interface ClientProfile {
  /** `{base}/api/oauth/callback`: the shared callback; per-server ones live below it. */
  redirectUri: string;
  /** The client-ID metadata document URL, used only when it is `https`. */
  metadataDocumentUrl: string;
  /** `client_name` shown on consent screens. */
  clientName: string;
}

/** The profile of a deployment at `baseUrl` (`null` without one: no providers). */
export function profileOf(
  baseUrl: string | undefined,
  clientMetadataUrl: string | undefined,
  clientName: string | undefined,
): ClientProfile | null {
  if (baseUrl === undefined) return null;
  const base = baseUrl.replace(/\/+$/, '');
  return {
    redirectUri: `${base}/api/oauth/callback`,
    metadataDocumentUrl: clientMetadataUrl ?? `${base}/api/oauth/client-metadata.json`,
    clientName: clientName ?? 'Keyway',
  };
}

/**
 * The key of an authorization server's own callback: 22 base64url characters (132 bits) of
 * SHA-256 over the issuer. Not a secret: it only has to differ between servers.
 */
export function callbackKey(issuer: string): string {
  return toBase64Url(sha256(utf8(`keyway-callback ${issuer}`))).slice(0, 22);
}

/**
 * The redirect URI of one authorization server, `{base}/api/oauth/callback/<key>` (docs/api.md
 * §5 "Mix-up defense", RFC 9700 §4.4.2): a code arriving there was issued for a state of
 * that server, or the callback refuses it without sending it anywhere.
 */
export function serverRedirectUri(profile: ClientProfile, issuer: string): string {
  return `${profile.redirectUri}/${callbackKey(issuer)}`;
}

/** The redirect URI of a client of `issuer` that uses the callback `kind`. */
export function redirectUriOf(profile: ClientProfile, issuer: string, kind: CallbackKind): string {
  return kind === 'per_server' ? serverRedirectUri(profile, issuer) : profile.redirectUri;
}

const STRENGTH: TokenEndpointAuthMethod[] = ['client_secret_basic', 'client_secret_post', 'none'];

/** A method of {@link STRENGTH} (the ones registration deals in), or `null` for anything else. */
function registrationMethod(value: unknown): TokenEndpointAuthMethod | null {
  return STRENGTH.find((method) => method === value) ?? null;
}

function isLoopback(url: URL): boolean {
  return url.hostname === 'localhost' || url.hostname === '127.0.0.1' || url.hostname === '[::1]';
}

/**
 * The client-ID metadata document of this deployment: its `client_id` is its own URL; the
 * client is public (`none`) and redirects to the callback.
 */
export function clientMetadataDocument(profile: ClientProfile): Record<string, unknown> {
  return {
    client_id: profile.metadataDocumentUrl,
    client_name: profile.clientName,
    redirect_uris: [profile.redirectUri],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
    application_type: applicationType(profile.redirectUri),
  };
}

/** `web` for an https callback, `native` for a loopback http one (development). */
export function applicationType(redirectUri: string): 'web' | 'native' {
  const url = new URL(redirectUri);
  return url.protocol === 'http:' && isLoopback(url) ? 'native' : 'web';
}

/**
 * The strongest method both sides support for dynamic registration: `client_secret_basic`,
 * then `client_secret_post`, then `none`. A server that lists nothing supports
 * `client_secret_basic` (RFC 8414 §2).
 */
export function strongestAuthMethod(supported: readonly string[] | null): TokenEndpointAuthMethod {
  if (supported === null || supported.length === 0) return 'client_secret_basic';
  return STRENGTH.find((method) => supported.includes(method)) ?? 'client_secret_basic';
}

/**
 * The method a `custom` client uses: `none` without a secret; with one,
 * `client_secret_basic` when the server lists it or lists nothing, else
 * `client_secret_post` (docs/api.md §6 step 6).
 */
export function customAuthMethod(
  supported: readonly string[] | null,
  hasSecret: boolean,
): TokenEndpointAuthMethod {
  if (!hasSecret) return 'none';
  if (supported === null || supported.length === 0 || supported.includes('client_secret_basic')) {
    return 'client_secret_basic';
  }
  return 'client_secret_post';
}

function asServer(server: AuthorizationServerInfo): oauth.AuthorizationServer {
  return {
    issuer: server.issuer,
    authorization_endpoint: server.authorization_endpoint,
    token_endpoint: server.token_endpoint,
    ...(server.registration_endpoint
      ? { registration_endpoint: server.registration_endpoint }
      : {}),
    ...(server.revocation_endpoint ? { revocation_endpoint: server.revocation_endpoint } : {}),
  };
}

function registrationFailed(message: string, cause?: unknown): KeywayError {
  return new KeywayError('registration_failed', message, {
    details: [{ step: 'registration', message }],
    cause,
  });
}

/**
 * What real servers answer to a registration, in the form RFC 7591 asks for (docs/api.md §6
 * item 10): status 200 as well as 201, and a `client_secret` without
 * `client_secret_expires_at` meaning a secret that does not expire (`0`). Anything else is
 * left as it is, for the library to judge.
 */
async function asRegistrationAnswer(response: Response): Promise<Response> {
  if (response.status !== 200 && response.status !== 201) return response;
  return editJsonAnswer(response, (body) => ({
    body:
      'client_secret' in body && !('client_secret_expires_at' in body)
        ? { ...body, client_secret_expires_at: 0 }
        : body,
    status: 201,
  }));
}

/**
 * Registers Keyway as a client of an authorization server (mode `register`, docs/api.md §6
 * step 6): with the client-ID metadata document when the server advertises support and
 * the document URL is `https`; else by dynamic registration (RFC 7591) asking for the
 * strongest supported auth method and honouring the one the server returns, with the
 * server's own redirect URI ({@link serverRedirectUri}).
 *
 * The document is one URL that every server supporting documents accepts, so a client that
 * uses it has one redirect URI, and only the server's `iss` (RFC 9207) keeps its responses
 * apart from a mix-up (RFC 9700 §4.4); see docs/security.md for what that leaves exposed.
 *
 * @throws {KeywayError} `registration_unsupported` (400) or `registration_failed` (502).
 */
export async function registerClient(
  outbound: OutboundFetch,
  server: AuthorizationServerInfo,
  profile: ClientProfile,
  metadata: Readonly<ClientMetadata> = {},
): Promise<RegisteredClient> {
  const documentUrl = new URL(profile.metadataDocumentUrl);
  if (server.client_id_metadata_document_supported && documentUrl.protocol === 'https:') {
    return {
      issuer: server.issuer,
      client_id: documentUrl.href,
      registration: 'metadata_document',
      token_endpoint_auth_method: 'none',
      client_secret_expires_at: null,
      registration_client_uri: null,
      callback: 'shared',
      client_secret: null,
      registration_access_token: null,
    };
  }
  if (server.registration_endpoint === null) {
    throw new KeywayError(
      'registration_unsupported',
      'the authorization server offers neither dynamic client registration nor client-ID metadata documents' +
        (server.client_id_metadata_document_supported
          ? ' reachable here (the document URL must be https)'
          : ''),
    );
  }
  const requested =
    registrationMethod(metadata.token_endpoint_auth_method) ??
    strongestAuthMethod(server.token_endpoint_auth_methods_supported);
  const redirectUri = serverRedirectUri(profile, server.issuer);
  let response: Response;
  try {
    response = await oauth.dynamicClientRegistrationRequest(
      asServer(server),
      {
        redirect_uris: [redirectUri],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        client_name: profile.clientName,
        application_type: applicationType(redirectUri),
        // The operator's fields replace Keyway's defaults (docs/api.md §4 `client_metadata`).
        ...metadata,
        token_endpoint_auth_method: requested,
      },
      libraryOptions(outbound),
    );
  } catch (cause) {
    throw registrationFailed(
      `the registration endpoint could not be reached: ` +
        `${cause instanceof OutboundError ? cause.message : 'request failed'}`,
      cause,
    );
  }
  let client: Awaited<ReturnType<typeof oauth.processDynamicClientRegistrationResponse>>;
  try {
    client = await oauth.processDynamicClientRegistrationResponse(
      await asRegistrationAnswer(response),
    );
  } catch (cause) {
    // A refusal (GitHub's remote MCP server answers 422, Figma's 403): registering here will
    // not work, so the error says what will — an application registered by hand, at the
    // shared callback its custom credentials use.
    const why = !(cause instanceof oauth.ResponseBodyError)
      ? 'the server answered with something that is not a registration'
      : `the server refused: ${cause.error}${cause.error_description ? ` (${cause.error_description})` : ''}. ` +
        (cause.error === 'invalid_redirect_uri' && redirectUri.startsWith('http:')
          ? // AppSignal takes https redirect URIs only, loopback or not.
            `Its redirect URI was ${redirectUri}: a server may take https redirect URIs only; run Keyway at an ` +
            `https base URL (baseUrl; KEYWAY_BASE_URL for keyway serve)`
          : `Register an application with it (redirect URI ${profile.redirectUri}) and give its client id and ` +
            `secret (credentials.mode "custom")`);
    throw registrationFailed(`dynamic client registration failed: ${why}`, cause);
  }
  const secret =
    typeof client.client_secret === 'string' && client.client_secret !== ''
      ? client.client_secret
      : null;
  // Use what the server says; when it says nothing, what we asked for if a secret came back.
  const method =
    registrationMethod(client.token_endpoint_auth_method) ?? (secret !== null ? requested : 'none');
  if (method !== 'none' && secret === null) {
    throw registrationFailed(`the server chose ${method} but issued no client secret`);
  }
  const expires =
    typeof client.client_secret_expires_at === 'number' ? client.client_secret_expires_at : 0;
  return {
    issuer: server.issuer,
    client_id: client.client_id,
    registration: 'dynamic',
    token_endpoint_auth_method: method,
    client_secret_expires_at: secret === null || expires === 0 ? null : expires * 1000,
    registration_client_uri:
      typeof client.registration_client_uri === 'string' ? client.registration_client_uri : null,
    callback: 'per_server',
    client_secret: method === 'none' ? null : secret,
    registration_access_token:
      typeof client.registration_access_token === 'string'
        ? client.registration_access_token
        : null,
    response: maskedAnswer(client),
  };
}
