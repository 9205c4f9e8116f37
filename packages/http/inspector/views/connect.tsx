/*
 * The connect walk: discovery → provider → authorize → the connection. Each step is one API
 * call you could make yourself, and shows what came back: the documents discovery read, the
 * registration answer (secrets masked), the token response (tokens withheld).
 */
import { useEffect, useState } from 'preact/hooks';
import { api, encodePath, type Json, type Whoami } from '../api.js';
import { ConnectionPanel } from '../connection.js';
import { startAuthorization } from '../consent.js';
import { ProviderForm } from '../provider-form.js';
import { Failure, Field, JsonView, type Step, Timeline, useSay, words } from '../ui.js';

interface Trace {
  ok: boolean;
  steps: Step[];
  authorization_server: Json | null;
  scopes: string[];
  error: string | null;
  /** What will work, in plain words (docs/api.md §6 `discover`, `keyway doctor`). */
  report: { ok: boolean; recommended: string | null; findings: string[] };
}

function Discovery(props: { resourceUrl: string; setResourceUrl: (url: string) => void }) {
  const say = useSay();
  const [trace, setTrace] = useState<Trace | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [tryRegistration, setTryRegistration] = useState(false);
  const discover = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setTrace(null);
    setError(null);
    try {
      const found = await api<Trace>('POST', '/api/admin/discover', {
        resource_url: props.resourceUrl.trim(),
        ...(tryRegistration ? { try_registration: true } : {}),
      });
      setTrace(found);
      say(
        found.ok ? 'Discovery succeeded.' : `Discovery failed: ${found.error}.`,
        found.ok ? 'info' : 'error',
      );
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  const failed = trace?.steps.filter((step) => step.ok !== true).at(-1);
  return (
    <section aria-labelledby="discover-title">
      <h3 id="discover-title">1. Discovery</h3>
      <form onSubmit={discover}>
        <Field
          id="resource-url"
          label="MCP server URL"
          type="url"
          required
          placeholder="https://mcp.example.com/mcp"
          value={props.resourceUrl}
          onInput={props.setResourceUrl}
        />
        <div class="check">
          <input
            id="try-registration"
            type="checkbox"
            checked={tryRegistration}
            onChange={(event) =>
              setTryRegistration((event.currentTarget as HTMLInputElement).checked)
            }
          />
          <label for="try-registration">
            Try registration: register a test client (deleted again where the server allows)
          </label>
        </div>
        <button type="submit" disabled={busy}>
          {busy ? 'Discovering…' : 'Discover'}
        </button>
      </form>
      <div id="discover-result">
        {error !== null && <Failure error={error} />}
        {trace !== null && (
          <>
            {trace.ok ? (
              <p>
                Authorization server {String(trace.authorization_server?.issuer)}; scopes to
                request: {trace.scopes.join(' ') || '(none)'}.
              </p>
            ) : (
              <p class="error">
                Discovery failed ({trace.error}) at {failed?.step ?? 'the first step'}:{' '}
                {failed?.note ?? 'no answer'}.
              </p>
            )}
            <section aria-labelledby="doctor-title" id="doctor-report">
              <h4 id="doctor-title">
                What will work:{' '}
                {trace.report.recommended === null
                  ? 'nothing yet'
                  : `credentials mode ${trace.report.recommended}`}
              </h4>
              <ul>
                {trace.report.findings.map((line) => (
                  <li key={line}>{line}</li>
                ))}
              </ul>
            </section>
            <Timeline steps={trace.steps} />
          </>
        )}
      </div>
    </section>
  );
}

function Authorize(props: {
  provider: string;
  setProvider: (id: string) => void;
  enterprise: boolean;
  onConnection: (id: string) => void;
}) {
  const say = useSay();
  const [connection, setConnection] = useState('');
  const [scopes, setScopes] = useState('');
  const [subjectToken, setSubjectToken] = useState('');
  const [result, setResult] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const submit = async (event: Event) => {
    event.preventDefault();
    setError(null);
    setResult(null);
    const id = connection.trim();
    try {
      const started = await startAuthorization(
        props.provider.trim(),
        id,
        words(scopes),
        subjectToken.trim() || undefined,
      );
      setSubjectToken(''); // used once, never kept
      if (started.kind === 'connected') {
        setResult('Connected: this provider needs no consent page, the token was obtained.');
        say(`Connection ${id} is active.`);
      } else {
        setResult(
          `Scopes requested: ${started.scopes}. Consent opens in a new window; this page updates when it is done.`,
        );
        say('Waiting for consent in the other window.');
      }
      props.onConnection(id);
    } catch (failure) {
      setError(failure);
    }
  };
  return (
    <section aria-labelledby="authorize-title">
      <h3 id="authorize-title">3. Authorize</h3>
      <form onSubmit={submit}>
        <Field
          id="authorize-provider"
          label="Provider"
          required
          value={props.provider}
          onInput={props.setProvider}
        />
        <Field
          id="connection-id"
          label="Connection id"
          required
          placeholder="acme/users/alice/linear"
          value={connection}
          onInput={setConnection}
        />
        <Field
          id="scopes"
          label="Scopes (space-separated; empty: as discovered)"
          value={scopes}
          onInput={setScopes}
        />
        {props.enterprise && (
          <Field
            id="subject-token"
            label="The user’s ID token (enterprise mode, used once)"
            type="password"
            value={subjectToken}
            onInput={setSubjectToken}
          />
        )}
        <button type="submit">Authorize</button>
      </form>
      <div id="authorize-result">
        {result !== null && <p>{result}</p>}
        {error !== null && <Failure error={error} />}
      </div>
    </section>
  );
}

export function ConnectView(props: { who: Whoami }) {
  const [resourceUrl, setResourceUrl] = useState('');
  const [provider, setProvider] = useState('');
  const [mode, setMode] = useState('register');
  const [connection, setConnection] = useState<string | null>(null);
  const [reload, setReload] = useState(0);
  const [server, setServer] = useState<Json | null>(null);
  useEffect(() => {
    // The authorization server's metadata as the provider keeps it, for the debugger: read
    // when a provider is saved or an authorization starts, not at each key typed.
    if (reload === 0 || provider === '' || !props.who.provider_management) return;
    api('GET', `/api/admin/providers/${encodePath(provider)}`)
      .then((view) => setServer(view))
      .catch(() => setServer(null));
  }, [reload]);
  return (
    <div class="walk">
      <header class="intro">
        <h2>Connect</h2>
        <p class="hint">
          Discover an MCP server, save it as a provider, authorize a connection: each step is one
          API call, and shows what came back.
        </p>
      </header>
      {props.who.provider_management ? (
        <>
          <Discovery resourceUrl={resourceUrl} setResourceUrl={setResourceUrl} />
          <ProviderForm
            resourceUrl={resourceUrl}
            onSaved={(view) => {
              setProvider(String(view.id));
              setMode(String((view.credentials as Json).mode));
              setReload((n) => n + 1);
            }}
          />
        </>
      ) : (
        <p class="hint">
          Provider management is off in this deployment: authorize against a provider declared in
          its configuration.
        </p>
      )}
      <Authorize
        provider={provider}
        setProvider={setProvider}
        enterprise={mode === 'enterprise'}
        onConnection={(id) => {
          setConnection(id);
          setReload((n) => n + 1);
        }}
      />
      <section aria-labelledby="connection-title">
        <h3 id="connection-title">4. Connection</h3>
        <div id="connection-result">
          {connection === null ? (
            <p class="hint">The connection shows here once authorized.</p>
          ) : (
            <ConnectionPanel id={connection} reload={reload} />
          )}
        </div>
        {server !== null && server.id === provider && (
          <JsonView
            label="Authorization server (as the provider keeps it)"
            value={server.authorization_server}
          />
        )}
      </section>
    </div>
  );
}
