import { fromBase64Url, toBase64Url, utf8 } from '../platform/bytes.js';
import { KeywayError } from './errors.js';

/**
 * One page of a list (docs/api.md §1.4).
 *
 * @see [docs/api.md §1.4](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#14-timestamps-lists)
 */
export interface Page<T> {
  items: T[];
  /** Pass as `cursor` to get the next page; `null` on the last page. */
  next_cursor: string | null;
}

/** List limits (docs/api.md §1.4). */
export const LIST_LIMIT = { default: 100, max: 500 } as const;

const decoder = new TextDecoder('utf-8', { fatal: true });

/**
 * The window of a parsed list query: its limit (default 100) and the last key of the
 * previous page, decoded from `cursor`.
 *
 * @throws {KeywayError} `invalid_request` for a cursor this list did not return.
 */
export function listWindow(query: { limit?: number | undefined; cursor?: string | undefined }): {
  limit: number;
  after?: string;
} {
  const limit = query.limit ?? LIST_LIMIT.default;
  if (query.cursor === undefined) return { limit };
  const bytes = fromBase64Url(query.cursor);
  let after: string | undefined;
  try {
    after = bytes === null || bytes.length === 0 ? undefined : decoder.decode(bytes);
  } catch {
    after = undefined;
  }
  if (after === undefined) {
    const message = '"cursor" is not a cursor this list returned';
    throw new KeywayError('invalid_request', message, { details: [{ path: 'cursor', message }] });
  }
  return { limit, after };
}

/**
 * Builds a page from up to `limit + 1` records fetched in order: the extra record, when
 * present, only proves that there is a next page.
 */
export function toPage<R, T>(
  records: R[],
  limit: number,
  keyOf: (record: R) => string,
  view: (record: R) => T,
): Page<T> {
  const items = records.slice(0, limit);
  const last = items[items.length - 1];
  const next_cursor =
    records.length > limit && last !== undefined ? toBase64Url(utf8(keyOf(last))) : null;
  return { items: items.map(view), next_cursor };
}

/**
 * One page of a list, as every list of the contract reads it (docs/api.md §1.4): the window of
 * the query, `fetch` asked for one record more than the page (it proves a next page), the
 * page built from what came back.
 *
 * @throws {KeywayError} `invalid_request` for a cursor this list did not return.
 */
export async function listPage<R, T>(
  query: { limit?: number | undefined; cursor?: string | undefined },
  fetch: (window: { limit: number; after?: string }) => Promise<R[]>,
  keyOf: (record: R) => string,
  view: (record: R) => T,
): Promise<Page<T>> {
  const { limit, after } = listWindow(query);
  const records = await fetch({ limit: limit + 1, ...(after === undefined ? {} : { after }) });
  return toPage(records, limit, keyOf, view);
}
