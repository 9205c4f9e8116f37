/*
 * Keyway's inspector: a console for the connect flow and what the credential can see. The
 * credential lives in memory only (api.ts); every value from the API is rendered as text.
 * Views are chosen by the address's fragment (`#connections`), never holding the credential.
 */
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { describe, holdCredential, type Whoami, whoami } from './api.js';
import { SayContext } from './ui.js';
import { AuditView } from './views/audit.js';
import { ConnectView } from './views/connect.js';
import { ConnectSessionsView } from './views/connect-sessions.js';
import { ConnectionsView } from './views/connections.js';
import { GrantsView } from './views/grants.js';
import { ProvidersView } from './views/providers.js';
import { TokensView } from './views/tokens.js';
import { WebhooksView } from './views/webhooks.js';

/** The views, and whom each is for (shown only when the credential's rights allow it). */
const VIEWS = [
  { id: 'connect', label: 'Connect', for: () => true },
  { id: 'connections', label: 'Connections', for: () => true },
  { id: 'providers', label: 'Providers', for: (who: Whoami) => who.provider_management },
  { id: 'tokens', label: 'Tokens', for: () => true },
  // The grants of MCP clients that signed in (docs/api.md §17), when sign-in is on.
  { id: 'grants', label: 'Grants', for: (who: Whoami) => who.sign_in },
  // Hosted connect pages handed to end users (docs/api.md §19).
  { id: 'connect-sessions', label: 'Connect sessions', for: () => true },
  { id: 'audit', label: 'Audit', for: () => true },
  // Deliveries are the root key's to read (docs/api.md §11).
  { id: 'webhooks', label: 'Webhooks', for: (who: Whoami) => who.name === null },
] as const;
type ViewId = (typeof VIEWS)[number]['id'];

const viewOfHash = (): ViewId =>
  VIEWS.find((view) => `#${view.id}` === location.hash)?.id ?? 'connect';

function CredentialForm(props: { onAccepted: (who: Whoami) => void }) {
  const [value, setValue] = useState('');
  const [error, setError] = useState<string | null>(null);
  const submit = async (event: Event) => {
    event.preventDefault();
    const typed = value.trim();
    setValue('');
    holdCredential(typed);
    try {
      const who = await whoami();
      setError(null);
      props.onAccepted(who);
    } catch (failure) {
      holdCredential(null);
      setError(describe(failure));
    }
  };
  return (
    <section aria-labelledby="credential-title" class="credential">
      <h2 id="credential-title">Credential</h2>
      <form onSubmit={submit}>
        <div class="field">
          <label for="credential">Root key or broker token</label>
          <input
            id="credential"
            type="password"
            autoComplete="off"
            required
            value={value}
            onInput={(event) => setValue((event.currentTarget as HTMLInputElement).value)}
          />
        </div>
        <button type="submit">Use it</button>
      </form>
      <p class="hint">
        Kept in this page’s memory only: never in the address, a cookie or storage.
      </p>
      <div id="credential-result" role="alert">
        {error !== null && <p class="error">{error}</p>}
      </div>
    </section>
  );
}

function App() {
  const [who, setWho] = useState<Whoami | null>(null);
  const [view, setView] = useState<ViewId>(viewOfHash());
  const [status, setStatus] = useState<{ text: string; kind: 'info' | 'error' }>({
    text: '',
    kind: 'info',
  });
  const say = (text: string, kind: 'info' | 'error' = 'info') => setStatus({ text, kind });
  useEffect(() => {
    const follow = () => setView(viewOfHash());
    addEventListener('hashchange', follow);
    return () => removeEventListener('hashchange', follow);
  }, []);
  useEffect(() => {
    // Signed in: the form that had the focus is gone, so the keyboard starts at the views.
    if (who !== null) document.querySelector<HTMLElement>('nav a')?.focus();
  }, [who]);
  const views = who === null ? [] : VIEWS.filter((v) => v.for(who));
  const shown = views.find((v) => v.id === view)?.id ?? 'connect';
  return (
    <SayContext.Provider value={say}>
      <header>
        <h1>Keyway inspector</h1>
        {who === null ? (
          <p>
            Walk the connect flow of a remote MCP server, step by step, and see what a credential
            can see.
          </p>
        ) : (
          <p class="who">
            {who.name === null ? 'Root key' : `Token ${who.name}`} · scopes {who.scopes.join(' ')} ·
            Keyway {who.version}{' '}
            <button
              type="button"
              class="small"
              onClick={() => {
                holdCredential(null);
                setWho(null);
                say('The credential is forgotten.');
              }}
            >
              Forget credential
            </button>
          </p>
        )}
      </header>
      {who !== null && (
        <nav aria-label="Views">
          <ul>
            {views.map((v) => (
              <li key={v.id}>
                <a href={`#${v.id}`} aria-current={v.id === shown ? 'page' : undefined}>
                  {v.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
      )}
      <p id="status" role="status" aria-live="polite" data-kind={status.kind}>
        {status.text}
      </p>
      <main>
        {who === null ? (
          <CredentialForm
            onAccepted={(accepted) => {
              setWho(accepted);
              say('Credential accepted. It stays in this page’s memory until you close it.');
            }}
          />
        ) : (
          <>
            {/* The walk stays mounted while another view is open: its steps are kept. */}
            <div hidden={shown !== 'connect'}>
              <ConnectView who={who} />
            </div>
            {shown === 'connect' ? null : shown === 'connections' ? (
              <ConnectionsView />
            ) : shown === 'providers' ? (
              <ProvidersView />
            ) : shown === 'tokens' ? (
              <TokensView who={who} />
            ) : shown === 'grants' ? (
              <GrantsView />
            ) : shown === 'connect-sessions' ? (
              <ConnectSessionsView />
            ) : shown === 'audit' ? (
              <AuditView />
            ) : (
              <WebhooksView />
            )}
          </>
        )}
      </main>
    </SayContext.Provider>
  );
}

const root = document.getElementById('app');
if (root !== null) {
  root.replaceChildren();
  render(<App />, root);
}
