/* Webhook deliveries (docs/api.md §11; the root key only): failures first. */
import { useEffect, useState } from 'preact/hooks';
import { query } from '../api.js';
import { Filters, Listing } from '../listing.js';
import { usePages } from '../pages.js';
import { Badge, Choice, When } from '../ui.js';

interface Delivery {
  id: string;
  event: { id: string; type: string; resource: string };
  url: string;
  status: string;
  attempts: number;
  next_attempt_at: string | null;
  last_attempt_at: string | null;
  last_status: number | null;
  last_error: string | null;
}

export function WebhooksView() {
  const pages = usePages<Delivery>();
  const [status, setStatus] = useState('failed');
  const list = (chosen = status) =>
    pages.load(`/api/admin/webhooks/deliveries${query({ status: chosen, limit: '25' })}`);
  useEffect(() => {
    void list();
  }, []);
  return (
    <section aria-labelledby="webhooks-title">
      <h2 id="webhooks-title">Webhooks</h2>
      <Filters onSubmit={() => void list()}>
        <Choice
          id="webhooks-status"
          label="Deliveries"
          value={status}
          options={[
            ['failed', 'failed (given up)'],
            ['pending', 'pending (retrying)'],
            ['delivered', 'delivered'],
            ['', 'all'],
          ]}
          onChange={(value) => {
            setStatus(value);
            void list(value);
          }}
        />
        <button type="submit">List</button>
      </Filters>
      <Listing
        pages={pages}
        caption={`${pages.items.length} deliveries`}
        columns={[
          ['Event'],
          ['Endpoint', 'wide'],
          ['Status'],
          ['Attempts', 'wide'],
          ['Last answer'],
          ['Next attempt', 'wide'],
        ]}
        row={(delivery) => (
          <tr key={delivery.id}>
            <td>
              {delivery.event.type}
              <br />
              <small>{delivery.event.resource}</small>
            </td>
            <td class="wide">{delivery.url}</td>
            <td>
              <Badge value={delivery.status} />
            </td>
            <td class="wide">{delivery.attempts}</td>
            <td>
              {/* The error names the status when there was one (`HTTP 500`). */}
              {delivery.last_error ??
                (delivery.last_status === null ? '' : `HTTP ${delivery.last_status}`)}
              {delivery.last_attempt_at !== null && (
                <>
                  {' '}
                  (<When at={delivery.last_attempt_at} />)
                </>
              )}
            </td>
            <td class="wide">
              <When at={delivery.next_attempt_at} never="—" />
            </td>
          </tr>
        )}
      />
    </section>
  );
}
