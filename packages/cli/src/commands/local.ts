import { generateVaultKey } from '@keyway/core';
import { EXIT, UsageError } from '../admin-client.js';
import type { Command } from './command.js';

/* Commands that need no broker: keys, and work on the database itself. */

/** A local command's failure is the operator's to fix: a usage error with its words. */
const asUsage = (error: unknown) => {
  throw new UsageError(error instanceof Error ? error.message : String(error));
};

export const LOCAL_COMMANDS: Command[] = [
  {
    name: 'keys generate',
    usage: '',
    summary: 'a root key and a vault key, for KEYWAY_ROOT_KEY and KEYWAY_VAULT_KEYS',
    local: true,
    async run({ io, json }) {
      const keys = { root_key: generateVaultKey(), vault_key: generateVaultKey() };
      if (json) io.out(JSON.stringify(keys));
      else io.out(`KEYWAY_ROOT_KEY=${keys.root_key}\nKEYWAY_VAULT_KEYS=${keys.vault_key}`);
      return EXIT.ok;
    },
  },
  {
    name: 'vault rewrap',
    usage: '',
    summary:
      'moves every vault entry onto the first of KEYWAY_VAULT_KEYS (new key first), on the database itself; then ' +
      'drop the old key',
    local: true,
    async run({ io, json }) {
      const { rewrapVault } = await import('../vault.js');
      const result = await rewrapVault(io.env).catch(asUsage);
      if (json) io.out(JSON.stringify(result));
      else
        io.out(`re-wrapped ${result.moved} vault entries of ${result.database} onto the first key`);
      return EXIT.ok;
    },
  },
  {
    name: 'backup',
    usage: '<file>',
    summary:
      'copies the SQLite database (KEYWAY_DATABASE) while the broker runs, consistently; the vault keys are kept apart',
    local: true,
    async run({ io, arg, json }) {
      const { backupDatabase } = await import('../backup.js');
      const result = await backupDatabase(io.env, arg(0, 'file')).catch(asUsage);
      if (json) io.out(JSON.stringify(result));
      else
        io.out(
          `backed up ${result.database} to ${result.target} (${result.pages} pages). The vault keys are not in it: ` +
            `keep ${result.vaultKeys} with it, apart, or its secrets cannot be read`,
        );
      return EXIT.ok;
    },
  },
];
