/*
 * The inspector's one way to the broker: Keyway's API on this origin, with the credential
 * typed into the page. The credential lives in this module's memory only — never in a URL, a
 * cookie or storage — and is gone when the tab closes.
 */

export type Json = Record<string, unknown>;

/** The path the broker is served under (`''` at the root): the page is `{base}/inspector`. */
export const base = location.pathname.replace(/\/inspector\/?$/, '');

let credential: string | null = null;

/** Holds the credential for the calls that follow (`null`: forget it). */
export function holdCredential(value: string | null): void {
  credential = value;
}

/** An error answer of the API (docs/api.md §1.2), or Keyway out of reach (`status` 0). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: unknown,
  ) {
    super(message);
  }
}

/** Calls Keyway's API with the credential; answers the JSON body (`{}` for a 204). */
export async function api<T = Json>(method: string, path: string, body?: unknown): Promise<T> {
  if (credential === null)
    throw new ApiError(401, 'invalid_token', 'enter a credential first', null);
  let response: Response;
  try {
    response = await fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${credential}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      credentials: 'omit',
      cache: 'no-store',
    });
  } catch {
    throw new ApiError(0, 'unreachable', 'Keyway could not be reached', null);
  }
  if (response.status === 204) return {} as T;
  const answer = (await response.json().catch(() => ({}))) as Json;
  if (!response.ok) {
    throw new ApiError(
      response.status,
      String(answer.error ?? `http_${response.status}`),
      String(answer.error_description ?? `HTTP ${response.status}`),
      answer.details ?? null,
    );
  }
  return answer as T;
}

/** The public OpenAPI document of this broker (no credential needed). */
export async function openApi(): Promise<Json> {
  const response = await fetch(`${base}/api/openapi.json`, { credentials: 'omit' });
  return (await response.json()) as Json;
}

/** A resource path in a URL: each segment encoded, the slashes kept. */
export const encodePath = (path: string) => path.split('/').map(encodeURIComponent).join('/');

/** A query string of the values that are set. */
export function query(values: Record<string, string | undefined>): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(values)) if (value) params.set(name, value);
  const text = params.toString();
  return text === '' ? '' : `?${text}`;
}

/** A page of a list (docs/api.md §1.4). */
export interface Page<T> {
  items: T[];
  next_cursor: string | null;
}

/** What `GET /api/admin/status` says about the credential and the deployment. */
export interface Whoami {
  name: string | null;
  scopes: string[];
  expires_at: string | null;
  provider_management: boolean;
  /** Whether MCP clients may sign in (docs/api.md §17): the Grants view. */
  sign_in: boolean;
  version: string;
}

/** Checks the credential: who it is, and what the deployment allows. */
export async function whoami(): Promise<Whoami> {
  const status = await api<{
    version: string;
    provider_management: boolean;
    sign_in: boolean;
    credential: { name: string | null; scopes: string[]; expires_at: string | null };
  }>('GET', '/api/admin/status');
  return {
    ...status.credential,
    provider_management: status.provider_management,
    sign_in: status.sign_in,
    version: status.version,
  };
}

/** A failure in words for a person: what failed, and what to do about a refused credential. */
export function describe(error: unknown): string {
  if (!(error instanceof ApiError)) return `Unexpected: ${String(error)}`;
  if (error.status === 0) return 'Keyway could not be reached: is it running?';
  if (error.code === 'invalid_token')
    return 'The credential was refused: check the root key or broker token.';
  return `${error.code}: ${error.message}`;
}
