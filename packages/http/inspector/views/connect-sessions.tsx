/*
 * Connect sessions (docs/api.md §19): the hosted connect pages handed to end users — which
 * are active, what they completed — each revocable; and a form that creates one, its page
 * URL shown once.
 */
import { useEffect, useState } from 'preact/hooks';
import { api, describe, encodePath } from '../api.js';
import { Listing } from '../listing.js';
import { usePages } from '../pages.js';
import { Badge, Copyable, Failure, Field, Hidden, useSay, When, words } from '../ui.js';

interface ConnectSession {
  id: string;
  namespace: string;
  providers: string[] | null;
  end_user: { id: string; name?: string } | null;
  status: 'active' | 'expired' | 'revoked';
  completed: string[];
  created_by: string;
  expires_at: string;
}

function SessionRow(props: { session: ConnectSession; onChanged: () => void }) {
  const say = useSay();
  const { session } = props;
  const [confirm, setConfirm] = useState(false);
  const [note, setNote] = useState<string | null>(null);
  const revoke = async () => {
    if (!confirm) {
      setConfirm(true);
      return;
    }
    try {
      await api('DELETE', `/api/admin/connect-sessions/${encodePath(session.id)}`);
      say(`Connect session ${session.id} is ended: its page no longer works.`);
      props.onChanged();
    } catch (failure) {
      setNote(describe(failure));
    }
  };
  return (
    <tr>
      <td>
        {session.end_user?.name ?? session.end_user?.id ?? '—'}
        <br />
        <small>{session.id}</small>
      </td>
      <td>{session.namespace}</td>
      <td class="wide">
        {session.providers === null ? 'every provider' : session.providers.join(' ')}
      </td>
      <td>
        <Badge value={session.status} />
      </td>
      <td>{session.completed.length === 0 ? 'none' : session.completed.join(' ')}</td>
      <td class="wide">
        <When at={session.expires_at} />
      </td>
      <td>
        {session.status === 'active' && (
          <div class="row-actions">
            <button type="button" class="small danger" onClick={() => void revoke()}>
              {confirm ? 'Confirm: end' : 'End'}
              <Hidden> connect session {session.id}</Hidden>
            </button>
            {note !== null && <p class="error">{note}</p>}
          </div>
        )}
      </td>
    </tr>
  );
}

function CreateSession(props: { onCreated: () => void }) {
  const say = useSay();
  const [namespace, setNamespace] = useState('');
  const [providers, setProviders] = useState('');
  const [name, setName] = useState('');
  const [url, setUrl] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const submit = async (event: Event) => {
    event.preventDefault();
    setError(null);
    setUrl(null);
    try {
      const offered = words(providers);
      const answer = await api('POST', '/api/admin/connect-sessions', {
        namespace: namespace.trim(),
        ...(offered.length > 0 ? { providers: offered } : {}),
        ...(name.trim() === '' ? {} : { branding: { name: name.trim() } }),
      });
      setUrl(String(answer.url));
      say('Connect session created: copy its page URL now, it is shown this once.');
      props.onCreated();
    } catch (failure) {
      setError(failure);
    }
  };
  return (
    <form onSubmit={submit} aria-labelledby="connect-session-title">
      <h3 id="connect-session-title">Create a connect session</h3>
      <Field
        id="connect-session-namespace"
        label="Namespace (the end user's connections go below it)"
        required
        placeholder="acme/users/alice"
        value={namespace}
        onInput={setNamespace}
      />
      <Field
        id="connect-session-providers"
        label="Providers offered (space-separated; empty: every provider you cover)"
        value={providers}
        onInput={setProviders}
      />
      <Field
        id="connect-session-name"
        label="App name on the page"
        value={name}
        onInput={setName}
      />
      <button type="submit">Create</button>
      {error !== null && <Failure error={error} />}
      {url !== null && (
        <div class="minted">
          <p>Shown this once: the secret is in the URL's fragment.</p>
          <Copyable label="Connect page URL" value={url} />
        </div>
      )}
    </form>
  );
}

export function ConnectSessionsView() {
  const pages = usePages<ConnectSession>();
  const list = () => pages.load('/api/admin/connect-sessions');
  useEffect(() => {
    void list();
  }, []);
  return (
    <section aria-labelledby="connect-sessions-title">
      <h2 id="connect-sessions-title">Connect sessions</h2>
      <p class="hint">
        Hosted connect pages handed to end users. Ending a session makes its page refuse its secret;
        connections it completed stay.
      </p>
      <CreateSession onCreated={() => void list()} />
      <Listing
        pages={pages}
        caption={`${pages.items.length} connect sessions`}
        columns={[
          ['End user'],
          ['Namespace'],
          ['Providers', 'wide'],
          ['Status'],
          ['Completed'],
          ['Expires', 'wide'],
          [''],
        ]}
        row={(session) => (
          <SessionRow key={session.id} session={session} onChanged={() => void list()} />
        )}
      />
    </section>
  );
}
