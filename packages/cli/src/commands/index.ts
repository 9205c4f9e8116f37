import type { Command } from './command.js';
import { CONNECTION_COMMANDS } from './connections.js';
import { LOCAL_COMMANDS } from './local.js';
import { PROVIDER_COMMANDS } from './providers.js';
import { SECRET_COMMANDS } from './secrets.js';
import { TOKEN_COMMANDS } from './tokens.js';

export { type Command, type CommandContext, OPTIONS, type OptionValues } from './command.js';

/** Every command of `keyway` but `serve`, in the order `--help` lists them. */
export const COMMANDS: readonly Command[] = [
  ...TOKEN_COMMANDS,
  ...PROVIDER_COMMANDS,
  ...CONNECTION_COMMANDS,
  ...SECRET_COMMANDS,
  ...LOCAL_COMMANDS,
];

/** The command `argv` calls (`token create …`, `discover …`), and how many words named it. */
export function commandOf(argv: readonly string[]): { command: Command; words: number } | null {
  const two = COMMANDS.find((command) => command.name === `${argv[0]} ${argv[1]}`);
  if (two !== undefined) return { command: two, words: 2 };
  const one = COMMANDS.find((command) => command.name === argv[0]);
  return one === undefined ? null : { command: one, words: 1 };
}

/** A command's help: `keyway <name> <usage>`, then what it does. */
export function helpOf(command: Command): string {
  const usage = command.usage === '' ? '' : ` ${command.usage}`;
  return `keyway ${command.name}${usage}\n      ${command.summary}`;
}

/** The help of every command of one resource (`token`), or `null` for an unknown one. */
export function resourceHelp(resource: string): string | null {
  const commands = COMMANDS.filter((command) => command.name.split(' ')[0] === resource);
  return commands.length === 0 ? null : commands.map(helpOf).join('\n');
}

const indent = (text: string) => text.replace(/^/gm, '  ');

/** The text of `keyway --help` for every command but `serve`. */
export const COMMANDS_USAGE = [
  'Commands over the HTTP API (KEYWAY_URL, KEYWAY_TOKEN: the root key or a broker token;',
  '--json on every one):',
  indent(
    COMMANDS.filter((command) => command.local !== true)
      .map(helpOf)
      .join('\n'),
  ),
  'On the database itself (KEYWAY_DATABASE, KEYWAY_VAULT_KEYS, as keyway serve reads them):',
  indent(
    COMMANDS.filter((command) => command.local === true)
      .map(helpOf)
      .join('\n'),
  ),
  'Exit codes: 0 done, 1 refused by the API (its error code is printed), 2 usage, 3 unreachable.',
].join('\n');
