/* The frame of every list view: its filters, its table page by page, and the next page. */
import type { ComponentChildren } from 'preact';
import type { Paged } from './pages.js';
import { Failure } from './ui.js';

/** A filter form: the fields, then a submit that reads the list again. */
export function Filters(props: { onSubmit: () => void; children: ComponentChildren }) {
  return (
    <form
      class="filters"
      onSubmit={(event) => {
        event.preventDefault();
        props.onSubmit();
      }}
    >
      {props.children}
    </form>
  );
}

/**
 * A column: its heading (`''`: a hidden one, for the row's buttons), and whether it gives way
 * on a phone (`wide`: the row's panel repeats it).
 */
export type Column = [heading: string, wide?: 'wide'];

/** The table of a {@link Paged} list, with its failure and a button for the next page. */
export function Listing<T>(props: {
  pages: Paged<T>;
  caption: string;
  columns: Column[];
  row: (item: T) => ComponentChildren;
  /** The next page's button: `More`, or `Older` for the audit log. */
  next?: string;
}) {
  const { pages } = props;
  return (
    <>
      {pages.error !== null && <Failure error={pages.error} />}
      <table>
        <caption>{pages.loaded ? props.caption : 'Reading…'}</caption>
        <thead>
          <tr>
            {props.columns.map(([heading, wide]) => (
              <th key={heading} scope="col" class={wide}>
                {heading === '' ? <span class="visually-hidden">Actions</span> : heading}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>{pages.items.map(props.row)}</tbody>
      </table>
      {pages.more && (
        <button type="button" disabled={pages.busy} onClick={() => void pages.next()}>
          {props.next ?? 'More'}
        </button>
      )}
    </>
  );
}
