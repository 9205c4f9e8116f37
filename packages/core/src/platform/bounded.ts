/**
 * Sets `key` to `value` in a map kept to at most `limit` entries, the first set dropped
 * first: a key set again counts as new (it moves to the end), and what is dropped is the
 * entry longest unset. The bound of every in-memory cache of core (opened tokens, views,
 * DPoP handles, client metadata documents).
 */
export function setBounded<K, V>(map: Map<K, V>, key: K, value: V, limit: number): void {
  map.delete(key);
  for (const oldest of map.keys()) {
    if (map.size < limit) break;
    map.delete(oldest);
  }
  map.set(key, value);
}
