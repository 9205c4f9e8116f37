/*
 * Why `keyway serve` could not start (or `keyway vault rewrap` would not run), in the
 * operator's words: the variable at fault and what to do about it.
 */

/** Why the server could not listen, in the operator's words: the variables and the remedy. */
export function listenFailure(error: unknown, host: string, port: number): unknown {
  const code = (error as NodeJS.ErrnoException).code;
  const where = `HOST ${host}, PORT ${port}`;
  const remedy: Record<string, string> = {
    EADDRINUSE: 'another process listens there: stop it, or set another PORT',
    EACCES:
      'this user may not listen there (ports below 1024 need privileges): set PORT above 1023',
    EADDRNOTAVAIL: 'HOST is not an address of this machine: set one of its addresses, or 0.0.0.0',
    ENOTFOUND: 'HOST is not a name this machine resolves: set an address, or 0.0.0.0',
  };
  if (code === undefined || !(code in remedy)) return error;
  return new Error(`cannot listen on ${where} (${code}): ${remedy[code]}`, { cause: error });
}

/**
 * Why a vault sealed with keys the ring lacks is refused (`keyway serve` will not start,
 * `keyway vault rewrap` moves nothing): which key ids, how many entries, and what to do. `keptBeside` is the SQLite database whose
 * `.vault-keys` file gave the keys, `null` when KEYWAY_VAULT_KEYS did.
 */
export function foreignKeysMessage(
  foreign: Map<string, number>,
  keptBeside: string | null,
): string {
  const which = [...foreign].map(([id, count]) => `${count} under key id ${id}`).join(', ');
  const given = keptBeside === null ? 'KEYWAY_VAULT_KEYS' : `${keptBeside}.vault-keys`;
  const remedy =
    keptBeside === null
      ? 'give back the keys they were sealed with, after the one that encrypts ' +
        '(`keyway vault rewrap` then moves them onto it)'
      : 'restore that file from the backup taken with the database, or set KEYWAY_VAULT_KEYS ' +
        'to the keys they were sealed with';
  return (
    `the vault holds entries sealed with keys that ${given} does not hold (${which}), which no ` +
    `request could open: ${remedy}`
  );
}
