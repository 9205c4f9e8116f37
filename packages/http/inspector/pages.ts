/* A list read page by page, following the API's cursor (docs/api.md §1.4). */
import { useState } from 'preact/hooks';
import { api, type Page } from './api.js';

export interface Paged<T> {
  items: T[];
  /** `null` before the first read. */
  loaded: boolean;
  more: boolean;
  busy: boolean;
  error: unknown;
  /** Reads the first page of `path` (a query string already in it). */
  load: (path: string) => Promise<void>;
  /** Reads the next page of the last path. */
  next: () => Promise<void>;
  /** Drops an item from what is shown. */
  drop: (keep: (item: T) => boolean) => void;
}

export function usePages<T>(): Paged<T> {
  const [items, setItems] = useState<T[]>([]);
  const [loaded, setLoaded] = useState(false);
  const [cursor, setCursor] = useState<string | null>(null);
  const [path, setPath] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);

  async function read(target: string, after: string | null, append: boolean) {
    setBusy(true);
    setError(null);
    try {
      const joiner = target.includes('?') ? '&' : '?';
      const suffix = after === null ? '' : `${joiner}cursor=${encodeURIComponent(after)}`;
      const page = await api<Page<T>>('GET', `${target}${suffix}`);
      setItems((shown) => (append ? [...shown, ...page.items] : page.items));
      setCursor(page.next_cursor);
      setPath(target);
      setLoaded(true);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  }

  return {
    items,
    loaded,
    more: cursor !== null,
    busy,
    error,
    load: (target) => read(target, null, false),
    next: () => read(path, cursor, true),
    drop: (keep) => setItems((shown) => shown.filter(keep)),
  };
}
