import { sha256 } from '@noble/hashes/sha2.js';
import { setCoversPath } from '../auth/scope.js';
import { KeywayError } from '../contract/errors.js';
import { timingSafeEqual, toBase64Url, utf8 } from '../platform/bytes.js';
import { type SignInClient, type SignInClients, UntrustedClient } from './clients.js';
import type { SignInDeps } from './deps.js';
import { endpointOfResource, endpointPath } from './documents.js';
import { keep, newSecret, take } from './pending.js';
import { redirectMatches, returnHost } from './redirects.js';
import { type RequestState, RequestStateSchema, type SignedIn } from './shapes.js';

/*
 * The authorization endpoint's pages (docs/api.md §17): the request is checked (a client or
 * redirect URI that cannot be trusted gets a page, never a redirect; every later error is a
 * redirect with `error`, `state` and `iss`), the user signs in, then consents. Between pages
 * the request is a single-use record: each form carries a fresh handle to it, and works
 * only in the browser that opened the page (a binding cookie whose hash the record holds),
 * so a form posted from another site, or twice, does nothing.
 */

/** How long a user has from one page to the next. */
const PAGE_TTL_MS = 10 * 60 * 1000;
/** How long a code lives (docs/api.md §17: at most 60 s). */
export const CODE_TTL_MS = 60 * 1000;
/** A PKCE challenge: base64url of a SHA-256 (RFC 7636 §4.2), 43 characters. */
const S256_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

/** The client as a page shows it. */
export interface ClientShown {
  client_id: string;
  /** Its name, in its own words. */
  name: string | null;
  /** The host its metadata document came from; `null`: registered, unverified. */
  verified_host: string | null;
  /** Where the user goes back to: a host, or an app's scheme. */
  returns_to: string;
}

/** What the authorization endpoint answers: a page to show, or a redirect. */
export type SignInStep =
  | { kind: 'error'; title: string; message: string }
  | { kind: 'redirect'; location: string }
  | {
      kind: 'sign_in';
      request: string;
      client: ClientShown;
      /** `mcp/<connection path>`. */
      endpoint: string;
      methods: readonly ('token' | 'oidc')[];
      /** Why the last attempt failed, for the user. */
      problem: string | null;
    }
  | {
      kind: 'consent';
      request: string;
      client: ClientShown;
      endpoint: string;
      /** Who signed in. */
      user: string;
      /** Seconds an access token lives, and the grant. */
      lifetimes: { access: number; grant: number };
    };

/** A step and, when the browser needs one, the binding cookie to set. */
export interface SignInAnswer {
  step: SignInStep;
  /** A new binding to set as the cookie (the browser had none, or another). */
  binding: string | null;
}

const page = (title: string, message: string): SignInAnswer => ({
  step: { kind: 'error', title, message },
  binding: null,
});

const START_AGAIN =
  'This sign-in page has expired, was already used, or was opened in another browser. Start ' +
  'again from your MCP client.';

/** The URL an authorization response goes to, with its parameters and `iss` (RFC 9207). */
function respond(
  deps: SignInDeps,
  redirectUri: string,
  state: string | null,
  params: Record<string, string>,
): string {
  const url = new URL(redirectUri);
  for (const [name, value] of Object.entries(params)) url.searchParams.append(name, value);
  if (state !== null) url.searchParams.append('state', state);
  url.searchParams.append('iss', deps.issuer);
  return url.href;
}

/** The hash a request keeps of its browser's binding. */
const bindingHash = (binding: string) => toBase64Url(sha256(utf8(`keyway-binding ${binding}`)));

/** Whether a presented binding is the one a request was opened with (constant time). */
function sameBinding(request: RequestState, binding: string | null): boolean {
  if (binding === null || binding.length > 100) return false;
  return timingSafeEqual(utf8(bindingHash(binding)), utf8(request.binding));
}

/** The authorization endpoint and its pages. */
export class SignInAuthorization {
  readonly #deps: SignInDeps;
  readonly #clients: SignInClients;

  constructor(deps: SignInDeps, clients: SignInClients) {
    this.#deps = deps;
    this.#clients = clients;
  }

  /**
   * `GET /oauth/authorize`: checks the request (RFC 6749 §4.1.1, RFC 7636, RFC 8707) and
   * answers the sign-in page, or a page or redirect saying what is wrong.
   */
  async begin(query: URLSearchParams, binding: string | null): Promise<SignInAnswer> {
    const once = (name: string): string | null | undefined => {
      const values = query.getAll(name);
      return values.length > 1 ? undefined : (values[0] ?? null);
    };
    const clientId = once('client_id');
    if (clientId === undefined || clientId === null || clientId === '') {
      return page(
        'The request names no client',
        'The authorization request has no single client_id.',
      );
    }
    let client: SignInClient;
    try {
      client = await this.#clients.resolve(clientId);
    } catch (error) {
      if (!(error instanceof UntrustedClient)) throw error;
      return page('This client cannot sign in', `${error.message}.`);
    }
    const redirectUri = once('redirect_uri');
    if (redirectUri === undefined || redirectUri === null) {
      return page('The request names no redirect URI', 'The request has no single redirect_uri.');
    }
    if (!redirectMatches(client.redirect_uris, redirectUri)) {
      return page(
        'The redirect URI is not the client’s',
        'The request’s redirect_uri is not one of those the client registered or published, ' +
          'so Keyway will not send anything there.',
      );
    }
    const state = once('state');
    const fail = (error: string, description: string): SignInAnswer => ({
      step: {
        kind: 'redirect',
        location: respond(this.#deps, redirectUri, state ?? null, {
          error,
          error_description: description,
        }),
      },
      binding: null,
    });
    for (const name of [
      'response_type',
      'code_challenge',
      'code_challenge_method',
      'resource',
      'scope',
    ]) {
      if (once(name) === undefined) return fail('invalid_request', `"${name}" is given twice`);
    }
    if (state === undefined) return fail('invalid_request', '"state" is given twice');
    if (once('response_type') !== 'code') {
      return fail('unsupported_response_type', 'Keyway issues codes only: response_type=code');
    }
    const challenge = once('code_challenge');
    if (challenge === null || challenge === undefined) {
      return fail('invalid_request', 'PKCE is required: send code_challenge with S256');
    }
    if (once('code_challenge_method') !== 'S256') {
      return fail('invalid_request', 'code_challenge_method must be S256 (plain is refused)');
    }
    if (!S256_CHALLENGE.test(challenge)) {
      return fail('invalid_request', 'code_challenge is not a base64url SHA-256');
    }
    const resource = once('resource');
    if (resource === null || resource === undefined) {
      return fail('invalid_request', 'resource is required: the URL of the MCP endpoint');
    }
    const endpoint = endpointOfResource(this.#deps.issuer, resource);
    if (endpoint === null) {
      return fail('invalid_target', 'resource is not one of this Keyway’s MCP endpoints');
    }
    if (state !== null && state.length > 2000) return fail('invalid_request', 'state is too long');
    const fresh = binding === null || !/^[A-Za-z0-9_-]{43}$/.test(binding);
    const browser = fresh ? toBase64Url(this.#deps.randomBytes(32)) : binding;
    const request: RequestState = {
      kind: 'sign_in_request',
      client_id: client.client_id,
      redirect_uri: redirectUri,
      state,
      code_challenge: challenge,
      resource,
      endpoint,
      binding: bindingHash(browser),
      signed_in: null,
      upstream: null,
    };
    return {
      step: await this.#signInPage(request, client, null),
      binding: fresh ? browser : null,
    };
  }

  /** The sign-in page of a request, under a fresh handle. */
  async #signInPage(
    request: RequestState,
    client: SignInClient,
    problem: string | null,
  ): Promise<SignInStep> {
    return {
      kind: 'sign_in',
      request: await this.#keep(request),
      client: shown(client, request.redirect_uri),
      endpoint: request.endpoint,
      methods: this.#deps.settings.methods,
      problem,
    };
  }

  /** Keeps a request for the next page: its new handle. */
  async #keep(request: RequestState): Promise<string> {
    const handle = newSecret(this.#deps, 'kwq_');
    await keep(this.#deps, handle, request.endpoint, request, this.#deps.now() + PAGE_TTL_MS);
    return handle;
  }

  /** Takes a request a form names, if this browser opened it. */
  async #taken(handle: string, binding: string | null): Promise<RequestState | null> {
    const request = await take(this.#deps, handle, RequestStateSchema);
    return request !== null && sameBinding(request, binding) ? request : null;
  }

  /**
   * The sign-in form with a pasted broker token: the consent page when the token covers the
   * endpoint, else the sign-in page again saying why.
   */
  async withToken(
    handle: string,
    token: string,
    binding: string | null,
    clientAddress: string | null,
  ): Promise<SignInAnswer> {
    const request = await this.#taken(handle, binding);
    if (request === null || request.signed_in !== null) return page('Start again', START_AGAIN);
    const client = await this.#clientOf(request);
    if (client === null)
      return page('This client cannot sign in', 'The client is no longer known.');
    if (!this.#deps.settings.methods.includes('token')) {
      return page('Sign-in with a token is off', 'The operator has not turned it on.');
    }
    const again = async (problem: string) => ({
      step: await this.#signInPage(request, client, problem),
      binding: null,
    });
    let principal: Awaited<ReturnType<SignInDeps['authenticate']>>;
    try {
      principal = await this.#deps.authenticate(token.trim(), {
        ...(clientAddress === null ? {} : { clientAddress }),
      });
    } catch (error) {
      if (!(error instanceof KeywayError)) throw error;
      return again(
        error.code === 'rate_limited'
          ? `Too many failed attempts from this address: try again in ${error.retryAfter ?? 60} s.`
          : 'That token is not valid: it may have expired or been deleted.',
      );
    }
    if (principal.kind === 'root') {
      return again('Paste a broker token, not the root key: the grant is delegated from it.');
    }
    const path = endpointPath(request.endpoint);
    if (!setCoversPath(principal.scopes, path)) {
      return again(`That token does not cover ${path}.`);
    }
    const signedIn: SignedIn = {
      method: 'token',
      name: principal.name,
      id_hash: principal.idHash ?? '',
    };
    return {
      step: await this.#consentPage({ ...request, signed_in: signedIn }, client),
      binding: null,
    };
  }

  /** The consent page of a request whose user signed in. */
  async #consentPage(request: RequestState, client: SignInClient): Promise<SignInStep> {
    const signedIn = request.signed_in as SignedIn;
    return {
      kind: 'consent',
      request: await this.#keep(request),
      client: shown(client, request.redirect_uri),
      endpoint: request.endpoint,
      user: signedIn.method === 'token' ? signedIn.name : signedIn.display,
      lifetimes: {
        access: this.#deps.settings.accessTokenTtl,
        grant: this.#deps.settings.grantTtl,
      },
    };
  }

  /** The client of a request, or `null` when it is no longer known. */
  async #clientOf(request: RequestState): Promise<SignInClient | null> {
    try {
      return await this.#clients.resolve(request.client_id);
    } catch (error) {
      if (error instanceof UntrustedClient) return null;
      throw error;
    }
  }

  /**
   * The consent form: `approve` redirects with a code, `deny` with `access_denied`.
   */
  async decide(handle: string, decision: string, binding: string | null): Promise<SignInAnswer> {
    const request = await this.#taken(handle, binding);
    if (request === null || request.signed_in === null) return page('Start again', START_AGAIN);
    const redirect = (params: Record<string, string>): SignInAnswer => ({
      step: {
        kind: 'redirect',
        location: respond(this.#deps, request.redirect_uri, request.state, params),
      },
      binding: null,
    });
    if (decision !== 'approve') {
      return redirect({ error: 'access_denied', error_description: 'the user denied the request' });
    }
    const client = await this.#clientOf(request);
    if (client === null)
      return page('This client cannot sign in', 'The client is no longer known.');
    const code = newSecret(this.#deps, '');
    await keep(
      this.#deps,
      code,
      request.endpoint,
      {
        kind: 'sign_in_code',
        client_id: request.client_id,
        client_name: client.client_name,
        verified_host: client.verified_host,
        redirect_uri: request.redirect_uri,
        code_challenge: request.code_challenge,
        resource: request.resource,
        endpoint: request.endpoint,
        signed_in: request.signed_in,
      },
      this.#deps.now() + CODE_TTL_MS,
    );
    return redirect({ code });
  }

  /** Keeps a request while its user is at the upstream provider: the state handle. */
  async upstreamPending(request: RequestState, verifier: string, nonce: string): Promise<string> {
    return this.#keep({ ...request, upstream: { verifier, nonce } });
  }

  /** Takes the request an upstream provider's answer names (by its state). */
  takeForUpstream(handle: string, binding: string | null): Promise<RequestState | null> {
    return this.#taken(handle, binding);
  }

  /** The consent page after an upstream sign-in, or the sign-in page saying why not. */
  async afterUpstream(request: RequestState, outcome: SignedIn | string): Promise<SignInAnswer> {
    const client = await this.#clientOf(request);
    if (client === null)
      return page('This client cannot sign in', 'The client is no longer known.');
    const reset = { ...request, upstream: null };
    if (typeof outcome === 'string') {
      return { step: await this.#signInPage(reset, client, outcome), binding: null };
    }
    return {
      step: await this.#consentPage({ ...reset, signed_in: outcome }, client),
      binding: null,
    };
  }

  /** The request of a sign-in form, taken, with its client: for the upstream way. */
  async forUpstream(
    handle: string,
    binding: string | null,
  ): Promise<{ request: RequestState; client: SignInClient } | SignInAnswer> {
    const request = await this.#taken(handle, binding);
    if (request === null || request.signed_in !== null) return page('Start again', START_AGAIN);
    const client = await this.#clientOf(request);
    if (client === null)
      return page('This client cannot sign in', 'The client is no longer known.');
    return { request, client };
  }
}

/** The client as a page shows it, with where this request returns to. */
function shown(client: SignInClient, redirectUri: string): ClientShown {
  return {
    client_id: client.client_id,
    name: client.client_name,
    verified_host: client.verified_host,
    returns_to: returnHost(redirectUri),
  };
}

/** Whether a PKCE verifier answers a challenge (RFC 7636 §4.6), in constant time. */
export function verifierAnswers(verifier: string, challenge: string): boolean {
  if (!/^[A-Za-z0-9._~-]{43,128}$/.test(verifier)) return false;
  return timingSafeEqual(utf8(toBase64Url(sha256(utf8(verifier)))), utf8(challenge));
}
