/** Shortest root key accepted (API.md §1.1). */
export const MIN_ROOT_KEY_LENGTH = 32;

/** Least character-frequency entropy estimate of a root key, in bits. */
export const MIN_ROOT_KEY_BITS = 72;

/**
 * Why a root key is guessable, or `null`. A guard against obvious mistakes (`aaaa…`, a word
 * repeated), not a measure of strength: the estimate is the Shannon entropy of the key's
 * character frequencies times its length, and a key must not repeat a shorter part of it.
 * A random hex key of 32 characters passes (about 115 bits by this estimate).
 */
export function rootKeyWeakness(key: string): string | null {
  for (let period = 1; period <= key.length / 2; period++) {
    let repeats = true;
    for (let i = period; i < key.length && repeats; i++) repeats = key[i] === key[i - period];
    if (repeats) return 'it repeats a shorter part of itself';
  }
  const counts = new Map<string, number>();
  for (const char of key) counts.set(char, (counts.get(char) ?? 0) + 1);
  let bits = 0;
  for (const count of counts.values()) {
    const p = count / key.length;
    bits -= count * Math.log2(p);
  }
  if (bits < MIN_ROOT_KEY_BITS) {
    return `its characters carry about ${Math.floor(bits)} bits, at least ${MIN_ROOT_KEY_BITS} are needed`;
  }
  return null;
}
