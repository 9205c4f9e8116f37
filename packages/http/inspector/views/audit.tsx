/* The audit log (docs/api.md §11), newest first, filtered, older pages by the cursor. */
import { useEffect, useState } from 'preact/hooks';
import { type Json, openApi, query } from '../api.js';
import { Filters, Listing } from '../listing.js';
import { usePages } from '../pages.js';
import { Choice, Field, JsonView, When } from '../ui.js';

interface Event {
  id: string;
  type: string;
  time: string;
  actor: string;
  resource: string;
  data: Json;
}

let known: Promise<string[]> | null = null;

/**
 * The event types, as this broker's own OpenAPI document lists them: read once a page (the
 * document is not small), again after a failure.
 */
function eventTypes(): Promise<string[]> {
  known ??= readEventTypes().catch(() => {
    known = null;
    return [];
  });
  return known;
}

async function readEventTypes(): Promise<string[]> {
  const document = await openApi();
  const operation = (document.paths as Record<string, Record<string, Json>>)['/api/admin/audit']
    ?.get;
  const parameter = (operation?.parameters as Json[] | undefined)?.find((p) => p.name === 'type');
  const values = (parameter?.schema as Json | undefined)?.enum;
  return Array.isArray(values) ? values.map(String) : [];
}

export function AuditView() {
  const pages = usePages<Event>();
  const [types, setTypes] = useState<string[]>([]);
  const [prefix, setPrefix] = useState('');
  const [type, setType] = useState('');
  const [since, setSince] = useState('');
  const list = () => {
    const from = since === '' ? undefined : new Date(since).toISOString();
    return pages.load(
      `/api/admin/audit${query({ prefix: prefix.trim(), type, since: from, limit: '25' })}`,
    );
  };
  useEffect(() => {
    void list();
    eventTypes()
      .then(setTypes)
      .catch(() => setTypes([]));
  }, []);
  return (
    <section aria-labelledby="audit-title">
      <h2 id="audit-title">Audit</h2>
      <Filters onSubmit={list}>
        <Field id="audit-prefix" label="Resource prefix" value={prefix} onInput={setPrefix} />
        <Choice
          id="audit-type"
          label="Type"
          value={type}
          options={[['', 'any'], ...types.map((t): [string, string] => [t, t])]}
          onChange={setType}
        />
        <Field
          id="audit-since"
          label="Since"
          type="datetime-local"
          value={since}
          onInput={setSince}
        />
        <button type="submit">Filter</button>
      </Filters>
      <Listing
        pages={pages}
        caption={`${pages.items.length} events, newest first`}
        columns={[['Time'], ['Type'], ['Actor', 'wide'], ['Resource'], ['Data']]}
        next="Older"
        row={(event) => (
          <tr key={event.id}>
            <td>
              <When at={event.time} />
            </td>
            <td>{event.type}</td>
            <td class="wide">{event.actor}</td>
            <td>{event.resource}</td>
            <td>
              {Object.keys(event.data).length === 0 ? (
                '—'
              ) : (
                <JsonView label="data" value={event.data} />
              )}
            </td>
          </tr>
        )}
      />
    </section>
  );
}
