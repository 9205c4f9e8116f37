/* Connections: the table of what the credential covers, filtered, each opened in a panel. */
import { useEffect, useState } from 'preact/hooks';
import { query } from '../api.js';
import { ConnectionPanel, type ConnectionView } from '../connection.js';
import { Filters, Listing } from '../listing.js';
import { usePages } from '../pages.js';
import { Badge, Choice, Field, Hidden, When } from '../ui.js';

export function ConnectionsView() {
  const pages = usePages<ConnectionView>();
  const [prefix, setPrefix] = useState('');
  const [status, setStatus] = useState('');
  const [provider, setProvider] = useState('');
  const [open, setOpen] = useState<string | null>(null);
  const list = () =>
    pages.load(
      `/api/oauth/connections${query({ prefix: prefix.trim(), status, provider_id: provider.trim(), limit: '25' })}`,
    );
  useEffect(() => {
    void list();
  }, []);
  return (
    <section aria-labelledby="connections-title">
      <h2 id="connections-title">Connections</h2>
      <Filters onSubmit={list}>
        <Field
          id="connections-prefix"
          label="Prefix"
          placeholder="acme/users"
          value={prefix}
          onInput={setPrefix}
        />
        <Choice
          id="connections-status"
          label="Status"
          value={status}
          options={[
            ['', 'any'],
            ['active', 'active'],
            ['pending', 'pending'],
            ['error', 'error'],
          ]}
          onChange={setStatus}
        />
        <Field
          id="connections-provider"
          label="Provider id"
          value={provider}
          onInput={setProvider}
        />
        <button type="submit">List</button>
      </Filters>
      <Listing
        pages={pages}
        caption={`${pages.items.length} connections${pages.more ? ' (more below)' : ''}`}
        columns={[
          ['Connection'],
          ['Provider', 'wide'],
          ['Status'],
          ['Refreshable', 'wide'],
          ['Token expires', 'wide'],
          [''],
        ]}
        row={(item) => (
          <tr key={item.connection_id} aria-selected={open === item.connection_id}>
            <td>{item.connection_id}</td>
            <td class="wide">{item.provider_id}</td>
            <td>
              <Badge value={item.status} />
            </td>
            <td class="wide">{item.refreshable ? 'yes' : 'no'}</td>
            <td class="wide">
              <When at={item.token_expires_at} />
            </td>
            <td>
              <button type="button" class="small" onClick={() => setOpen(item.connection_id)}>
                Open<Hidden> {item.connection_id}</Hidden>
              </button>
            </td>
          </tr>
        )}
      />
      {open !== null && (
        <ConnectionPanel
          id={open}
          onDeleted={(id) => pages.drop((item) => item.connection_id !== id)}
        />
      )}
    </section>
  );
}
