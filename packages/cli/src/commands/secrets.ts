import { readFileSync } from 'node:fs';
import { type AdminIo, EXIT, table, UsageError } from '../admin-client.js';
import { clean } from '../terminal.js';
import { type Command, deleting, encodePath, type OptionValues, query } from './command.js';

/* Secrets in the namespace (docs/api.md §7). A value never goes on the command line. */

/**
 * The value of `secret put`, from exactly one source: an environment variable (as it is),
 * standard input (one trailing line break dropped, as `echo` and here-strings add one) or
 * a file (exactly its bytes, which must be UTF-8).
 */
async function secretValue(values: OptionValues, io: AdminIo): Promise<string> {
  const sources = [
    values['value-env'] !== undefined,
    values['value-stdin'] === true,
    values['value-file'] !== undefined,
  ].filter(Boolean).length;
  if (sources !== 1) {
    throw new UsageError(
      'give the value in exactly one of --value-env <VAR>, --value-stdin or --value-file <file>',
    );
  }
  const name = values['value-env'];
  if (name !== undefined) {
    const value = io.env[name];
    if (value === undefined) throw new UsageError(`${name} is not set`);
    return value;
  }
  const file = values['value-file'];
  let bytes: Uint8Array;
  if (file !== undefined) {
    try {
      bytes = readFileSync(file);
    } catch (error) {
      throw new UsageError(
        `--value-file ${file}: ${(error as NodeJS.ErrnoException).code ?? 'cannot be read'}`,
      );
    }
  } else {
    if (io.stdin === undefined) throw new UsageError('--value-stdin: no standard input here');
    bytes = await io.stdin();
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new UsageError(
      `${file === undefined ? '--value-stdin' : `--value-file ${file}`}: not UTF-8 text`,
    );
  }
  return file === undefined ? text.replace(/\r?\n$/, '') : text;
}

export const SECRET_COMMANDS: Command[] = [
  {
    name: 'secret put',
    usage: '<path> (--value-env <VAR> | --value-stdin | --value-file <file>)',
    summary: 'stores a secret from a variable, standard input or a file',
    options: ['value-env', 'value-stdin', 'value-file'],
    async run({ api, arg, values, io, show }) {
      const path = arg(0, 'path');
      const value = await secretValue(values, io);
      const body = await api('PUT', `/api/vault/secrets/${encodePath(path)}`, { value });
      show(body, () => `stored ${clean(body.path)} (version ${clean(body.version)})`);
      return EXIT.ok;
    },
  },
  {
    name: 'secret get',
    usage: '<path>',
    summary: "prints a secret's value (--json: exactly, with its version)",
    async run({ api, arg, show }) {
      const body = await api('GET', `/api/vault/secrets/${encodePath(arg(0, 'path'))}`);
      // Line feeds stay (a PEM key keeps its lines); other control characters are escaped:
      // `--json` gives the value exactly.
      show(body, () => body.value);
      return EXIT.ok;
    },
  },
  {
    name: 'secret list',
    usage: '[--prefix <p>] [--limit <n>]',
    summary: 'secret paths and versions (never values)',
    options: ['prefix', 'limit'],
    async run({ api, values, show }) {
      const body = await api(
        'GET',
        `/api/vault/secrets${query({ prefix: values.prefix, limit: values.limit })}`,
      );
      show(body, () => table(body.items, ['path', 'version', 'updated_at']));
      return EXIT.ok;
    },
  },
  deleting({
    name: 'secret delete',
    argument: 'path',
    summary: 'deletes a secret',
    path: (path) => `/api/vault/secrets/${encodePath(path)}`,
    said: (path) => `deleted ${path}`,
  }),
];
