import type { SignInAnswer, SignInStep } from '@keyway/core/sign-in';
import { escapeHtml } from './callback-page.js';
import type { Reply } from './responses.js';

/*
 * The pages of sign-in for MCP clients (docs/api.md §17): sign in, consent, or a page that
 * says what is wrong. They load nothing from elsewhere, run no script, cannot be framed,
 * send no Referer (a code or handle never leaves in one), and are never cached. Their forms
 * work only in the browser that opened them: the binding cookie is `HttpOnly`,
 * `SameSite=Lax`, short-lived, and `__Host-` wherever the issuer is https.
 */

/** How long the binding cookie lives: as long as a page's handle. */
const BINDING_SECONDS = 600;

/** The binding cookie's name: `__Host-` needs https, which loopback development lacks. */
export function bindingCookieName(issuer: string): string {
  return issuer.startsWith('https://') ? '__Host-keyway-sign-in' : 'keyway-sign-in';
}

/** The binding cookie a request carries, or `null`. */
export function bindingOf(cookieHeader: string | null, issuer: string): string | null {
  if (cookieHeader === null) return null;
  const name = bindingCookieName(issuer);
  for (const part of cookieHeader.split(';')) {
    const [key, ...value] = part.trim().split('=');
    if (key === name) return value.join('=');
  }
  return null;
}

function setCookie(issuer: string, value: string): string {
  const secure = issuer.startsWith('https://') ? '; Secure' : '';
  return `${bindingCookieName(issuer)}=${value}; Path=/; Max-Age=${BINDING_SECONDS}; HttpOnly; SameSite=Lax${secure}`;
}

const PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'content-security-policy':
    "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
};

const STYLE =
  'body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem;color:#1a1a1a}' +
  'dl{display:grid;grid-template-columns:auto 1fr;gap:.25rem 1rem}dt{font-weight:600}' +
  'dd{margin:0;word-break:break-all}' +
  'label{display:block;font-weight:600;margin:1rem 0 .25rem}' +
  'input[type=password]{width:100%;padding:.5rem;font:inherit}' +
  'button{font:inherit;padding:.5rem 1rem;margin:1rem .5rem 0 0;cursor:pointer}' +
  '.problem{border-left:4px solid #b00020;padding:.5rem 1rem;background:#fdecee}' +
  '.note{color:#444;font-size:.9rem}';

function html(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title><style>${STYLE}</style></head>
<body><main><h1>${escapeHtml(title)}</h1>${body}</main></body></html>
`;
}

/** Seconds as the pages say them: `1 hour`, `30 days`. */
function duration(seconds: number): string {
  const units: [number, string][] = [
    [86_400, 'day'],
    [3600, 'hour'],
    [60, 'minute'],
  ];
  for (const [size, unit] of units) {
    if (seconds >= size && seconds % size === 0) {
      const count = seconds / size;
      return `${count} ${unit}${count === 1 ? '' : 's'}`;
    }
  }
  return `${seconds} seconds`;
}

type ShownStep = Extract<SignInStep, { kind: 'sign_in' | 'consent' }>;

/** Who asks, in a list a user can check: its name in its own words, and what proves what. */
function clientDetails(step: ShownStep): string {
  const { client } = step;
  const proof =
    client.verified_host === null
      ? 'unverified (the client registered itself)'
      : `${client.verified_host} (its metadata document is served there)`;
  return (
    '<dl>' +
    `<dt>Client</dt><dd>${escapeHtml(client.name ?? 'unnamed client')} <span class="note">(its own words)</span></dd>` +
    `<dt>Client ID</dt><dd>${escapeHtml(client.client_id)}</dd>` +
    `<dt>Verified</dt><dd>${escapeHtml(proof)}</dd>` +
    `<dt>Returns to</dt><dd>${escapeHtml(client.returns_to)}</dd>` +
    `<dt>Endpoint</dt><dd>${escapeHtml(step.endpoint)}</dd>` +
    '</dl>'
  );
}

function hidden(name: string, value: string): string {
  return `<input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value)}">`;
}

/** A form of the pages: where it posts, the request's handle, and what it does. */
function formStart(action: string, request: string, kind: 'token' | 'oidc' | 'consent'): string {
  return (
    `<form method="post" action="${escapeHtml(action)}">` +
    `${hidden('request', request)}${hidden('action', kind)}`
  );
}

function signInPage(step: Extract<SignInStep, { kind: 'sign_in' }>, action: string): string {
  const who = step.client.name ?? 'An MCP client';
  const problem =
    step.problem === null ? '' : `<p class="problem" role="alert">${escapeHtml(step.problem)}</p>`;
  const token = step.methods.includes('token')
    ? `${formStart(action, step.request, 'token')}<label for="token">Your broker token</label>` +
      '<input type="password" id="token" name="token" autocomplete="off" required ' +
      'spellcheck="false" aria-describedby="token-note">' +
      '<p class="note" id="token-note">It stays with Keyway: the client gets a token of its own, ' +
      'for this endpoint only.</p><button type="submit">Sign in</button></form>'
    : '';
  const oidc = step.methods.includes('oidc')
    ? `${formStart(action, step.request, 'oidc')}` +
      '<button type="submit">Sign in with your identity provider</button></form>'
    : '';
  return html(
    'Sign in to Keyway',
    `<p>${escapeHtml(who)} asks to use a connection through Keyway. Sign in to decide.</p>` +
      problem +
      clientDetails(step) +
      token +
      oidc,
  );
}

function consentPage(step: Extract<SignInStep, { kind: 'consent' }>, action: string): string {
  const who = step.client.name ?? 'This MCP client';
  return html(
    `Allow ${who}?`,
    `<p>Signed in as <strong>${escapeHtml(step.user)}</strong>. ${escapeHtml(who)} asks to use ` +
      `<strong>${escapeHtml(step.endpoint)}</strong> through Keyway, without ever seeing its credentials.</p>` +
      clientDetails(step) +
      `<p class="note">Its access tokens last ${duration(step.lifetimes.access)} and are renewed for up to ` +
      `${duration(step.lifetimes.grant)}, or until you revoke the grant or the token you signed in with ends.</p>` +
      formStart(action, step.request, 'consent') +
      '<button type="submit" name="decision" value="approve">Allow</button>' +
      '<button type="submit" name="decision" value="deny">Deny</button></form>',
  );
}

/**
 * A sign-in answer as a reply: a page (with the binding cookie when there is a new one), or
 * a redirect (`302` after a GET, `303` after a form, so the browser follows with a GET).
 */
export function signInReply(
  answer: SignInAnswer,
  options: { issuer: string; action: string; afterForm: boolean },
): Reply {
  const { step } = answer;
  const cookie: Record<string, string> =
    answer.binding === null ? {} : { 'set-cookie': setCookie(options.issuer, answer.binding) };
  if (step.kind === 'redirect') {
    return {
      status: options.afterForm ? 303 : 302,
      headers: {
        location: step.location,
        'cache-control': 'no-store',
        'referrer-policy': 'no-referrer',
      },
      body: null,
    };
  }
  if (step.kind === 'error') {
    return {
      status: 400,
      headers: PAGE_HEADERS,
      body: html(step.title, `<p>${escapeHtml(step.message)}</p>`),
    };
  }
  const body =
    step.kind === 'sign_in' ? signInPage(step, options.action) : consentPage(step, options.action);
  return { status: 200, headers: { ...PAGE_HEADERS, ...cookie }, body };
}
