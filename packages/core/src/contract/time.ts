/**
 * Instants already written, and how: the same few repeat read after read (a record's
 * creation, its last change, a token's expiry), and `Date#toISOString` costs about 0.4 µs
 * on Node 20 — five of them were most of a connection's view. Bounded: emptied when full.
 */
const written = new Map<number, string>();
const WRITTEN_LIMIT = 2048;

/** An instant as every time of the contract is written: ISO 8601 UTC with milliseconds. */
export function isoTime(ms: number): string {
  let text = written.get(ms);
  if (text === undefined) {
    // Throws RangeError for what is not an instant (NaN, beyond ±8.64e15): never kept.
    text = new Date(ms).toISOString();
    if (written.size >= WRITTEN_LIMIT) written.clear();
    written.set(ms, text);
  }
  return text;
}

/** {@link isoTime}, or `null` for no instant. */
export function isoTimeOrNull(ms: number | null): string | null {
  return ms === null ? null : isoTime(ms);
}

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * A duration as people write it, in milliseconds: a whole number and a unit, `ms`, `s`,
 * `m`, `h` or `d` (`90s`, `30m`, `12h`, `7d`).
 *
 * @throws {TypeError} naming what was given, for anything else.
 * @example
 * parseDuration('7d'); // 604800000
 * @see docs/connections.md "Idle refresh" (`refreshIdleAfter`, `KEYWAY_REFRESH_IDLE_AFTER`)
 */
export function parseDuration(text: string): number {
  const match = /^([0-9]{1,9})(ms|s|m|h|d)$/.exec(text.trim());
  if (match === null) {
    throw new TypeError(
      `${JSON.stringify(text.slice(0, 40))} is not a duration: write a whole number and a unit (ms, s, m, h, d), ` +
        `like 90s, 12h or 7d`,
    );
  }
  return Number(match[1]) * (UNITS[match[2] as string] as number);
}
