import { parseArgs } from 'node:util';
import { generateVaultKey } from '@keyway/core';
import { parseDuration } from '@keyway/core/config';
import {
  type AdminIo,
  client,
  EXIT,
  nameValues,
  providerLine,
  Refused,
  table,
  Unreachable,
  UsageError,
} from './admin-client.js';
import { clean, printable } from './terminal.js';

export { type AdminIo, EXIT } from './admin-client.js';

/*
 * `keyway <resource> <verb>`: the operator's commands, over the HTTP API of a running
 * broker (KEYWAY_URL, KEYWAY_TOKEN: the root key or a broker token). Every command takes
 * --json (the API's body as it came) and answers in one line on failure, with the API's
 * error code. Exit codes: 0 done, 1 the API refused (its code is printed), 2 a usage
 * mistake, 3 the broker could not be reached.
 */

/** The text of `keyway --help` for the admin commands. */
export const ADMIN_USAGE = `Commands over the HTTP API (KEYWAY_URL, KEYWAY_TOKEN; --json on every one):
  keyway token create <name> --scope <s> [--scope <s>…] [--expires-in <seconds|1h|7d>]
  keyway token list | get <name> | revoke <name>
  keyway token narrow <name> [--scope <s>…] [--expires-in <seconds|1h|7d>]
  keyway provider put <id> --resource-url <url> [--scope <s>…] [--label <text>]
                      [--client-id <id> [--client-secret-env <VAR>]] [--pkce assume_s256]
                      [--authorization-param <name=value>…] [--token-param <name=value>…]
                      [--register]   (--register: a new client, as "provider register")
  keyway provider register <id>   registers a new client (the server forgot the old one)
  keyway provider list [--prefix <p>] | get <id> | delete <id>
  keyway discover <resource-url>
  keyway status                 version, readiness, storage (exit 1 when not ready)
  keyway connect <provider> <connection> [--scope <s>…]   (prints the consent URL, waits)
  keyway connection list [--prefix <p>] [--provider <id>] [--status <s>] | get <id> | delete <id>
  keyway secret put <path> --value-env <VAR> | get <path> | list [--prefix <p>] | delete <path>
  keyway keys generate          a root key and a vault key, for KEYWAY_ROOT_KEY / _VAULT_KEYS
  keyway vault rewrap           on the database itself (KEYWAY_DATABASE, KEYWAY_VAULT_KEYS new
                                key first): every entry onto the new key, then drop the old
Exit codes: 0 done, 1 refused by the API (its error code is printed), 2 usage, 3 unreachable.`;

/** Each command's own help, by `<resource> <verb>`. */
const HELP: Record<string, string> = {};
for (const line of ADMIN_USAGE.split('\n').slice(1, -1)) {
  const match = /^\s+keyway (\w+)(?: (\w+))?/.exec(line);
  if (match) HELP[match[1] as string] = `${HELP[match[1] as string] ?? ''}${line.trim()}\n`;
}

/** The resources the admin commands act on. */
export const ADMIN_COMMANDS = [
  'token',
  'provider',
  'discover',
  'status',
  'connect',
  'connection',
  'secret',
  'keys',
  'vault',
];

const encodePath = (path: string) => path.split('/').map(encodeURIComponent).join('/');

/**
 * `--expires-in` as the API takes it, in seconds: digits are seconds already; a duration
 * (`30m`, `1h`, `7d`) is converted, and must be whole seconds.
 */
function seconds(text: string): number {
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

/** Runs one admin command; answers its exit code. */
export async function runAdmin(argv: string[], io: AdminIo): Promise<number> {
  const [resource = '', ...rest] = argv;
  if (rest.includes('--help') || rest.includes('-h')) {
    io.out((HELP[resource] ?? ADMIN_USAGE).trimEnd());
    return EXIT.ok;
  }
  try {
    const { values, positionals } = parseArgs({
      args: rest,
      allowPositionals: true,
      options: {
        json: { type: 'boolean' },
        scope: { type: 'string', multiple: true },
        'expires-in': { type: 'string' },
        'resource-url': { type: 'string' },
        label: { type: 'string' },
        'client-id': { type: 'string' },
        'client-secret-env': { type: 'string' },
        prefix: { type: 'string' },
        provider: { type: 'string' },
        status: { type: 'string' },
        'value-env': { type: 'string' },
        limit: { type: 'string' },
        pkce: { type: 'string' },
        'authorization-param': { type: 'string', multiple: true },
        'token-param': { type: 'string', multiple: true },
        register: { type: 'boolean' },
      },
    });
    const json = values.json === true;
    if (resource === 'vault') {
      if (positionals[0] !== 'rewrap') throw new UsageError('usage: keyway vault rewrap');
      const { rewrapVault } = await import('./vault.js');
      const result = await rewrapVault(io.env).catch((error: unknown) => {
        throw new UsageError(error instanceof Error ? error.message : String(error));
      });
      if (json) io.out(JSON.stringify(result));
      else
        io.out(`re-wrapped ${result.moved} vault entries of ${result.database} onto the first key`);
      return EXIT.ok;
    }
    if (resource === 'keys') {
      if (positionals[0] !== 'generate') throw new UsageError('usage: keyway keys generate');
      const keys = { root_key: generateVaultKey(), vault_key: generateVaultKey() };
      if (json) io.out(JSON.stringify(keys));
      else io.out(`KEYWAY_ROOT_KEY=${keys.root_key}\nKEYWAY_VAULT_KEYS=${keys.vault_key}`);
      return EXIT.ok;
    }
    const api = client(io);
    const show = (body: unknown, text: () => string) =>
      io.out(json ? JSON.stringify(body) : printable(text()));
    const one = (at: number) => {
      const value = positionals[at];
      if (value === undefined || value === '') throw new UsageError(`missing argument ${at + 1}`);
      return value;
    };
    const query = (entries: Record<string, string | undefined>) => {
      const params = new URLSearchParams();
      for (const [key, value] of Object.entries(entries))
        if (value !== undefined) params.set(key, value);
      const text = params.toString();
      return text === '' ? '' : `?${text}`;
    };
    const lifetime =
      values['expires-in'] === undefined ? {} : { expires_in: seconds(values['expires-in']) };
    const verb = positionals[0];
    switch (
      `${resource} ${['discover', 'connect', 'status'].includes(resource) ? '' : (verb ?? '')}`.trim()
    ) {
      case 'status': {
        const body = await api('GET', '/api/admin/status');
        const storage = body.storage as {
          engine: string;
          schema_version: number | null;
          schema_expected: number | null;
        } | null;
        show(body, () =>
          [
            `keyway ${clean(body.version)}: ${body.ready ? 'ready' : 'NOT READY'}`,
            storage === null
              ? 'storage: not answering'
              : `storage: ${clean(storage.engine)}${storage.schema_version === null ? '' : `, schema ${storage.schema_version} (this version needs ${storage.schema_expected})`}`,
            ...(body.reason === null ? [] : [`reason: ${clean(body.reason)}`]),
          ].join('\n'),
        );
        return body.ready ? EXIT.ok : EXIT.refused;
      }
      case 'token create': {
        const body = await api('POST', '/api/admin/tokens', {
          name: one(1),
          scopes: values.scope ?? [],
          ...lifetime,
        });
        show(
          body,
          () =>
            `${body.access_token}\n(name ${body.name}, scopes ${body.scopes.join(' ')}, expires ${body.expires_at}; shown once)`,
        );
        return EXIT.ok;
      }
      case 'token list': {
        const body = await api('GET', `/api/admin/tokens${query({ limit: values.limit })}`);
        show(body, () => table(body.items, ['name', 'scopes', 'expires_at', 'created_by']));
        return EXIT.ok;
      }
      case 'token get': {
        const body = await api('GET', `/api/admin/tokens/${encodeURIComponent(one(1))}`);
        show(body, () => table([body], ['name', 'scopes', 'expires_at', 'created_by']));
        return EXIT.ok;
      }
      case 'token narrow': {
        const body = await api('PATCH', `/api/admin/tokens/${encodeURIComponent(one(1))}`, {
          ...(values.scope === undefined ? {} : { scopes: values.scope }),
          ...lifetime,
        });
        show(body, () => table([body], ['name', 'scopes', 'expires_at', 'created_by']));
        return EXIT.ok;
      }
      case 'token revoke': {
        const name = one(1);
        await api('DELETE', `/api/admin/tokens/${encodeURIComponent(name)}`);
        show({ deleted: name }, () => `revoked ${name} and its descendants`);
        return EXIT.ok;
      }
      case 'provider put': {
        const secretEnv = values['client-secret-env'];
        const secret = secretEnv === undefined ? undefined : io.env[secretEnv];
        if (secretEnv !== undefined && secret === undefined) {
          throw new UsageError(`${secretEnv} is not set`);
        }
        const id = one(1);
        const authorizationParams = nameValues(
          '--authorization-param',
          values['authorization-param'],
        );
        const tokenParams = nameValues('--token-param', values['token-param']);
        let body = await api('PUT', `/api/admin/providers/${encodePath(id)}`, {
          template: 'mcp',
          ...(values.label === undefined ? {} : { label: values.label }),
          configuration: {
            resource_url: values['resource-url'] ?? '',
            ...(values.scope === undefined ? {} : { scopes: values.scope }),
            ...(values.pkce === undefined ? {} : { pkce: values.pkce }),
            ...(authorizationParams === undefined
              ? {}
              : { authorization_params: authorizationParams }),
            ...(tokenParams === undefined ? {} : { token_params: tokenParams }),
          },
          ...(values['client-id'] === undefined
            ? {}
            : {
                credentials: {
                  mode: 'custom',
                  client_id: values['client-id'],
                  ...(secret === undefined ? {} : { client_secret: secret }),
                },
              }),
        });
        if (values.register === true) {
          body = await api('POST', `/api/admin/providers/${encodePath(id)}/register`);
        }
        show(body, () => providerLine(body));
        return EXIT.ok;
      }
      case 'provider register': {
        const body = await api('POST', `/api/admin/providers/${encodePath(one(1))}/register`);
        show(body, () => providerLine(body));
        return EXIT.ok;
      }
      case 'provider list': {
        const body = await api(
          'GET',
          `/api/admin/providers${query({ prefix: values.prefix, limit: values.limit })}`,
        );
        show(body, () => body.items.map(providerLine).join('\n'));
        return EXIT.ok;
      }
      case 'provider get': {
        const body = await api('GET', `/api/admin/providers/${encodePath(one(1))}`);
        show(body, () => providerLine(body));
        return EXIT.ok;
      }
      case 'provider delete': {
        const id = one(1);
        await api('DELETE', `/api/admin/providers/${encodePath(id)}`);
        show({ deleted: id }, () => `deleted provider ${id}`);
        return EXIT.ok;
      }
      case 'discover': {
        const body = await api('POST', '/api/admin/discover', { resource_url: one(0) });
        show(body, () =>
          [
            table(
              body.steps.map((step: Record<string, unknown>) => ({
                ...step,
                ok: step.ok ? 'ok' : 'FAILED',
              })),
              ['step', 'ok', 'status', 'url', 'note'],
            ),
            body.ok
              ? `authorization server ${clean(body.authorization_server.issuer)}; scopes ${clean(body.scopes.join(' ') || '(none)')}`
              : `discovery failed: ${clean(body.error)}`,
          ].join('\n'),
        );
        return body.ok ? EXIT.ok : EXIT.refused;
      }
      case 'connect': {
        const provider = one(0);
        const connection = one(1);
        const started = await api('POST', `/api/oauth/authorize/${encodePath(provider)}`, {
          connection_id: connection,
          ...(values.scope === undefined ? {} : { scopes: values.scope }),
        });
        if (json) io.out(JSON.stringify(started));
        else io.out(`Open this address to give consent:\n${clean(started.authorization_url)}`);
        const deadline = Date.parse(started.expires_at);
        // When the broker started this authorization (by its clock: the consent lives 10
        // minutes): what happened to the connection before is not this attempt's outcome,
        // so a connection already in error waits for the new consent too.
        const since = deadline - 10 * 60 * 1000;
        const frames = '⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏';
        for (let i = 0; ; i++) {
          const view = await api('GET', `/api/oauth/connections/${encodePath(connection)}`);
          const authorized = view.authorized_at !== null && Date.parse(view.authorized_at) >= since;
          const failed = view.error !== null && Date.parse(view.updated_at) >= since;
          if ((view.status === 'active' && authorized) || (failed && !authorized)) {
            if (io.tty && !json) io.err('\r\x1b[K');
            show(view, () =>
              authorized
                ? `connected ${clean(connection)}: scopes ${clean(view.scopes.join(' ') || '(none)')}${view.refreshable ? '' : ' (no refresh token: a new consent is needed when the token expires)'}`
                : `failed: ${clean(view.error?.code)}: ${clean(view.error?.description)}`,
            );
            return authorized ? EXIT.ok : EXIT.refused;
          }
          if (Date.now() > deadline)
            throw new Refused('invalid_request', 'the consent was not given in time');
          if (io.tty && !json) io.err(`\r${frames[i % frames.length]} waiting for consent…`);
          await io.sleep(1000);
        }
      }
      case 'connection list': {
        const body = await api(
          'GET',
          `/api/oauth/connections${query({ prefix: values.prefix, provider_id: values.provider, status: values.status, limit: values.limit })}`,
        );
        show(body, () =>
          table(body.items, [
            'connection_id',
            'provider_id',
            'status',
            'refreshable',
            'token_expires_at',
          ]),
        );
        return EXIT.ok;
      }
      case 'connection get': {
        const body = await api('GET', `/api/oauth/connections/${encodePath(one(1))}`);
        show(body, () =>
          table(
            [{ ...body, error: body.error === null ? null : body.error.code }],
            [
              'connection_id',
              'provider_id',
              'status',
              'refreshable',
              'scopes',
              'token_expires_at',
              'error',
            ],
          ),
        );
        return EXIT.ok;
      }
      case 'connection delete': {
        const id = one(1);
        await api('DELETE', `/api/oauth/connections/${encodePath(id)}`);
        show(
          { deleted: id },
          () => `deleted connection ${id} (its tokens revoked where the server allows)`,
        );
        return EXIT.ok;
      }
      case 'secret put': {
        const from = values['value-env'];
        const value = from === undefined ? undefined : io.env[from];
        if (value === undefined)
          throw new UsageError('give the value in an environment variable: --value-env <VAR>');
        const body = await api('PUT', `/api/vault/secrets/${encodePath(one(1))}`, { value });
        show(body, () => `stored ${clean(body.path)} (version ${clean(body.version)})`);
        return EXIT.ok;
      }
      case 'secret get': {
        const body = await api('GET', `/api/vault/secrets/${encodePath(one(1))}`);
        // Line feeds stay (a PEM key keeps its lines); other control characters are escaped:
        // `--json` gives the value exactly.
        show(body, () => body.value);
        return EXIT.ok;
      }
      case 'secret list': {
        const body = await api(
          'GET',
          `/api/vault/secrets${query({ prefix: values.prefix, limit: values.limit })}`,
        );
        show(body, () => table(body.items, ['path', 'version', 'updated_at']));
        return EXIT.ok;
      }
      case 'secret delete': {
        const path = one(1);
        await api('DELETE', `/api/vault/secrets/${encodePath(path)}`);
        show({ deleted: path }, () => `deleted ${path}`);
        return EXIT.ok;
      }
      default:
        throw new UsageError(`unknown command "keyway ${argv.slice(0, 2).join(' ')}"`);
    }
  } catch (error) {
    if (error instanceof Refused) {
      io.err(`keyway: ${clean(error.code)}: ${clean(error.message)}`);
      return EXIT.refused;
    }
    if (
      error instanceof UsageError ||
      (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')
    ) {
      io.err(
        `keyway: ${clean((error as Error).message)}\n\n${(HELP[resource] ?? ADMIN_USAGE).trimEnd()}`,
      );
      return EXIT.usage;
    }
    if (error instanceof Unreachable) {
      io.err(`keyway: unreachable: ${clean(error.message)}`);
      return EXIT.unreachable;
    }
    throw error;
  }
}
