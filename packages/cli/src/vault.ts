import { existsSync, readFileSync } from 'node:fs';
import { createBroker, generateVaultKey } from '@keyway/core';
import { DEFAULT_DATABASE, openStorage } from './serve.js';
import { foreignKeysMessage } from './start-failures.js';

/**
 * `keyway vault rewrap`: re-encrypts every vault entry that is not under the first key of
 * the ring onto it, on the database itself (KEYWAY_DATABASE, as `keyway serve` reads it),
 * so the old keys can then be removed. Values and versions do not change; a value written
 * meanwhile is never overwritten (compare-and-set).
 *
 * @returns the number of entries moved.
 */
export async function rewrapVault(env: Record<string, string | undefined>): Promise<{
  moved: number;
  database: string;
}> {
  const database = env.KEYWAY_DATABASE ?? DEFAULT_DATABASE;
  const file = `${database}.vault-keys`;
  const vaultKeys =
    env.KEYWAY_VAULT_KEYS !== undefined
      ? env.KEYWAY_VAULT_KEYS.split(',').map((key) => key.trim())
      : existsSync(file)
        ? readFileSync(file, 'utf8')
            .split(/[\s,]+/)
            .filter((key) => key !== '')
        : null;
  if (vaultKeys === null) {
    throw new Error(
      `set KEYWAY_VAULT_KEYS (the new key first, then the old ones) or keep them in ${file}`,
    );
  }
  const storage = await openStorage(database);
  // No token is checked here: the root key only has to be valid.
  const broker = createBroker({
    rootKey: generateVaultKey(),
    storage,
    vaultKeys,
    purgeIntervalMs: false,
    rateLimits: false,
  });
  try {
    // Entries sealed with a key this ring lacks cannot be moved: named before any is.
    const foreign = await broker.vault.foreignKeys(storage);
    if (foreign.size > 0) {
      throw new Error(
        foreignKeysMessage(foreign, env.KEYWAY_VAULT_KEYS === undefined ? database : null),
      );
    }
    return { moved: await broker.vault.rewrap(storage), database };
  } finally {
    await broker.close();
  }
}
