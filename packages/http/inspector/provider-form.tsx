/*
 * Creating or updating a provider (`PUT /api/admin/providers/<id>`): an MCP server (the URL
 * discovered) in any mode of docs/api.md §4 and §14, or a classic API from a profile of the
 * catalog (§15). Secrets are write-only: each field is emptied once sent.
 */
import { useEffect, useState } from 'preact/hooks';
import { api, encodePath, type Json } from './api.js';
import { Choice, Failure, Field, JsonView, useSay, words } from './ui.js';

interface Profile {
  id: string;
  /** `oauth2` profiles are the classic APIs offered here; `mcp` ones describe MCP servers. */
  template: 'oauth2' | 'mcp';
  label: string;
  params: string[];
  scopes_example: string[];
}

const MCP_MODES: [string, string][] = [
  ['register', 'Registered automatically (metadata document or DCR)'],
  ['custom', 'Custom credentials (a client you registered)'],
  ['client_credentials', 'Client credentials (no user: the client’s own token)'],
  ['jwt_bearer', 'Workload identity (JWT bearer assertion)'],
  ['enterprise', 'Enterprise-managed (the IdP’s ID-JAG)'],
];

const ALGORITHMS = ['ES256', 'ES384', 'ES512', 'RS256', 'PS256', 'EdDSA'];

/** The form's values, all text as typed. */
const EMPTY = {
  id: '',
  template: 'mcp',
  mode: 'register',
  profile: '',
  scopes: '',
  clientId: '',
  clientSecret: '',
  privateKey: '',
  algorithm: 'ES256',
  source: '',
  file: '',
  idpIssuer: '',
  idpTokenEndpoint: '',
  idpClientId: '',
  idpClientSecret: '',
  injectOnly: false,
  dpop: false,
};
type Values = typeof EMPTY;

/** The `credentials` of the body, for the chosen mode. */
function credentialsOf(v: Values): Json {
  const client = {
    ...(v.clientId.trim() ? { client_id: v.clientId.trim() } : {}),
    ...(v.clientSecret ? { client_secret: v.clientSecret } : {}),
  };
  if (v.template === 'oauth2') return { mode: 'custom', ...client };
  switch (v.mode) {
    case 'register':
      return { mode: 'register' };
    case 'client_credentials':
      return {
        mode: v.mode,
        ...client,
        ...(v.privateKey.trim()
          ? { private_key: v.privateKey, signing_algorithm: v.algorithm }
          : {}),
      };
    case 'jwt_bearer':
      return {
        mode: v.mode,
        ...client,
        assertion_source: v.source.trim(),
        ...(v.file.trim() ? { assertion_file: v.file.trim() } : {}),
      };
    case 'enterprise':
      return {
        mode: v.mode,
        ...client,
        identity_provider: {
          issuer: v.idpIssuer.trim(),
          token_endpoint: v.idpTokenEndpoint.trim(),
          client_id: v.idpClientId.trim(),
          ...(v.idpClientSecret ? { client_secret: v.idpClientSecret } : {}),
        },
      };
    default:
      return { mode: v.mode, ...client };
  }
}

export function ProviderForm(props: { resourceUrl: string; onSaved: (view: Json) => void }) {
  const say = useSay();
  const [v, setValues] = useState<Values>(EMPTY);
  const [profiles, setProfiles] = useState<Profile[]>([]);
  const [params, setParams] = useState<Record<string, string>>({});
  const [saved, setSaved] = useState<Json | null>(null);
  const [error, setError] = useState<unknown>(null);
  const set = (patch: Partial<Values>) => setValues((current) => ({ ...current, ...patch }));

  useEffect(() => {
    api<{ items: Profile[] }>('GET', '/api/admin/profiles')
      .then((page) => {
        const classic = page.items.filter((item) => item.template === 'oauth2');
        setProfiles(classic);
        if (classic[0] !== undefined) set({ profile: classic[0].id });
      })
      .catch(() => setProfiles([]));
  }, []);

  const profile = profiles.find((p) => p.id === v.profile);
  const classic = v.template === 'oauth2';
  const mode = classic ? 'custom' : v.mode;

  const submit = async (event: Event) => {
    event.preventDefault();
    setError(null);
    setSaved(null);
    const scopes = words(v.scopes);
    // DPoP-bound tokens are inject-only by themselves (docs/api.md §14).
    const handOut = v.dpop ? { dpop: true } : v.injectOnly ? { hand_out: false } : {};
    const shown = Object.fromEntries(
      (profile?.params ?? []).map((name) => [name, (params[name] ?? '').trim()]),
    );
    const body = classic
      ? {
          template: 'oauth2',
          profile: v.profile,
          ...handOut,
          configuration: {
            ...(scopes.length > 0 ? { scopes } : {}),
            ...(Object.keys(shown).length > 0 ? { params: shown } : {}),
          },
          credentials: credentialsOf(v),
        }
      : {
          template: 'mcp',
          ...handOut,
          configuration: {
            resource_url: props.resourceUrl.trim(),
            ...(scopes.length > 0 ? { scopes } : {}),
          },
          credentials: credentialsOf(v),
        };
    // Write-only: the secrets leave the form as they are sent.
    set({ clientSecret: '', privateKey: '', idpClientSecret: '' });
    try {
      const view = await api('PUT', `/api/admin/providers/${encodePath(v.id.trim())}`, body);
      setSaved(view);
      props.onSaved(view);
      say('Provider saved.');
    } catch (failure) {
      setError(failure);
    }
  };

  const credentials = saved === null ? null : (saved.credentials as Json);
  return (
    <section aria-labelledby="provider-title">
      <h3 id="provider-title">2. Provider</h3>
      <form onSubmit={submit}>
        <Field
          id="provider-id"
          label="Provider id"
          required
          placeholder="acme/linear"
          value={v.id}
          onInput={(id) => set({ id })}
        />
        <Choice
          id="provider-template"
          label="Kind"
          value={v.template}
          options={[
            ['mcp', 'MCP server (the URL discovered above)'],
            ['oauth2', 'Classic API (a profile of the catalog)'],
          ]}
          onChange={(template) => set({ template })}
        />
        {classic && (
          <>
            <Choice
              id="profile"
              label="Profile"
              value={v.profile}
              options={profiles.map((p) => [p.id, `${p.label} (${p.id})`])}
              onChange={(id) => set({ profile: id })}
            />
            {(profile?.params ?? []).map((name) => (
              <Field
                key={name}
                id={`param-${name}`}
                label={`Parameter ${name}`}
                required
                value={params[name] ?? ''}
                onInput={(value) => setParams((all) => ({ ...all, [name]: value }))}
              />
            ))}
          </>
        )}
        <Field
          id="provider-scopes"
          label="Scopes (space-separated)"
          placeholder={profile?.scopes_example.join(' ')}
          value={v.scopes}
          onInput={(scopes) => set({ scopes })}
        />
        <Choice
          id="provider-mode"
          label="Client"
          value={mode}
          disabled={classic}
          options={classic ? [['custom', 'Custom credentials (the operator’s client)']] : MCP_MODES}
          onChange={(value) => set({ mode: value })}
        />
        {mode !== 'register' && (
          <Field
            id="client-id"
            label="Client id"
            required
            value={v.clientId}
            onInput={(clientId) => set({ clientId })}
          />
        )}
        {(mode === 'custom' || mode === 'client_credentials' || mode === 'enterprise') && (
          <Field
            id="client-secret"
            label="Client secret (write-only)"
            type="password"
            value={v.clientSecret}
            onInput={(clientSecret) => set({ clientSecret })}
          />
        )}
        {mode === 'client_credentials' && (
          <>
            <div class="field">
              <label for="private-key">
                Or a private key, PKCS #8 PEM (write-only; private_key_jwt)
              </label>
              <textarea
                id="private-key"
                rows={4}
                value={v.privateKey}
                onInput={(event) =>
                  set({ privateKey: (event.currentTarget as HTMLTextAreaElement).value })
                }
              />
            </div>
            <Choice
              id="signing-algorithm"
              label="Signing algorithm"
              value={v.algorithm}
              options={ALGORITHMS.map((a) => [a, a])}
              onChange={(algorithm) => set({ algorithm })}
            />
          </>
        )}
        {mode === 'jwt_bearer' && (
          <>
            <Field
              id="assertion-source"
              label="Assertion source (configured by the operator)"
              required
              value={v.source}
              onInput={(source) => set({ source })}
            />
            <Field
              id="assertion-file"
              label="Assertion file (a directory source)"
              value={v.file}
              onInput={(file) => set({ file })}
            />
          </>
        )}
        {mode === 'enterprise' && (
          <fieldset>
            <legend>Identity provider</legend>
            <Field
              id="idp-issuer"
              label="IdP issuer"
              required
              type="url"
              value={v.idpIssuer}
              onInput={(idpIssuer) => set({ idpIssuer })}
            />
            <Field
              id="idp-token-endpoint"
              label="IdP token endpoint"
              required
              type="url"
              value={v.idpTokenEndpoint}
              onInput={(idpTokenEndpoint) => set({ idpTokenEndpoint })}
            />
            <Field
              id="idp-client-id"
              label="IdP client id"
              required
              value={v.idpClientId}
              onInput={(idpClientId) => set({ idpClientId })}
            />
            <Field
              id="idp-client-secret"
              label="IdP client secret (write-only)"
              type="password"
              value={v.idpClientSecret}
              onInput={(idpClientSecret) => set({ idpClientSecret })}
            />
          </fieldset>
        )}
        <div class="check">
          <input
            id="inject-only"
            type="checkbox"
            checked={v.injectOnly}
            onChange={(event) =>
              set({ injectOnly: (event.currentTarget as HTMLInputElement).checked })
            }
          />
          <label for="inject-only">
            Inject-only: tokens are never handed out, only used by the gateway and the proxy
          </label>
        </div>
        <div class="check">
          <input
            id="dpop"
            type="checkbox"
            checked={v.dpop}
            onChange={(event) => set({ dpop: (event.currentTarget as HTMLInputElement).checked })}
          />
          <label for="dpop">
            DPoP: tokens bound to a key of each connection, even where the server does not list DPoP
            (inject-only)
          </label>
        </div>
        <button type="submit">Save provider</button>
      </form>
      <div id="provider-result">
        {error !== null && <Failure error={error} />}
        {saved !== null && credentials !== null && (
          <>
            <p>
              Provider {String(saved.id)}: client {String(credentials.client_id)} (
              {String(credentials.registration)}, {String(credentials.token_endpoint_auth_method)}).
            </p>
            {credentials.redirect_uri !== null && (
              <p class="hint">Redirect URI: {String(credentials.redirect_uri)}</p>
            )}
            {credentials.registration_response !== null && (
              <JsonView
                label="Registration answer (secrets masked)"
                value={credentials.registration_response}
              />
            )}
          </>
        )}
      </div>
    </section>
  );
}
