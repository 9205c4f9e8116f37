import { fromBase64Url, toBase64Url, utf8 } from './bytes.js';
import { KeywayError } from './errors.js';

/** One page of a list (API.md §1.4). */
export interface Page<T> {
  items: T[];
  /** Pass as `cursor` to get the next page; `null` on the last page. */
  next_cursor: string | null;
}

/** The query of every list operation. `limit` may be a number or a decimal string. */
export interface ListOptions {
  /** 1–500, default 100. */
  limit?: number | string | undefined;
  /** The `next_cursor` of the previous page. */
  cursor?: string | undefined;
}

/** List limits (API.md §1.4). */
export const LIST_LIMIT = { default: 100, max: 500 } as const;

const decoder = new TextDecoder('utf-8', { fatal: true });

function badQuery(parameter: string, message: string): KeywayError {
  return new KeywayError('invalid_request', message, { details: [{ path: parameter, message }] });
}

/**
 * Validates `limit` and decodes `cursor` to the last key of the previous page.
 *
 * @throws {KeywayError} `invalid_request`.
 */
export function parseListOptions(options: ListOptions = {}): { limit: number; after?: string } {
  const { limit: rawLimit, cursor } = options;
  let limit: number = LIST_LIMIT.default;
  if (rawLimit !== undefined) {
    limit = typeof rawLimit === 'string' && /^[0-9]{1,4}$/.test(rawLimit) ? Number(rawLimit) : NaN;
    if (typeof rawLimit === 'number') limit = rawLimit;
    if (!Number.isInteger(limit) || limit < 1 || limit > LIST_LIMIT.max) {
      throw badQuery('limit', `"limit" must be an integer from 1 to ${LIST_LIMIT.max}`);
    }
  }
  if (cursor === undefined) return { limit };
  const bytes = typeof cursor === 'string' ? fromBase64Url(cursor) : null;
  let after: string | undefined;
  try {
    after = bytes === null || bytes.length === 0 ? undefined : decoder.decode(bytes);
  } catch {
    after = undefined;
  }
  if (after === undefined) throw badQuery('cursor', '"cursor" is not a cursor this list returned');
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
