/**
 * The default random source: the runtime's CSPRNG (`crypto.getRandomValues`), drawn
 * {@link POOL_BYTES} at a time. Every id an audited read writes takes random bytes, and a
 * call into the runtime per id cost more than the rest of the id; a pool pays it once per
 * few hundred ids. Each byte is handed out once: a draw copies its bytes out and zeroes
 * them in the pool, so the pool never holds a value already given away.
 */
export const POOL_BYTES = 4096;

/** A random source over the runtime's CSPRNG with a pool of {@link POOL_BYTES}. */
export function pooledRandomBytes(): (length: number) => Uint8Array {
  let pool = new Uint8Array(0);
  let offset = 0;
  return (length) => {
    if (length > POOL_BYTES) return crypto.getRandomValues(new Uint8Array(length));
    if (pool.length - offset < length) {
      pool.fill(0);
      pool = crypto.getRandomValues(new Uint8Array(POOL_BYTES));
      offset = 0;
    }
    const drawn = pool.slice(offset, offset + length);
    pool.fill(0, offset, offset + length);
    offset += length;
    return drawn;
  };
}
