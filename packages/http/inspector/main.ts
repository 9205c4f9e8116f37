/*
 * Keyway's inspector: the connect flow, step by step, in plain TypeScript and the DOM.
 * The credential lives in this module's memory only: never in a URL, a cookie or storage.
 * Every value from the API is written with textContent, never as HTML.
 */

import { CALLBACK_CHANNEL } from './channel.js';

type Json = Record<string, unknown>;

const base = location.pathname.replace(/\/inspector\/?$/, '');
let credential: string | null = null;

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const status = $('status');

/** Announces a line in the live region (screen readers hear it). */
function say(text: string, kind: 'info' | 'error' = 'info'): void {
  status.textContent = text;
  status.dataset.kind = kind;
}

/** An element with text and children, built without HTML parsing. */
function el(tag: string, text = '', attributes: Record<string, string> = {}, ...children: Node[]) {
  const node = document.createElement(tag);
  if (text !== '') node.textContent = text;
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  node.append(...children);
  return node;
}

class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: unknown,
  ) {
    super(message);
  }
}

/** Calls Keyway's API with the credential typed in. */
async function api(method: string, path: string, body?: unknown): Promise<Json> {
  if (credential === null)
    throw new ApiError(401, 'invalid_token', 'enter a credential first', null);
  const response = await fetch(`${base}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${credential}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    credentials: 'omit',
    cache: 'no-store',
  });
  if (response.status === 204) return {};
  const answer = (await response.json().catch(() => ({}))) as Json;
  if (!response.ok) {
    throw new ApiError(
      response.status,
      String(answer.error ?? `http_${response.status}`),
      String(answer.error_description ?? `HTTP ${response.status}`),
      answer.details,
    );
  }
  return answer;
}

const encodePath = (path: string) => path.split('/').map(encodeURIComponent).join('/');

/** Shows an API failure where it happened, and announces it. */
function fail(target: HTMLElement, error: unknown): void {
  const message =
    error instanceof ApiError
      ? error.code === 'invalid_token'
        ? 'The credential was refused: check the root key or broker token.'
        : `${error.code}: ${error.message}`
      : 'Keyway could not be reached.';
  target.replaceChildren(el('p', message, { class: 'error' }));
  if (error instanceof ApiError && Array.isArray(error.details))
    target.append(timeline(error.details));
  say(message, 'error');
}

/** What each step of a trace implements, so a failure can be read against its source. */
const REFERENCES: Record<string, string> = {
  probe: 'RFC 9728 §5.1 (the 401 challenge names the metadata)',
  resource_metadata: 'RFC 9728 §3 (protected-resource metadata)',
  resource_match: 'RFC 9728 §3.3 (the metadata names this resource)',
  authorization_server_metadata: 'RFC 8414 §3, §3.3 (metadata, exact issuer)',
  requirements: 'MCP authorization; RFC 7636 §4.2 (PKCE S256)',
  legacy: 'MCP 2025-03-26 (docs/api.md §6 item 9)',
  discover: 'MCP 2026-07-28, server/discover',
  initialize: 'MCP lifecycle, initialization',
  initialized: 'MCP lifecycle, initialization',
  'tools/list': 'MCP server features, tools',
  close: 'MCP Streamable HTTP, session management',
};

/** A discovery or probe trace as an ordered timeline of steps. */
function timeline(steps: unknown[]): HTMLElement {
  const list = el('ol', '', { class: 'timeline' });
  for (const raw of steps) {
    const step = raw as Json;
    const ok = step.ok === true;
    const item = el('li', '', { class: ok ? 'ok' : 'failed' });
    item.append(
      el('strong', `${ok ? '✓' : '✗'} ${String(step.step)}`),
      el(
        'span',
        step.status === null || step.status === undefined ? '' : ` HTTP ${String(step.status)}`,
      ),
    );
    if (typeof step.url === 'string') item.append(el('code', step.url));
    item.append(el('p', String(step.note ?? '')));
    const reference = REFERENCES[String(step.step)];
    if (reference !== undefined) item.append(el('small', `See ${reference}.`));
    list.append(item);
  }
  return list;
}

/** The first and last four characters of a token: enough to tell two apart. */
const mask = (token: string) =>
  token.length <= 12 ? '••••' : `${token.slice(0, 4)}…${token.slice(-4)}`;

// ─── 1. credential ───────────────────────────────────────────────────────────────────────
$('credential-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const input = $<HTMLInputElement>('credential');
  credential = input.value.trim();
  input.value = '';
  try {
    await api('GET', '/api/oauth/connections?limit=1');
    await loadProfiles();
    $('flow').hidden = false;
    $('lists').hidden = false;
    say('Credential accepted. It stays in this page’s memory until you close it.');
  } catch (error) {
    credential = null;
    fail($('credential-result'), error);
  }
});

// ─── 2. discovery ────────────────────────────────────────────────────────────────────────
$('discover-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const out = $('discover-result');
  out.replaceChildren(el('p', 'Discovering…'));
  try {
    const trace = await api('POST', '/api/admin/discover', {
      resource_url: $<HTMLInputElement>('resource-url').value.trim(),
    });
    out.replaceChildren(timeline(trace.steps as unknown[]));
    if (trace.ok === true) {
      const server = trace.authorization_server as Json;
      out.append(
        el(
          'p',
          `Authorization server ${String(server.issuer)}; scopes to request: ${(trace.scopes as string[]).join(' ') || '(none)'}.`,
        ),
      );
      say('Discovery succeeded.');
    } else {
      say(`Discovery failed: ${String(trace.error)}.`, 'error');
    }
  } catch (error) {
    fail(out, error);
  }
});

// ─── 3. provider ─────────────────────────────────────────────────────────────────────────
/** The catalog's profiles (docs/api.md §15), by id: their parameters' names. */
const profileParams = new Map<string, string[]>();

/** Fills the profile choice from `GET /api/admin/profiles`. */
async function loadProfiles(): Promise<void> {
  const page = await api('GET', '/api/admin/profiles');
  const select = $<HTMLSelectElement>('profile');
  select.replaceChildren();
  profileParams.clear();
  for (const raw of page.items as Json[]) {
    profileParams.set(String(raw.id), (raw.params as string[]).map(String));
    select.append(
      el('option', `${String(raw.label)} (${String(raw.id)})`, { value: String(raw.id) }),
    );
  }
  showParams();
}

/** One input per parameter of the chosen profile. */
function showParams(): void {
  const params = profileParams.get($<HTMLSelectElement>('profile').value) ?? [];
  const fields = params.flatMap((name) => {
    const label = el('label', `Parameter ${name}`, { for: `param-${name}` });
    const input = el('input', '', { id: `param-${name}`, required: '', 'data-param': name });
    return [label, input];
  });
  $('profile-params').replaceChildren(...fields);
}

$('profile').addEventListener('change', showParams);
$('provider-template').addEventListener('change', () => {
  const classic = $<HTMLSelectElement>('provider-template').value === 'oauth2';
  $('profile-fields').hidden = !classic;
  // A classic API's client is always the operator's.
  if (classic) $<HTMLSelectElement>('provider-mode').value = 'custom';
  $<HTMLSelectElement>('provider-mode').disabled = classic;
});

/** The body of the provider PUT for the chosen kind. */
function providerBody(credentials: Json | undefined): Json {
  if ($<HTMLSelectElement>('provider-template').value !== 'oauth2') {
    return {
      template: 'mcp',
      configuration: { resource_url: $<HTMLInputElement>('resource-url').value.trim() },
      ...(credentials === undefined ? {} : { credentials }),
    };
  }
  const params: Record<string, string> = {};
  for (const input of $('profile-params').querySelectorAll<HTMLInputElement>('input')) {
    params[String(input.dataset.param)] = input.value.trim();
  }
  const scopes = $<HTMLInputElement>('provider-scopes').value.split(/\s+/).filter(Boolean);
  return {
    template: 'oauth2',
    profile: $<HTMLSelectElement>('profile').value,
    configuration: {
      ...(scopes.length > 0 ? { scopes } : {}),
      ...(Object.keys(params).length > 0 ? { params } : {}),
    },
    credentials: credentials ?? {},
  };
}

$('provider-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const out = $('provider-result');
  const id = $<HTMLInputElement>('provider-id').value.trim();
  const mode = $<HTMLSelectElement>('provider-mode').value;
  const clientId = $<HTMLInputElement>('client-id').value.trim();
  const secretInput = $<HTMLInputElement>('client-secret');
  const secret = secretInput.value;
  secretInput.value = ''; // write-only: never shown again
  try {
    const view = await api(
      'PUT',
      `/api/admin/providers/${encodePath(id)}`,
      providerBody(
        mode === 'custom'
          ? { mode, client_id: clientId, ...(secret ? { client_secret: secret } : {}) }
          : undefined,
      ),
    );
    const credentials = view.credentials as Json;
    out.replaceChildren(
      el(
        'p',
        `Provider ${String(view.id)}: client ${String(credentials.client_id)} (${String(credentials.registration)}, ${String(credentials.token_endpoint_auth_method)}).`,
      ),
    );
    $<HTMLInputElement>('authorize-provider').value = String(view.id);
    say('Provider saved.');
  } catch (error) {
    fail(out, error);
  }
});

// ─── 4. authorize, consent in a new window, the callback reports back ───────────────────
let waiting: string | null = null;

/** Starts an authorization and opens its consent in a new window; says so in `out`. */
async function startAuthorization(
  out: HTMLElement,
  provider: string,
  connection: string,
  scopes: string[],
): Promise<void> {
  try {
    const started = await api('POST', `/api/oauth/authorize/${encodePath(provider)}`, {
      connection_id: connection,
      ...(scopes.length > 0 ? { scopes } : {}),
    });
    const url = new URL(String(started.authorization_url));
    const requested = url.searchParams.get('scope') ?? '(none)';
    waiting = connection;
    out.replaceChildren(
      el('p', `Scopes requested: ${requested}.`),
      el('p', 'Consent opens in a new window; this page updates when it is done.'),
    );
    // `noopener`: the authorization server's pages get no handle on this window, so they can
    // never navigate it to a look-alike (reverse tabnabbing). The outcome comes back over
    // a BroadcastChannel of this origin instead.
    window.open(url.href, '_blank', 'noopener,popup,width=520,height=720');
    say('Waiting for consent in the other window.');
  } catch (error) {
    fail(out, error);
  }
}

$('authorize-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  await startAuthorization(
    $('authorize-result'),
    $<HTMLInputElement>('authorize-provider').value.trim(),
    $<HTMLInputElement>('connection-id').value.trim(),
    $<HTMLInputElement>('scopes').value.trim().split(/\s+/).filter(Boolean),
  );
});

// Only pages of this same origin can post to a BroadcastChannel of it: the callback page.
new BroadcastChannel(CALLBACK_CHANNEL).addEventListener('message', (event) => {
  const data = event.data as Json;
  if (data?.type !== 'keyway-callback' || data.connection_id !== waiting) return;
  void showConnection(String(data.connection_id));
});

// ─── 5. connection status, probe, refresh, delete ────────────────────────────────────────
async function showConnection(id: string): Promise<void> {
  const out = $('connection-result');
  try {
    const view = await api('GET', `/api/oauth/connections/${encodePath(id)}`);
    const rows: [string, string][] = [
      ['Status', String(view.status)],
      ['Scopes', (view.scopes as string[]).join(' ') || '(none)'],
      ['Token expires', String(view.token_expires_at ?? 'never')],
      [
        'Refresh token',
        view.refreshable === true
          ? 'held: the token is refreshed when due'
          : 'none: a new consent is needed when the token expires',
      ],
    ];
    if (view.status === 'active') {
      const credentials = await api('GET', `/api/oauth/credentials/${encodePath(id)}`);
      rows.push(['Access token', mask(String(credentials.access_token))]);
    }
    if (view.error !== null) {
      const failure = view.error as Json;
      rows.push(['Error', `${String(failure.code)}: ${String(failure.description)}`]);
    }
    const list = el('dl');
    for (const [term, value] of rows) list.append(el('dt', term), el('dd', value));
    out.replaceChildren(list);
    const actions = $('connection-actions');
    actions.hidden = false;
    actions.dataset.connection = id;
    actions.dataset.provider = String(view.provider_id);
    // Probe and refresh need an active connection (refresh a refresh token); reconnecting
    // starts a new consent for any connection, the way out of `error`.
    $<HTMLButtonElement>('probe').disabled = view.status !== 'active';
    $<HTMLButtonElement>('refresh').disabled =
      view.status !== 'active' || view.refreshable !== true;
    say(`Connection ${id} is ${String(view.status)}.`, view.status === 'active' ? 'info' : 'error');
  } catch (error) {
    fail(out, error);
  }
}

$('probe').addEventListener('click', async () => {
  const id = $('connection-actions').dataset.connection ?? '';
  const out = $('probe-result');
  out.replaceChildren(el('p', 'Probing…'));
  try {
    const result = await api('POST', `/api/oauth/probe/${encodePath(id)}`);
    out.replaceChildren(timeline(result.steps as unknown[]));
    const server = result.server as Json | null;
    if (server !== null)
      out.append(
        el(
          'p',
          `Server ${String(server.name)} ${String(server.version)}, protocol ${String(server.protocol_version)}.`,
        ),
      );
    const tools = el('ul', '', { class: 'tools' });
    for (const tool of result.tools as Json[])
      tools.append(el('li', `${String(tool.name)} — ${String(tool.description)}`));
    out.append(tools);
    say(
      result.ok === true
        ? `Probe succeeded: ${(result.tools as unknown[]).length} tools.`
        : 'Probe failed.',
      result.ok === true ? 'info' : 'error',
    );
  } catch (error) {
    fail(out, error);
  }
});

$('refresh').addEventListener('click', async () => {
  const id = $('connection-actions').dataset.connection ?? '';
  try {
    await api('GET', `/api/oauth/credentials/${encodePath(id)}?force_refresh=true`);
    await showConnection(id);
    say('Token refreshed.');
  } catch (error) {
    fail($('connection-result'), error);
  }
});

$('reconnect').addEventListener('click', async () => {
  const actions = $('connection-actions');
  await startAuthorization(
    $('connection-result'),
    actions.dataset.provider ?? '',
    actions.dataset.connection ?? '',
    [],
  );
});

$('delete').addEventListener('click', async () => {
  const id = $('connection-actions').dataset.connection ?? '';
  try {
    await api('DELETE', `/api/oauth/connections/${encodePath(id)}`);
    $('connection-result').replaceChildren(el('p', `Connection ${id} deleted.`));
    $('connection-actions').hidden = true;
    say(`Connection ${id} deleted.`);
  } catch (error) {
    fail($('connection-result'), error);
  }
});

// ─── the second view: what the credential can see ────────────────────────────────────────
$('list-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const out = $('list-result');
  const prefix = $<HTMLInputElement>('list-prefix').value.trim();
  const state = $<HTMLSelectElement>('list-status').value;
  const query = new URLSearchParams({ ...(prefix ? { prefix } : {}) });
  try {
    const providers = await api('GET', `/api/admin/providers?${query}`).catch(() => ({
      items: [],
    }));
    if (state) query.set('status', state);
    const connections = await api('GET', `/api/oauth/connections?${query}`);
    const table = el('table');
    table.append(
      el('caption', 'Connections'),
      el('tr', '', {}, el('th', 'Connection'), el('th', 'Provider'), el('th', 'Status')),
    );
    for (const item of connections.items as Json[]) {
      table.append(
        el(
          'tr',
          '',
          {},
          el('td', String(item.connection_id)),
          el('td', String(item.provider_id)),
          el('td', String(item.status)),
        ),
      );
    }
    const list = el('ul', '', { 'aria-label': 'Providers' });
    for (const item of providers.items as Json[])
      list.append(
        el(
          'li',
          `${String(item.id)} — ${
            item.template === 'oauth2'
              ? `profile ${String(item.profile ?? '(named endpoints)')}`
              : String((item.configuration as Json).resource_url)
          }`,
        ),
      );
    out.replaceChildren(el('h3', 'Providers'), list, table);
    say(`${(connections.items as unknown[]).length} connections listed.`);
  } catch (error) {
    fail(out, error);
  }
});
