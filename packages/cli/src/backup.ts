import { closeSync, constants, existsSync, openSync, rmSync } from 'node:fs';
import { DEFAULT_DATABASE, isPostgres } from './serve.js';

/**
 * `keyway backup <file>`: a consistent copy of the SQLite database (KEYWAY_DATABASE, as
 * `keyway serve` reads it) through SQLite's online backup API, while the broker runs and
 * writes: the copy is one moment of the database, never a torn file. It is written only
 * if `<file>` does not exist yet (nor is a link), created readable by its owner only before
 * anything is copied into it (it holds encrypted tokens and secrets, and the hashes of broker
 * tokens). `onProgress` hears each step of the copy (100 pages at a time).
 *
 * The vault keys are not in it: without them (`<database>.vault-keys`, or
 * KEYWAY_VAULT_KEYS) the copy's secrets cannot be read, so they are backed up apart.
 *
 * @throws {Error} naming what is wrong: PostgreSQL (use `pg_dump`), `:memory:`, a missing
 *   database, an existing target.
 */
export async function backupDatabase(
  env: Record<string, string | undefined>,
  target: string,
  onProgress?: (step: { totalPages: number; remainingPages: number }) => void,
): Promise<{ database: string; target: string; pages: number; vaultKeys: string }> {
  const database = env.KEYWAY_DATABASE ?? DEFAULT_DATABASE;
  if (isPostgres(database)) {
    throw new Error(
      'KEYWAY_DATABASE is PostgreSQL: back it up with pg_dump (docs/operations.md); keyway backup copies a SQLite file',
    );
  }
  if (database === ':memory:') throw new Error('KEYWAY_DATABASE is :memory:: nothing to back up');
  if (!existsSync(database)) throw new Error(`no database at ${database} (KEYWAY_DATABASE)`);
  // Made here, readable by its owner only, before a byte is copied into it (a reader who
  // opened it early would keep the whole copy); never over an existing file or a link.
  try {
    closeSync(
      openSync(
        target,
        constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY | constants.O_NOFOLLOW,
        0o600,
      ),
    );
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // A link, even one to nowhere, exists too (O_EXCL never follows one).
    if (code === 'EEXIST' || code === 'ELOOP') throw new Error(`${target} exists: name a new file`);
    throw error;
  }
  const { default: Database } = await import('better-sqlite3');
  const source = new Database(database, { readonly: true, fileMustExist: true });
  try {
    const { totalPages } = await source.backup(target, {
      progress: (step) => {
        onProgress?.(step);
        return 100;
      },
    });
    const vaultKeys =
      env.KEYWAY_VAULT_KEYS !== undefined ? 'KEYWAY_VAULT_KEYS' : `${database}.vault-keys`;
    return { database, target, pages: totalPages, vaultKeys };
  } catch (error) {
    rmSync(target, { force: true });
    throw error;
  } finally {
    source.close();
  }
}
