import { clean } from './terminal.js';

/*
 * What the admin commands share: where they write and read, their errors and exit codes,
 * the API client, and the text they print.
 */

/** Exit codes of the admin commands. */
export const EXIT = { ok: 0, refused: 1, usage: 2, unreachable: 3 } as const;

/** Where a command writes, and what it reads: injected by tests. */
export interface AdminIo {
  env: Record<string, string | undefined>;
  out(line: string): void;
  err(line: string): void;
  fetch: typeof globalThis.fetch;
  /** Waits between polls (`keyway connect`). */
  sleep(ms: number): Promise<void>;
  /** Whether stdout is a terminal (a spinner is drawn only there). */
  tty: boolean;
  /** Reads standard input to its end (`--value-stdin`); absent where there is none. */
  stdin?: () => Promise<Uint8Array>;
}

/** A mistake in the command line: exit 2. */
export class UsageError extends Error {}
/** The API refused, with its error code: exit 1. */
export class Refused extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** The broker could not be reached: exit 3. */
export class Unreachable extends Error {}

/** Calls the API; answers the JSON body of a success, throws `Refused` with the API's code. */
export function client(io: AdminIo) {
  const base = io.env.KEYWAY_URL?.replace(/\/+$/, '');
  const token = io.env.KEYWAY_TOKEN;
  if (base === undefined || token === undefined) {
    throw new UsageError(
      'set KEYWAY_URL (the broker, e.g. http://localhost:8787) and KEYWAY_TOKEN',
    );
  }
  // biome-ignore lint/suspicious/noExplicitAny: answers are read field by field, as the API documents them
  return async (method: string, path: string, body?: unknown): Promise<any> => {
    let response: Response;
    try {
      response = await io.fetch(`${base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    } catch (cause) {
      throw new Unreachable(`${base}: ${cause instanceof Error ? cause.message : String(cause)}`);
    }
    if (response.status === 204) return null;
    const answer = (await response.json().catch(() => null)) as Record<string, unknown> | null;
    if (!response.ok) {
      throw new Refused(
        typeof answer?.error === 'string' ? answer.error : `http_${response.status}`,
        typeof answer?.error_description === 'string'
          ? answer.error_description
          : `HTTP ${response.status}`,
      );
    }
    return answer;
  };
}

/** `name=value` options as an object; `undefined` when none were given. */
export function nameValues(
  option: string,
  given: string[] | undefined,
): Record<string, string> | undefined {
  if (given === undefined) return undefined;
  const entries = given.map((pair) => {
    const at = pair.indexOf('=');
    if (at <= 0) throw new UsageError(`${option} takes name=value, not ${JSON.stringify(pair)}`);
    return [pair.slice(0, at), pair.slice(at + 1)] as const;
  });
  return Object.fromEntries(entries);
}

/** Rows as an aligned text table of the given columns. */
export function table(rows: Record<string, unknown>[], columns: string[]): string {
  const cell = (value: unknown) =>
    Array.isArray(value)
      ? value.length === 0
        ? '-'
        : clean(value.join(' '))
      : value === null || value === undefined
        ? '-'
        : clean(value);
  const cells = rows.map((row) => columns.map((column) => cell(row[column])));
  const widths = columns.map((column, i) =>
    Math.max(column.length, ...cells.map((row) => (row[i] as string).length)),
  );
  const line = (values: string[]) =>
    values
      .map((value, i) => value.padEnd(widths[i] as number))
      .join('  ')
      .trimEnd();
  return [line(columns.map((column) => column.toUpperCase())), ...cells.map(line)].join('\n');
}

/** One line per provider: id, resource (or profile), server, client. */
export function providerLine(view: {
  id: string;
  template?: string;
  profile?: string | null;
  configuration: { resource_url?: string };
  authorization_server: { issuer: string };
  credentials: { client_id: string; registration: string; mode?: string };
  hand_out?: boolean;
  dpop?: boolean;
}): string {
  const what =
    view.template === 'oauth2'
      ? `oauth2 ${view.profile ? `profile ${clean(view.profile)}` : '(named endpoints)'}`
      : clean(view.configuration.resource_url ?? '');
  const traits = [
    clean(view.credentials.registration),
    ...(view.credentials.mode === 'client_credentials' ? ['client credentials grant'] : []),
    ...(view.dpop === true ? ['DPoP'] : []),
    ...(view.hand_out === false ? ['inject-only'] : []),
  ];
  return (
    `${clean(view.id)}: ${what} via ${clean(view.authorization_server.issuer)} (client ` +
    `${clean(view.credentials.client_id)}, ${traits.join(', ')})`
  );
}
