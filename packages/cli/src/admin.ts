import { parseArgs } from 'node:util';
import { type AdminIo, client, EXIT, Refused, Unreachable, UsageError } from './admin-client.js';
import {
  COMMANDS,
  COMMANDS_USAGE,
  type CommandContext,
  commandOf,
  helpOf,
  OPTIONS,
  type OptionValues,
  resourceHelp,
} from './commands/index.js';
import { clean, printable } from './terminal.js';

export { type AdminIo, EXIT } from './admin-client.js';

/*
 * `keyway <command>`: the operator's commands, over the HTTP API of a running broker
 * (KEYWAY_URL, KEYWAY_TOKEN: the root key or a broker token), or on the database itself.
 * Every command takes --json (the API's body as it came) and answers in one line on
 * failure, with the API's error code. Exit codes: 0 done, 1 the API refused (its code is
 * printed), 2 a usage mistake, 3 the broker could not be reached. The commands are one
 * table (commands/): dispatch, `--help` and the README's check all read it.
 */

/** The text of `keyway --help` for the commands. */
export const ADMIN_USAGE = COMMANDS_USAGE;

/** The first word of every command (`token`, `discover`, …): what `keyway` dispatches here. */
export const ADMIN_COMMANDS: string[] = [
  ...new Set(COMMANDS.map((command) => command.name.split(' ')[0] as string)),
];

/** Runs one command; answers its exit code. */
export async function runAdmin(argv: string[], io: AdminIo): Promise<number> {
  const [resource = ''] = argv;
  const found = commandOf(argv);
  const help = found === null ? (resourceHelp(resource) ?? ADMIN_USAGE) : helpOf(found.command);
  if (argv.includes('--help') || argv.includes('-h')) {
    io.out(help);
    return EXIT.ok;
  }
  try {
    if (found === null) {
      throw new UsageError(`unknown command "keyway ${argv.slice(0, 2).join(' ')}"`);
    }
    const { command, words } = found;
    const { values, positionals } = parseArgs({
      args: argv.slice(words),
      allowPositionals: true,
      options: OPTIONS,
    });
    const taken = new Set<string>(['json', ...(command.options ?? [])]);
    const other = Object.keys(values).find((name) => !taken.has(name));
    if (other !== undefined) {
      throw new UsageError(`--${other} is not an option of "keyway ${command.name}"`);
    }
    const json = values.json === true;
    let api: ReturnType<typeof client> | undefined;
    const context: CommandContext = {
      io,
      values: values as OptionValues,
      json,
      api: (...args: Parameters<ReturnType<typeof client>>) => {
        api ??= client(io);
        return api(...args);
      },
      arg(at, name) {
        const value = positionals[at];
        if (value === undefined || value === '') throw new UsageError(`missing <${name}>`);
        return value;
      },
      show: (body, text) => io.out(json ? JSON.stringify(body) : printable(text())),
    };
    return await command.run(context);
  } catch (error) {
    if (error instanceof Refused) {
      io.err(`keyway: ${clean(error.code)}: ${clean(error.message)}`);
      return EXIT.refused;
    }
    if (
      error instanceof UsageError ||
      (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')
    ) {
      io.err(`keyway: ${clean((error as Error).message)}\n\n${help.trimEnd()}`);
      return EXIT.usage;
    }
    if (error instanceof Unreachable) {
      io.err(`keyway: unreachable: ${clean(error.message)}`);
      return EXIT.unreachable;
    }
    throw error;
  }
}
