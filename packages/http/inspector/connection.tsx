/*
 * One connection: its status, scopes, expiry, the token response described, its gateway URL,
 * and what can be done with it (probe, refresh, reconnect, delete). Shared by the Connect
 * walk and the Connections view.
 */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, api, base, describe, encodePath, type Json } from './api.js';
import { onConsent, startAuthorization } from './consent.js';
import { PortalSettings, type ToolPolicy } from './portal-settings.js';
import {
  Badge,
  Copyable,
  Facts,
  Failure,
  JsonView,
  type Step,
  Timeline,
  useSay,
  When,
} from './ui.js';

/** A connection as the API shows it (docs/api.md §5). */
export interface ConnectionView {
  connection_id: string;
  provider_id: string;
  status: string;
  scopes: string[];
  refreshable: boolean;
  grant: string;
  metadata: Record<string, string>;
  token_response: Json | null;
  token_expires_at: string | null;
  authorized_at: string | null;
  last_refreshed_at: string | null;
  error: { code: string; description: string } | null;
  /** The alias set for the portal, or `null` (its last path segment). */
  alias: string | null;
  tools: ToolPolicy | null;
}

/** The first and last four characters of a token: enough to tell two apart. */
const mask = (token: string) =>
  token.length <= 12 ? '••••' : `${token.slice(0, 4)}…${token.slice(-4)}`;

interface Probe {
  ok: boolean;
  server: { name: string; version: string; protocol_version: string } | null;
  tools: { name: string; description: string }[];
  steps: Step[];
}

/** Where an MCP client or trusted code reaches the connection through the broker (§13). */
function GatewayUrls(props: { view: ConnectionView; template: string | null; apiBase: boolean }) {
  const path = encodePath(props.view.connection_id);
  const origin = `${location.origin}${base}`;
  return (
    <div class="gateway">
      {props.template !== 'oauth2' && (
        <Copyable label="MCP gateway URL" value={`${origin}/mcp/${path}`} />
      )}
      {props.apiBase && <Copyable label="API proxy URL" value={`${origin}/proxy/${path}/`} />}
      <p class="hint">
        Call it with a broker token covering the connection as the bearer: the broker adds the
        connection’s own token, which never leaves it.
      </p>
    </div>
  );
}

export function ConnectionPanel(props: {
  id: string;
  /** Called after a delete, with the id. */
  onDeleted?: (id: string) => void;
  /** Grows when a caller wants the panel to read the connection again. */
  reload?: number;
}) {
  const say = useSay();
  const [view, setView] = useState<ConnectionView | null>(null);
  const [token, setToken] = useState<string | null>(null);
  const [provider, setProvider] = useState<Json | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [probe, setProbe] = useState<Probe | null>(null);
  const [note, setNote] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [confirmDelete, setConfirmDelete] = useState(false);
  const [deleted, setDeleted] = useState(false);

  async function load(): Promise<ConnectionView | null> {
    try {
      const read = await api<ConnectionView>(
        'GET',
        `/api/oauth/connections/${encodePath(props.id)}`,
      );
      setView(read);
      setToken(null);
      setError(null);
      say(
        read.status === 'pending'
          ? `Connection ${props.id} is pending: waiting for consent.`
          : `Connection ${props.id} is ${read.status}.`,
        read.status === 'error' ? 'error' : 'info',
      );
      return read;
    } catch (failure) {
      setError(failure);
      say(describe(failure), 'error');
      return null;
    }
  }

  useEffect(() => {
    setProbe(null);
    setNote(null);
    setDeleted(false);
    setConfirmDelete(false);
    void load().then(async (read) => {
      if (read === null) return;
      // The provider tells whether the connection has an API proxy; without the right to
      // read providers, the MCP gateway URL is shown alone.
      setProvider(
        await api('GET', `/api/admin/providers/${encodePath(read.provider_id)}`).catch(() => null),
      );
    });
    return onConsent((connectionId) => {
      if (connectionId === props.id) void load();
    });
  }, [props.id, props.reload]);

  async function act(work: () => Promise<void>) {
    setBusy(true);
    setNote(null);
    try {
      await work();
    } catch (failure) {
      setNote(describe(failure));
      say(describe(failure), 'error');
    } finally {
      setBusy(false);
    }
  }

  const runProbe = () =>
    act(async () => {
      setProbe(null);
      const result = await api<Probe>('POST', `/api/oauth/probe/${encodePath(props.id)}`);
      setProbe(result);
      say(
        result.ok ? `Probe succeeded: ${result.tools.length} tools.` : 'Probe failed.',
        result.ok ? 'info' : 'error',
      );
    });

  // A hand-out (audited, and a refresh when due): only when asked, never to draw the panel.
  const showToken = () =>
    act(async () => {
      try {
        const credentials = await api('GET', `/api/oauth/credentials/${encodePath(props.id)}`);
        setToken(mask(String(credentials.access_token)));
      } catch (failure) {
        if (!(failure instanceof ApiError && failure.code === 'credentials_not_exportable'))
          throw failure;
        setToken('never handed out (inject-only: use the gateway)');
      }
    });

  const refresh = () =>
    act(async () => {
      const before = view?.last_refreshed_at ?? null;
      await api('GET', `/api/oauth/credentials/${encodePath(props.id)}?force_refresh=true`);
      const after = await load();
      // A refresh the server did not answer keeps the still-valid token: say so, not "refreshed".
      const text =
        after !== null && after.last_refreshed_at !== before
          ? `Token refreshed; it now expires ${after.token_expires_at === null ? 'never' : new Date(after.token_expires_at).toLocaleString()}.`
          : 'Nothing changed: the refresh did not complete, and the current token stays in use (the Audit view has the failure).';
      setNote(text);
      say(text);
    });

  const reconnect = () =>
    act(async () => {
      if (view === null) return;
      const started = await startAuthorization(view.provider_id, view.connection_id, []);
      if (started.kind === 'connected') {
        await load();
        setNote('Connected again: a new token was obtained.');
      } else {
        setNote(`Consent opened in a new window (scopes requested: ${started.scopes}).`);
        say('Waiting for consent in the other window.');
      }
    });

  const remove = () =>
    act(async () => {
      if (!confirmDelete) {
        setConfirmDelete(true);
        return;
      }
      await api('DELETE', `/api/oauth/connections/${encodePath(props.id)}`);
      setDeleted(true);
      say(`Connection ${props.id} deleted.`);
      props.onDeleted?.(props.id);
    });

  if (deleted) return <p>Connection {props.id} deleted.</p>;
  if (error !== null) return <Failure error={error} />;
  if (view === null) return <p>Reading {props.id}…</p>;
  const template = provider === null ? null : String(provider.template);
  return (
    <section class="panel" aria-label={`Connection ${view.connection_id}`}>
      <h3>{view.connection_id}</h3>
      <Facts
        rows={[
          ['Status', <Badge value={view.status} />],
          ['Provider', view.provider_id],
          ['Grant', view.grant],
          ['Scopes', view.scopes.join(' ') || '(none)'],
          ['Token expires', <When at={view.token_expires_at} />],
          [
            'Refresh token',
            view.refreshable
              ? 'held: the token is refreshed when due'
              : 'none: a new consent is needed when the token expires',
          ],
          ['Last refreshed', <When at={view.last_refreshed_at} />],
          ...(token === null ? [] : [['Access token', token] as [string, string]]),
          ...(view.error === null
            ? []
            : [['Error', `${view.error.code}: ${view.error.description}`] as [string, string]]),
        ]}
      />
      {view.status === 'active' && (
        <GatewayUrls
          view={view}
          template={template}
          apiBase={provider !== null && provider.api_base_url !== null && template === 'oauth2'}
        />
      )}
      <div class="actions">
        <button type="button" disabled={busy || view.status !== 'active'} onClick={runProbe}>
          Probe
        </button>
        <button type="button" disabled={busy || view.status !== 'active'} onClick={showToken}>
          Show the token (masked)
        </button>
        <button
          type="button"
          disabled={busy || view.status !== 'active' || !view.refreshable}
          onClick={refresh}
        >
          Refresh now
        </button>
        <button type="button" disabled={busy} onClick={reconnect}>
          Reconnect
        </button>
        <button type="button" class="danger" disabled={busy} onClick={remove}>
          {confirmDelete ? 'Confirm delete' : 'Delete'}
        </button>
      </div>
      {note !== null && <p class="note">{note}</p>}
      {template !== 'oauth2' && (
        <PortalSettings
          connectionId={view.connection_id}
          alias={view.alias}
          tools={view.tools}
          onSaved={() => void load()}
        />
      )}
      {view.token_response !== null && (
        <JsonView label="Token response (tokens withheld)" value={view.token_response} />
      )}
      {Object.keys(view.metadata).length > 0 && (
        <JsonView label="Kept from the authorization (metadata)" value={view.metadata} />
      )}
      {probe !== null && (
        <div class="probe">
          <Timeline steps={probe.steps} />
          {probe.server !== null && (
            <p>
              Server {probe.server.name} {probe.server.version}, protocol{' '}
              {probe.server.protocol_version}.
            </p>
          )}
          <ul class="tools">
            {probe.tools.map((tool) => (
              <li key={tool.name}>
                <code>{tool.name}</code> — {tool.description}
              </li>
            ))}
          </ul>
        </div>
      )}
    </section>
  );
}
