/** An instant as every time of the contract is written: ISO 8601 UTC with milliseconds. */
export function isoTime(ms: number): string {
  return new Date(ms).toISOString();
}

/** {@link isoTime}, or `null` for no instant. */
export function isoTimeOrNull(ms: number | null): string | null {
  return ms === null ? null : isoTime(ms);
}
