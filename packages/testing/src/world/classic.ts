import { json, oauthError, random } from './http.js';
import type { ClassicQuirks } from './options.js';

/*
 * The classic OAuth 2 APIs' ways (`TestWorldOptions.classic`): how their token endpoints
 * read requests and write answers, and how their consent pages read scopes. Each switch
 * is a quirk of some real server, for tests of the `oauth2` template's profiles.
 */

/**
 * The token request's parameters, read as the server reads them: a body of the wrong
 * format, or a missing required header, is refused as the server would.
 */
export async function readTokenRequest(
  request: Request,
  quirks: ClassicQuirks | undefined,
): Promise<URLSearchParams | Response> {
  const text = await request.text();
  const type = request.headers.get('content-type') ?? '';
  const wanted = quirks?.tokenRequestFormat ?? 'form';
  if (quirks !== undefined) {
    for (const [name, value] of Object.entries(quirks.requiredTokenHeaders ?? {})) {
      if (request.headers.get(name) !== value)
        return oauthError(400, 'invalid_request', `the ${name} header must be ${value}`);
    }
    if (wanted === 'json' && !type.startsWith('application/json'))
      return oauthError(400, 'invalid_request', 'this server reads JSON token requests');
    if (wanted === 'form' && type.startsWith('application/json'))
      return oauthError(400, 'invalid_request', 'this server reads form-encoded token requests');
  }
  if (wanted === 'json') {
    const body = JSON.parse(text) as Record<string, unknown>;
    return new URLSearchParams(
      Object.entries(body).map(([name, value]) => [name, String(value)] as [string, string]),
    );
  }
  return new URLSearchParams(text);
}

/** A form-encoded answer of flat fields. */
function formAnswer(status: number, body: Record<string, unknown>): Response {
  const form = new URLSearchParams();
  for (const [name, value] of Object.entries(body)) form.set(name, String(value));
  return new Response(form.toString(), {
    status,
    headers: { 'content-type': 'application/x-www-form-urlencoded', 'cache-control': 'no-store' },
  });
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** `extra` merged into `body`, objects into objects. */
function merged(body: Record<string, unknown>, extra: Record<string, unknown>) {
  const out: Record<string, unknown> = { ...body };
  for (const [name, value] of Object.entries(extra)) {
    const here = out[name];
    out[name] = isObject(here) && isObject(value) ? merged(here, value) : value;
  }
  return out;
}

/** A token answer as the classic server writes it. */
export function classicAnswer(body: Record<string, unknown>, quirks: ClassicQuirks): Response {
  let answer: Record<string, unknown> = { ...body };
  if (quirks.nestTokensUnder !== undefined) {
    // The connection's tokens one level down; at the top, another server's token.
    answer = { access_token: random('other_'), token_type: 'bot', [quirks.nestTokensUnder]: body };
  }
  answer = merged({ ...(quirks.okField ? { ok: true } : {}), ...answer }, quirks.answerExtra ?? {});
  return quirks.formEncodedAnswers ? formAnswer(200, answer) : json(200, answer);
}

/**
 * A token error as the classic server writes it, or `null` when it writes them as RFC 6749
 * does.
 */
export function classicError(
  status: number,
  error: string,
  description: string | undefined,
  quirks: ClassicQuirks | undefined,
): Response | null {
  const fields = quirks?.errorFields;
  if (fields !== undefined) {
    return json(status, {
      object: 'error',
      status,
      [fields.error]: error,
      [fields.description]: description ?? error,
    });
  }
  const body = { error, ...(description ? { error_description: description } : {}) };
  if (quirks?.okField) return json(200, { ok: false, ...body });
  if (quirks?.formEncodedAnswers) return formAnswer(200, body);
  return null;
}

/**
 * What the consent page reads of an authorization request as the classic server does: its
 * scopes (space-joined), or the fault a missing required parameter is.
 */
export function classicConsent(
  params: URLSearchParams,
  quirks: ClassicQuirks | undefined,
): { scope: string; fault: string | null } {
  const raw = params.get(quirks?.scopeParam ?? 'scope') ?? '';
  const scope = raw
    .split(quirks?.scopeSeparator ?? ' ')
    .filter(Boolean)
    .join(' ');
  for (const [name, value] of Object.entries(quirks?.requiredAuthorizationParams ?? {})) {
    if (params.get(name) !== value) return { scope, fault: 'invalid_request' };
  }
  return { scope, fault: null };
}

/**
 * The classic API's answer to `request` (`classic.apiBase`, `classic.afterConnect`), or
 * `null` when the request is not for it.
 */
export async function classicApi(
  request: Request,
  quirks: ClassicQuirks | undefined,
  isValidAccessToken: (token: string) => boolean,
  served: () => void,
): Promise<Response | null> {
  const here = request.url.split('?')[0] as string;
  const base = quirks?.apiBase?.replace(/\/$/, '');
  const after = quirks?.afterConnect;
  const isAfter = after !== undefined && request.method === 'GET' && here === after.url;
  const isApi = base !== undefined && (here === base || here.startsWith(`${base}/`));
  if (!isAfter && !isApi) return null;
  const presented = (request.headers.get('authorization') ?? '').replace(/^bearer\s+/i, '');
  if (!isValidAccessToken(presented)) {
    return json(
      401,
      { error: 'invalid_token' },
      { 'www-authenticate': 'Bearer error="invalid_token"' },
    );
  }
  served();
  if (isAfter) return json(200, after.answer);
  const headers: Record<string, string> = {};
  for (const [name, value] of request.headers) if (name !== 'authorization') headers[name] = value;
  return json(200, {
    method: request.method,
    url: request.url,
    headers,
    body: await request.text(),
  });
}
