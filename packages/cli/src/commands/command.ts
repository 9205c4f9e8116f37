import { parseDuration } from '@keyway/core/config';
import { type AdminIo, type client, EXIT, UsageError } from '../admin-client.js';

/*
 * One declaration per command: its name, how it is written, what it does, the options it
 * takes and what it runs. `keyway --help`, each command's `--help`, the dispatcher and the
 * README's check read the same list (commands/index.ts), so a documented command cannot go
 * missing again.
 */

/** Every option a command may take, as `node:util` parses it. */
export const OPTIONS = {
  json: { type: 'boolean' },
  scope: { type: 'string', multiple: true },
  'expires-in': { type: 'string' },
  'resource-url': { type: 'string' },
  label: { type: 'string' },
  'client-id': { type: 'string' },
  'auth-method': { type: 'string' },
  'client-name': { type: 'string' },
  'client-secret-env': { type: 'string' },
  prefix: { type: 'string' },
  provider: { type: 'string' },
  status: { type: 'string' },
  'value-env': { type: 'string' },
  'value-stdin': { type: 'boolean' },
  'value-file': { type: 'string' },
  limit: { type: 'string' },
  pkce: { type: 'string' },
  'authorization-param': { type: 'string', multiple: true },
  'token-param': { type: 'string', multiple: true },
  register: { type: 'boolean' },
  'inject-only': { type: 'boolean' },
  dpop: { type: 'boolean' },
  profile: { type: 'string' },
  param: { type: 'string', multiple: true },
  'client-secret-stdin': { type: 'boolean' },
  mode: { type: 'string' },
  'private-key-stdin': { type: 'boolean' },
  'signing-algorithm': { type: 'string' },
  'assertion-source': { type: 'string' },
  'assertion-file': { type: 'string' },
  'idp-issuer': { type: 'string' },
  'idp-token-endpoint': { type: 'string' },
  'idp-client-id': { type: 'string' },
  'idp-client-secret-env': { type: 'string' },
  'subject-token-stdin': { type: 'boolean' },
} as const;

export type OptionName = keyof typeof OPTIONS;

/** The parsed options: strings, lists and switches, by name. */
export type OptionValues = {
  [K in OptionName]?: (typeof OPTIONS)[K] extends { type: 'boolean' }
    ? boolean
    : (typeof OPTIONS)[K] extends { multiple: true }
      ? string[]
      : string;
};

/** What a command's `run` gets. */
export interface CommandContext {
  io: AdminIo;
  values: OptionValues;
  json: boolean;
  /** The API of the broker at KEYWAY_URL, with KEYWAY_TOKEN (made on first use). */
  api: ReturnType<typeof client>;
  /** The positional argument `at` (after the command's name), named in the usage error. */
  arg(at: number, name: string): string;
  /** Prints a body: as JSON with `--json`, else as the text `text()` makes. */
  show(body: unknown, text: () => string): void;
}

/** One command of `keyway`. */
export interface Command {
  /** The words that call it: `token create`, `discover`. */
  name: string;
  /** Its arguments and options, as `--help` prints them after `keyway <name>`. */
  usage: string;
  /** What it does, in one line. */
  summary: string;
  /** The options it takes besides `--json` (any other is a usage error). */
  options?: readonly OptionName[];
  /** Works on the database itself (KEYWAY_DATABASE), not over the API. */
  local?: true;
  run(context: CommandContext): Promise<number>;
}

/** A resource path in a URL: each segment encoded, the slashes kept. */
export const encodePath = (path: string) => path.split('/').map(encodeURIComponent).join('/');

/** A query string of the entries that are set (`?a=1&b=2`), or `''`. */
export function query(entries: Record<string, string | undefined>): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(entries)) {
    if (value !== undefined) params.set(key, value);
  }
  const text = params.toString();
  return text === '' ? '' : `?${text}`;
}

/**
 * `--expires-in` as the API takes it, in seconds: digits are seconds already; a duration
 * (`30m`, `1h`, `7d`) is converted, and must be whole seconds.
 */
export function seconds(text: string): number {
  if (/^[0-9]{1,10}$/.test(text)) return Number(text);
  let ms: number;
  try {
    ms = parseDuration(text);
  } catch {
    throw new UsageError(
      `--expires-in takes seconds or a duration like 30m, 1h or 7d, not ${JSON.stringify(text.slice(0, 40))}`,
    );
  }
  if (ms % 1000 !== 0) throw new UsageError(`--expires-in must be whole seconds, not ${text}`);
  return ms / 1000;
}

/** `{ expires_in }` of `--expires-in`, or nothing. */
export const lifetime = (values: OptionValues) =>
  values['expires-in'] === undefined ? {} : { expires_in: seconds(values['expires-in']) };

/**
 * A command that deletes the resource its one argument names, and says what it did: the
 * same shape for tokens, providers, connections and secrets.
 */
export function deleting(spec: {
  name: string;
  /** The argument's name, in the usage (`<id>`) and its error. */
  argument: string;
  summary: string;
  /** The API path of the resource. */
  path: (value: string) => string;
  /** The line printed without `--json`. */
  said: (value: string) => string;
}): Command {
  return {
    name: spec.name,
    usage: `<${spec.argument}>`,
    summary: spec.summary,
    async run({ api, arg, show }) {
      const value = arg(0, spec.argument);
      await api('DELETE', spec.path(value));
      show({ deleted: value }, () => spec.said(value));
      return EXIT.ok;
    },
  };
}
