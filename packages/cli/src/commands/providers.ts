import { EXIT, nameValues, providerLine, table, UsageError } from '../admin-client.js';
import { clean } from '../terminal.js';
import { type Command, deleting, encodePath, query } from './command.js';

/* Providers (docs/api.md §4) and discovery (§6). */

export const PROVIDER_COMMANDS: Command[] = [
  {
    name: 'provider put',
    usage: `<id> --resource-url <url> [--scope <s>…] [--label <text>]
      [--client-id <id> [--client-secret-env <VAR>]] [--pkce assume_s256]
      [--authorization-param <name=value>…] [--token-param <name=value>…] [--register]
      [--inject-only]`,
    summary:
      'creates or replaces an MCP provider (--client-id: your own client; --register: a new client, as "provider register"; --inject-only: its tokens never handed out, used through the gateway only)',
    options: [
      'resource-url',
      'scope',
      'label',
      'client-id',
      'client-secret-env',
      'pkce',
      'authorization-param',
      'token-param',
      'register',
      'inject-only',
    ],
    async run({ api, arg, values, io, show }) {
      const secretEnv = values['client-secret-env'];
      const secret = secretEnv === undefined ? undefined : io.env[secretEnv];
      if (secretEnv !== undefined && secret === undefined) {
        throw new UsageError(`${secretEnv} is not set`);
      }
      const id = arg(0, 'id');
      const authorizationParams = nameValues(
        '--authorization-param',
        values['authorization-param'],
      );
      const tokenParams = nameValues('--token-param', values['token-param']);
      let body = await api('PUT', `/api/admin/providers/${encodePath(id)}`, {
        template: 'mcp',
        ...(values['inject-only'] === true ? { hand_out: false } : {}),
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
    },
  },
  {
    name: 'provider register',
    usage: '<id>',
    summary: 'registers a new client (the server forgot the old one)',
    async run({ api, arg, show }) {
      const body = await api('POST', `/api/admin/providers/${encodePath(arg(0, 'id'))}/register`);
      show(body, () => providerLine(body));
      return EXIT.ok;
    },
  },
  {
    name: 'provider list',
    usage: '[--prefix <p>] [--limit <n>]',
    summary: 'the providers this credential covers',
    options: ['prefix', 'limit'],
    async run({ api, values, show }) {
      const body = await api(
        'GET',
        `/api/admin/providers${query({ prefix: values.prefix, limit: values.limit })}`,
      );
      show(body, () => body.items.map(providerLine).join('\n'));
      return EXIT.ok;
    },
  },
  {
    name: 'provider get',
    usage: '<id>',
    summary: 'one provider, with its authorization server and client',
    async run({ api, arg, show }) {
      const body = await api('GET', `/api/admin/providers/${encodePath(arg(0, 'id'))}`);
      show(body, () => providerLine(body));
      return EXIT.ok;
    },
  },
  deleting({
    name: 'provider delete',
    argument: 'id',
    summary: 'deletes a provider',
    path: (id) => `/api/admin/providers/${encodePath(id)}`,
    said: (id) => `deleted provider ${id}`,
  }),
  {
    name: 'discover',
    usage: '<resource-url>',
    summary: "walks an MCP server's discovery and prints each step (exit 1 when it fails)",
    async run({ api, arg, show }) {
      const body = await api('POST', '/api/admin/discover', {
        resource_url: arg(0, 'resource-url'),
      });
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
    },
  },
];
