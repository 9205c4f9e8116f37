/* Broker tokens: the credential's own tree, minted, narrowed and revoked (docs/api.md §3). */
import { useEffect, useState } from 'preact/hooks';
import { api, describe, encodePath, type Whoami } from '../api.js';
import { Listing } from '../listing.js';
import { usePages } from '../pages.js';
import { Copyable, Failure, Field, Hidden, useSay, When, words } from '../ui.js';

interface TokenItem {
  name: string;
  scopes: string[];
  expires_at: string;
  created_at: string;
  created_by: string;
}

/** The rules of minting for this credential, in words (docs/api.md §3.2). */
function MintRules(props: { who: Whoami }) {
  if (props.who.name === null)
    return <p class="hint">The root key mints any name, any scopes, up to 30 days.</p>;
  return (
    <p class="hint">
      As {props.who.name} you mint only names below yours ({props.who.name}.…), with scopes within{' '}
      {props.who.scopes.join(' ')}, expiring no later than yours (
      <When at={props.who.expires_at} />
      ).
    </p>
  );
}

function Mint(props: { who: Whoami; onMinted: () => void }) {
  const say = useSay();
  const [name, setName] = useState(props.who.name === null ? '' : `${props.who.name}.`);
  const [scopes, setScopes] = useState('');
  const [lifetime, setLifetime] = useState('3600');
  const [minted, setMinted] = useState<{ name: string; token: string } | null>(null);
  const [error, setError] = useState<unknown>(null);
  const submit = async (event: Event) => {
    event.preventDefault();
    setError(null);
    setMinted(null);
    try {
      const answer = await api('POST', '/api/admin/tokens', {
        name: name.trim(),
        scopes: words(scopes),
        expires_in: Number(lifetime),
      });
      setMinted({ name: String(answer.name), token: String(answer.access_token) });
      say(`Token ${String(answer.name)} minted: copy it now, it is shown this once.`);
      props.onMinted();
    } catch (failure) {
      setError(failure);
    }
  };
  return (
    <form onSubmit={submit} aria-labelledby="mint-title">
      <h3 id="mint-title">Mint a token</h3>
      <MintRules who={props.who} />
      <Field id="mint-name" label="Name" required value={name} onInput={setName} />
      <Field
        id="mint-scopes"
        label="Scopes (space-separated resource paths)"
        required
        placeholder="acme/users/alice"
        value={scopes}
        onInput={setScopes}
      />
      <Field
        id="mint-lifetime"
        label="Lifetime in seconds (60 to 2592000)"
        type="number"
        required
        value={lifetime}
        onInput={setLifetime}
      />
      <button type="submit">Mint</button>
      {error !== null && <Failure error={error} />}
      {minted !== null && (
        <div class="minted">
          <p>Shown this once; it lives only in this page until you leave it.</p>
          <Copyable label={`Token ${minted.name}`} value={minted.token} />
        </div>
      )}
    </form>
  );
}

function TokenRow(props: { item: TokenItem; onChanged: () => void }) {
  const say = useSay();
  const { item } = props;
  const [narrowing, setNarrowing] = useState(false);
  const [scopes, setScopes] = useState(item.scopes.join(' '));
  const [confirm, setConfirm] = useState(false);
  const [note, setNote] = useState<string | null>(null);
  const path = `/api/admin/tokens/${encodePath(item.name)}`;
  const narrow = async (event: Event) => {
    event.preventDefault();
    try {
      await api('PATCH', path, { scopes: words(scopes) });
      setNarrowing(false);
      say(`Token ${item.name} narrowed, with its descendants.`);
      props.onChanged();
    } catch (failure) {
      setNote(describe(failure));
    }
  };
  const revoke = async () => {
    if (!confirm) {
      setConfirm(true);
      return;
    }
    try {
      await api('DELETE', path);
      say(`Token ${item.name} and its descendants revoked.`);
      props.onChanged();
    } catch (failure) {
      setNote(describe(failure));
    }
  };
  return (
    <tr>
      <td>{item.name}</td>
      <td>{item.scopes.join(' ')}</td>
      <td class="wide">
        <When at={item.expires_at} />
      </td>
      <td class="wide">{item.created_by}</td>
      <td>
        <div class="row-actions">
          {narrowing ? (
            <form onSubmit={narrow} class="inline">
              <Field
                id={`narrow-${item.name}`}
                label={`New scopes of ${item.name}`}
                value={scopes}
                onInput={setScopes}
              />
              <button type="submit" class="small">
                Save
              </button>
            </form>
          ) : (
            <button type="button" class="small" onClick={() => setNarrowing(true)}>
              Narrow<Hidden> {item.name}</Hidden>
            </button>
          )}
          <button type="button" class="small danger" onClick={() => void revoke()}>
            {confirm ? 'Confirm: revoke the tree of' : 'Revoke'}
            <Hidden> {item.name}</Hidden>
          </button>
          {note !== null && <p class="error">{note}</p>}
        </div>
      </td>
    </tr>
  );
}

export function TokensView(props: { who: Whoami }) {
  const pages = usePages<TokenItem>();
  const list = () => pages.load('/api/admin/tokens?limit=50');
  useEffect(() => {
    void list();
  }, []);
  return (
    <section aria-labelledby="tokens-title">
      <h2 id="tokens-title">Tokens</h2>
      <Mint who={props.who} onMinted={() => void list()} />
      <Listing
        pages={pages}
        caption={
          props.who.name === null ? 'Every live token' : `${props.who.name} and its descendants`
        }
        columns={[['Name'], ['Scopes'], ['Expires', 'wide'], ['Created by', 'wide'], ['']]}
        row={(item) => (
          <TokenRow
            key={`${item.name} ${item.scopes.join(' ')} ${item.expires_at}`}
            item={item}
            onChanged={() => void list()}
          />
        )}
      />
    </section>
  );
}
