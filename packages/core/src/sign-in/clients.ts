import { KeywayError } from '../contract/errors.js';
import { OutboundError } from '../outbound/network-failure.js';
import { setBounded } from '../platform/bounded.js';
import { toBase64Url } from '../platform/bytes.js';
import type { SignInDeps } from './deps.js';
import { redirectUriProblem } from './redirects.js';

/*
 * The MCP clients that sign in to Keyway (docs/api.md §17): a client whose `client_id` is
 * the https URL of its metadata document (read through the guarded fetch, bounded, cached a
 * few minutes, and only if it names itself), or one that registered (RFC 7591), public
 * only, forgotten after 30 days unused. Either way the redirect URIs are the client's word,
 * matched exactly at authorization.
 */

/** A client, as the authorization endpoint and the consent page see it. */
export interface SignInClient {
  client_id: string;
  /** Its name, as it says; shown as the client's word, never as proof. */
  client_name: string | null;
  redirect_uris: readonly string[];
  /**
   * The host its `client_id` URL proves (a metadata document comes from there), or `null`
   * for a registered client, which proves nothing ("unverified" on the consent page).
   */
  verified_host: string | null;
}

/** The vault kind of registered clients, keyed by client id. */
export const REGISTERED_CLIENT_KIND = 'sign_in_client';
/** A registered client is forgotten after this long unused. */
export const CLIENT_IDLE_MS = 30 * 24 * 3600 * 1000;
/** How long a metadata document is kept before it is read again. */
const DOCUMENT_TTL_MS = 5 * 60 * 1000;
/** Most documents kept at once. */
const MAX_CACHED = 1000;
/** A metadata document larger than this is refused. */
const MAX_DOCUMENT_BYTES = 16 * 1024;
/** A registered client's last use is written at most this often. */
const TOUCH_EVERY_MS = 24 * 3600 * 1000;

/** What a registered client's vault entry holds. */
interface RegisteredClient {
  client_id: string;
  client_name: string | null;
  redirect_uris: string[];
  created_at: number;
}

/** A client that cannot be trusted: the authorization endpoint answers a page, no redirect. */
export class UntrustedClient extends Error {
  override readonly name = 'UntrustedClient';
}

/** Control characters and bidirectional overrides: a name that hides or reorders text. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it removes
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/** A client name as a page may show it: printable, at most 100 characters, or `null`. */
function displayName(value: unknown): string | null {
  if (typeof value !== 'string') return null;
  const printable = value.replace(UNPRINTABLE, '').trim();
  if (printable === '') return null;
  return printable.length > 100 ? `${printable.slice(0, 99)}…` : printable;
}

/** Whether a client id is the URL of a metadata document rather than a registered id. */
export const isDocumentClientId = (clientId: string) => clientId.startsWith('https://');

/** Why a client id URL cannot name a metadata document, or `null`. */
function documentUrlProblem(clientId: string): string | null {
  let url: URL;
  try {
    url = new URL(clientId);
  } catch {
    return 'is not a URL';
  }
  if (url.pathname === '/') return 'has no path';
  if (url.username !== '' || url.password !== '') return 'contains user info';
  if (url.hash !== '' || clientId.includes('#')) return 'has a fragment';
  if (url.href !== clientId) return 'is not in its normal form';
  if (/\/\.{1,2}(\/|$)/.test(url.pathname)) return 'has a dot segment';
  return null;
}

/** Resolves clients: metadata documents (cached) and registered ones. */
export class SignInClients {
  readonly #deps: SignInDeps;
  readonly #documents = new Map<string, { client: SignInClient; until: number }>();

  constructor(deps: SignInDeps) {
    this.#deps = deps;
  }

  /**
   * The client a `client_id` names.
   *
   * @throws {UntrustedClient} with the reason, for a page: unknown, unreadable or invalid.
   */
  async resolve(clientId: string): Promise<SignInClient> {
    if (clientId === '' || clientId.length > 2000) throw new UntrustedClient('no valid client_id');
    return isDocumentClientId(clientId) ? this.#document(clientId) : this.#registered(clientId);
  }

  async #document(clientId: string): Promise<SignInClient> {
    const now = this.#deps.now();
    const cached = this.#documents.get(clientId);
    if (cached !== undefined && cached.until > now) return cached.client;
    const problem = documentUrlProblem(clientId);
    if (problem !== null) throw new UntrustedClient(`the client_id URL ${problem}`);
    const client = await this.#read(clientId);
    setBounded(this.#documents, clientId, { client, until: now + DOCUMENT_TTL_MS }, MAX_CACHED);
    return client;
  }

  /** Reads and checks a client's metadata document. */
  async #read(clientId: string): Promise<SignInClient> {
    const host = new URL(clientId).host;
    let text: string;
    try {
      const response = await this.#deps.outbound(clientId, {
        headers: { accept: 'application/json' },
        redirect: 'error',
        signal: AbortSignal.timeout(5000),
      });
      if (response.status !== 200) {
        throw new UntrustedClient(
          `the client's metadata document answered HTTP ${response.status}`,
        );
      }
      text = await response.text();
    } catch (error) {
      if (error instanceof UntrustedClient) throw error;
      const reason = error instanceof OutboundError ? error.message : 'it could not be read';
      throw new UntrustedClient(`the client's metadata document could not be read: ${reason}`);
    }
    if (new TextEncoder().encode(text).length > MAX_DOCUMENT_BYTES) {
      throw new UntrustedClient(
        `the client's metadata document is larger than ${MAX_DOCUMENT_BYTES} bytes`,
      );
    }
    let document: Record<string, unknown>;
    try {
      const parsed: unknown = JSON.parse(text);
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error();
      document = parsed as Record<string, unknown>;
    } catch {
      throw new UntrustedClient("the client's metadata document is not a JSON object");
    }
    if (document.client_id !== clientId) {
      throw new UntrustedClient(
        "the client's metadata document does not name its own URL as client_id",
      );
    }
    const method = document.token_endpoint_auth_method;
    if (method !== undefined && method !== 'none') {
      throw new UntrustedClient(
        `the client authenticates with ${JSON.stringify(method)}; Keyway takes public clients ("none")`,
      );
    }
    const redirects = checkedRedirects(document.redirect_uris);
    if (typeof redirects === 'string') {
      throw new UntrustedClient(`the client's metadata document: ${redirects}`);
    }
    return {
      client_id: clientId,
      client_name: displayName(document.client_name),
      redirect_uris: redirects,
      verified_host: host,
    };
  }

  async #registered(clientId: string): Promise<SignInClient> {
    const { storage, vault, now } = this.#deps;
    const entry = await storage.getVaultEntry(REGISTERED_CLIENT_KIND, clientId);
    if (entry === null || entry.updatedAt + CLIENT_IDLE_MS <= now()) {
      throw new UntrustedClient(
        'the client is unknown (it may have been forgotten after 30 days unused)',
      );
    }
    const client = JSON.parse(await vault().open(entry)) as RegisteredClient;
    // Its last use, written at most once a day: what keeps it from being forgotten.
    if (entry.updatedAt + TOUCH_EVERY_MS <= now()) {
      const sealed = await vault().seal(
        { kind: REGISTERED_CLIENT_KIND, key: clientId },
        JSON.stringify(client),
      );
      await storage.putVaultEntry(sealed, now());
    }
    return {
      client_id: client.client_id,
      client_name: client.client_name,
      redirect_uris: client.redirect_uris,
      verified_host: null,
    };
  }

  /**
   * Registers a public client (RFC 7591 §3.1), counted per client address.
   *
   * @returns the client information response (RFC 7591 §3.2.1).
   * @throws {KeywayError} `invalid_request` naming the field (answered as
   *   `invalid_redirect_uri` / `invalid_client_metadata` by the route), `rate_limited`.
   */
  async register(body: unknown, clientAddress: string | null): Promise<Record<string, unknown>> {
    if (clientAddress !== null && clientAddress !== '') {
      await this.#deps.limiter?.countRegistration(clientAddress);
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw metadataError('', 'the body is not a JSON object');
    }
    const metadata = body as Record<string, unknown>;
    const redirects = checkedRedirects(metadata.redirect_uris);
    if (typeof redirects === 'string') throw metadataError('redirect_uris', redirects);
    const method = metadata.token_endpoint_auth_method;
    if (method !== undefined && method !== 'none') {
      throw metadataError(
        'token_endpoint_auth_method',
        `Keyway registers public clients only: "none", not ${JSON.stringify(method)}`,
      );
    }
    const grants = metadata.grant_types ?? ['authorization_code', 'refresh_token'];
    if (
      !Array.isArray(grants) ||
      !grants.every((grant) => grant === 'authorization_code' || grant === 'refresh_token')
    ) {
      throw metadataError('grant_types', 'takes "authorization_code" and "refresh_token" only');
    }
    const responses = metadata.response_types ?? ['code'];
    if (!Array.isArray(responses) || !responses.every((type) => type === 'code')) {
      throw metadataError('response_types', 'takes "code" only');
    }
    const { now, randomBytes, storage, vault } = this.#deps;
    const client: RegisteredClient = {
      client_id: `kwc-${toBase64Url(randomBytes(18))}`,
      client_name: displayName(metadata.client_name),
      redirect_uris: redirects,
      created_at: now(),
    };
    const sealed = await vault().seal(
      { kind: REGISTERED_CLIENT_KIND, key: client.client_id },
      JSON.stringify(client),
    );
    await storage.putVaultEntry(sealed, now());
    return {
      client_id: client.client_id,
      client_id_issued_at: Math.floor(client.created_at / 1000),
      ...(client.client_name === null ? {} : { client_name: client.client_name }),
      redirect_uris: client.redirect_uris,
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    };
  }

  /** Forgets registered clients unused for 30 days. @returns how many. */
  async forgetIdle(): Promise<number> {
    const { storage, now } = this.#deps;
    let forgotten = 0;
    let after: string | undefined;
    for (;;) {
      const page = await storage.listVaultEntries({
        kind: REGISTERED_CLIENT_KIND,
        limit: 200,
        ...(after === undefined ? {} : { after }),
      });
      for (const entry of page) {
        if (entry.updatedAt + CLIENT_IDLE_MS <= now()) {
          if (await storage.deleteVaultEntry(REGISTERED_CLIENT_KIND, entry.key)) forgotten++;
        }
      }
      if (page.length < 200) return forgotten;
      after = page.at(-1)?.key;
    }
  }
}

/** A refused registration field (RFC 7591 §3.2.2), as a Keyway error naming it. */
function metadataError(field: string, message: string): KeywayError {
  return new KeywayError('invalid_request', field === '' ? message : `"${field}" ${message}`, {
    details: [{ path: field, message }],
  });
}

/** A client's redirect URIs, checked, or why they are not acceptable. */
function checkedRedirects(value: unknown): string[] | string {
  if (!Array.isArray(value) || value.length === 0) {
    return 'redirect_uris must be a non-empty list of URIs';
  }
  if (value.length > 20) return 'redirect_uris lists more than 20 URIs';
  const uris: string[] = [];
  for (const [index, uri] of value.entries()) {
    if (typeof uri !== 'string') return `redirect_uris[${index}] is not a string`;
    const problem = redirectUriProblem(uri);
    if (problem !== null) return `redirect_uris[${index}] ${problem}`;
    uris.push(uri);
  }
  return uris;
}
