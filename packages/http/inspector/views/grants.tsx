/*
 * The grants of MCP clients that signed in (docs/api.md §17): which client, for whom, at
 * which endpoint, when it last got a token; each revocable with its tokens.
 */
import { useEffect, useState } from 'preact/hooks';
import { api, describe, encodePath } from '../api.js';
import { Listing } from '../listing.js';
import { usePages } from '../pages.js';
import { Hidden, useSay, When } from '../ui.js';

interface Grant {
  id: string;
  client_id: string;
  client_name: string | null;
  verified_host: string | null;
  endpoint: string;
  user: string;
  created_at: string;
  expires_at: string;
  last_used_at: string;
}

function GrantRow(props: { grant: Grant; onChanged: () => void }) {
  const say = useSay();
  const { grant } = props;
  const [confirm, setConfirm] = useState(false);
  const [note, setNote] = useState<string | null>(null);
  const client = grant.client_name ?? grant.client_id;
  const revoke = async () => {
    if (!confirm) {
      setConfirm(true);
      return;
    }
    try {
      await api('DELETE', `/api/admin/grants/${encodePath(grant.id)}`);
      say(`The grant of ${client} at ${grant.endpoint} is revoked, with its tokens.`);
      props.onChanged();
    } catch (failure) {
      setNote(describe(failure));
    }
  };
  return (
    <tr>
      <td>
        {client}
        <br />
        <small>{grant.verified_host ?? 'unverified (registered)'}</small>
      </td>
      <td>{grant.user}</td>
      <td>{grant.endpoint}</td>
      <td class="wide">
        <When at={grant.last_used_at} />
      </td>
      <td class="wide">
        <When at={grant.expires_at} />
      </td>
      <td>
        <div class="row-actions">
          <button type="button" class="small danger" onClick={() => void revoke()}>
            {confirm ? 'Confirm: revoke' : 'Revoke'}
            <Hidden>
              {' '}
              the grant of {client} at {grant.endpoint}
            </Hidden>
          </button>
          {note !== null && <p class="error">{note}</p>}
        </div>
      </td>
    </tr>
  );
}

export function GrantsView() {
  const pages = usePages<Grant>();
  const list = () => pages.load('/api/admin/grants?limit=50');
  useEffect(() => {
    void list();
  }, []);
  return (
    <section aria-labelledby="grants-title">
      <h2 id="grants-title">Grants</h2>
      <p class="hint">
        MCP clients that signed in, each for one endpoint. Revoking a grant ends its refresh token
        and every access token it issued; the client must sign in again.
      </p>
      <Listing
        pages={pages}
        caption={`${pages.items.length} grants`}
        columns={[
          ['Client'],
          ['User'],
          ['Endpoint'],
          ['Last used', 'wide'],
          ['Expires', 'wide'],
          [''],
        ]}
        row={(grant) => <GrantRow key={grant.id} grant={grant} onChanged={() => void list()} />}
      />
    </section>
  );
}
