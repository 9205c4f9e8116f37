/** The last instant written, and how: a token's expiry is written on each of its hand-outs. */
let lastMs = Number.NaN;
let lastText = '';

/** An instant as every time of the contract is written: ISO 8601 UTC with milliseconds. */
export function isoTime(ms: number): string {
  if (ms === lastMs) return lastText;
  const text = new Date(ms).toISOString();
  lastMs = ms;
  lastText = text;
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
      `${JSON.stringify(text.slice(0, 40))} is not a duration: write a whole number and a unit (ms, s, m, h, d), like 90s, 12h or 7d`,
    );
  }
  return Number(match[1]) * (UNITS[match[2] as string] as number);
}
