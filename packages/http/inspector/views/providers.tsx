/* Providers: their discovery and registration, registered again or deleted. */
import { useEffect, useState } from 'preact/hooks';
import { api, describe, encodePath, type Json, query } from '../api.js';
import { Filters, Listing } from '../listing.js';
import { usePages } from '../pages.js';
import { Facts, Field, Hidden, JsonView, useSay, When } from '../ui.js';

interface ProviderView {
  id: string;
  template: string;
  profile: string | null;
  label: string;
  hand_out: boolean;
  dpop: boolean;
  configuration: Json;
  credentials: Json;
  resource: Json | null;
  authorization_server: Json | null;
  api_base_url: string | null;
  updated_at: string;
}

function ProviderPanel(props: {
  view: ProviderView;
  onChanged: (view: ProviderView | null) => void;
}) {
  const say = useSay();
  const { view } = props;
  const [note, setNote] = useState<string | null>(null);
  const [confirm, setConfirm] = useState<'register' | 'delete' | null>(null);
  const credentials = view.credentials;
  const act = async (what: 'register' | 'delete') => {
    if (confirm !== what) {
      setConfirm(what);
      return;
    }
    setConfirm(null);
    try {
      if (what === 'register') {
        const next = await api<ProviderView>(
          'POST',
          `/api/admin/providers/${encodePath(view.id)}/register`,
        );
        props.onChanged(next);
        setNote(
          `Registered again: client ${String(next.credentials.client_id)}. Its connections need a new consent.`,
        );
      } else {
        await api('DELETE', `/api/admin/providers/${encodePath(view.id)}`);
        props.onChanged(null);
        say(`Provider ${view.id} deleted.`);
      }
    } catch (failure) {
      setNote(describe(failure));
      say(describe(failure), 'error');
    }
  };
  return (
    <section class="panel" aria-label={`Provider ${view.id}`}>
      <h3>{view.label === view.id ? view.id : `${view.label} (${view.id})`}</h3>
      <Facts
        rows={[
          [
            'Template',
            view.profile === null ? view.template : `${view.template}, profile ${view.profile}`,
          ],
          ['Resource', String(view.configuration.resource_url ?? view.api_base_url ?? '—')],
          ['Client', String(credentials.client_id)],
          ['Mode', String(credentials.mode)],
          [
            'Registration',
            `${String(credentials.registration)}, ${String(credentials.token_endpoint_auth_method)}`,
          ],
          ['Client secret', credentials.client_secret_set === true ? 'held (never shown)' : 'none'],
          [
            'Tokens',
            view.dpop
              ? 'DPoP-bound, inject-only (gateway and proxy)'
              : view.hand_out
                ? 'handed out to callers'
                : 'inject-only (gateway and proxy)',
          ],
          ['Redirect URI', String(credentials.redirect_uri ?? '—')],
          ['Updated', <When at={view.updated_at} />],
        ]}
      />
      {view.resource !== null && (
        <JsonView label="Protected resource (as discovered)" value={view.resource} />
      )}
      {view.authorization_server !== null && (
        <JsonView label="Authorization server (as discovered)" value={view.authorization_server} />
      )}
      {credentials.registration_response !== null &&
        credentials.registration_response !== undefined && (
          <JsonView
            label="Registration answer (secrets masked)"
            value={credentials.registration_response}
          />
        )}
      <div class="actions">
        {credentials.registration === 'dynamic' && (
          <button type="button" onClick={() => void act('register')}>
            {confirm === 'register' ? 'Confirm: register a new client' : 'Re-register'}
          </button>
        )}
        <button type="button" class="danger" onClick={() => void act('delete')}>
          {confirm === 'delete' ? 'Confirm delete' : 'Delete'}
        </button>
      </div>
      {note !== null && <p class="note">{note}</p>}
    </section>
  );
}

export function ProvidersView() {
  const pages = usePages<ProviderView>();
  const [prefix, setPrefix] = useState('');
  const [open, setOpen] = useState<ProviderView | null>(null);
  const list = () =>
    pages.load(`/api/admin/providers${query({ prefix: prefix.trim(), limit: '25' })}`);
  useEffect(() => {
    void list();
  }, []);
  return (
    <section aria-labelledby="providers-title">
      <h2 id="providers-title">Providers</h2>
      <Filters onSubmit={list}>
        <Field id="providers-prefix" label="Prefix" value={prefix} onInput={setPrefix} />
        <button type="submit">List</button>
      </Filters>
      <Listing
        pages={pages}
        caption={`${pages.items.length} providers`}
        columns={[['Provider'], ['Template', 'wide'], ['Server'], ['Client', 'wide'], ['']]}
        row={(item) => (
          <tr key={item.id}>
            <td>{item.id}</td>
            <td class="wide">
              {item.profile === null ? item.template : `${item.template} (${item.profile})`}
            </td>
            <td>{String(item.authorization_server?.issuer ?? '—')}</td>
            <td class="wide">{String(item.credentials.registration)}</td>
            <td>
              <button type="button" class="small" onClick={() => setOpen(item)}>
                Open<Hidden> {item.id}</Hidden>
              </button>
            </td>
          </tr>
        )}
      />
      {open !== null && (
        <ProviderPanel
          key={open.id}
          view={open}
          onChanged={(next) => {
            if (next === null) pages.drop((item) => item.id !== open.id);
            setOpen(next);
          }}
        />
      )}
    </section>
  );
}
