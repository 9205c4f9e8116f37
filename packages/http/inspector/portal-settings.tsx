/*
 * What the portal reads of a connection (docs/api.md §18): the alias its tools are named by,
 * and which of its server's tools the portal offers. Edited in place, saved with PATCH.
 */
import { useEffect, useState } from 'preact/hooks';
import { api, base, encodePath } from './api.js';
import { Copyable, Failure, Field, useSay } from './ui.js';

/** A connection's tool policy as the API shows it. */
export interface ToolPolicy {
  allow?: string[];
  deny?: string[];
  read_only?: boolean;
}

const words = (text: string) => text.split(/\s+/).filter((word) => word !== '');

export function PortalSettings(props: {
  connectionId: string;
  alias: string | null;
  tools: ToolPolicy | null;
  /** Called with the connection as saved. */
  onSaved: () => void;
}) {
  const say = useSay();
  const { connectionId } = props;
  const segment = connectionId.slice(connectionId.lastIndexOf('/') + 1);
  const parent = connectionId.includes('/')
    ? connectionId.slice(0, connectionId.lastIndexOf('/'))
    : null;
  const [alias, setAlias] = useState(props.alias ?? '');
  const [allow, setAllow] = useState((props.tools?.allow ?? []).join(' '));
  const [deny, setDeny] = useState((props.tools?.deny ?? []).join(' '));
  const [readOnly, setReadOnly] = useState(props.tools?.read_only === true);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    setAlias(props.alias ?? '');
    setAllow((props.tools?.allow ?? []).join(' '));
    setDeny((props.tools?.deny ?? []).join(' '));
    setReadOnly(props.tools?.read_only === true);
  }, [props.alias, props.tools]);

  const save = async (event: Event) => {
    event.preventDefault();
    setError(null);
    const policy: ToolPolicy = {
      ...(words(allow).length > 0 ? { allow: words(allow) } : {}),
      ...(words(deny).length > 0 ? { deny: words(deny) } : {}),
      ...(readOnly ? { read_only: true } : {}),
    };
    try {
      await api('PATCH', `/api/oauth/connections/${encodePath(connectionId)}`, {
        alias: alias.trim() === '' ? null : alias.trim(),
        tools: Object.keys(policy).length === 0 ? null : policy,
      });
      say(`Portal settings of ${connectionId} saved.`);
      props.onSaved();
    } catch (failure) {
      setError(failure);
    }
  };

  const field = (name: string) => `portal-${name}-${connectionId}`;
  return (
    <form class="portal-settings" onSubmit={save} aria-label={`Portal settings of ${connectionId}`}>
      <h4>In the portal</h4>
      {parent !== null && (
        <Copyable
          label="Portal URL (every MCP connection of its parent path)"
          value={`${location.origin}${base}/portal/${encodePath(parent)}`}
        />
      )}
      <Field
        id={field('alias')}
        label="Alias (its tools are named <alias>__<tool>)"
        value={alias}
        placeholder={segment}
        hint={`Empty: the last segment of its path, ${segment}.`}
        onInput={setAlias}
      />
      <Field
        id={field('allow')}
        label="Allow only these tools (globs, space-separated)"
        value={allow}
        placeholder="search_* get_*"
        onInput={setAllow}
      />
      <Field
        id={field('deny')}
        label="Deny these tools (globs, space-separated)"
        value={deny}
        placeholder="delete_* admin"
        onInput={setDeny}
      />
      <div class="check">
        <input
          id={field('read-only')}
          type="checkbox"
          checked={readOnly}
          onChange={(event) => setReadOnly((event.currentTarget as HTMLInputElement).checked)}
        />
        <label for={field('read-only')}>
          Read-only: only the tools the server marks read-only (readOnlyHint)
        </label>
      </div>
      <button type="submit">Save portal settings</button>
      {error !== null && <Failure error={error} />}
    </form>
  );
}
