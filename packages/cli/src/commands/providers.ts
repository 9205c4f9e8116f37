import { mcpCatalog } from '@keyway/core/catalog';
import {
  type AdminIo,
  EXIT,
  nameValues,
  providerLine,
  table,
  UsageError,
} from '../admin-client.js';
import { clean } from '../terminal.js';
import { type Command, deleting, encodePath, type OptionValues, query } from './command.js';

/* Providers (docs/api.md §4), the catalog (§15) and discovery (§6). */

/** Standard input as text, for the option that asked for it. */
async function stdinText(option: string, io: AdminIo): Promise<string> {
  if (io.stdin === undefined) throw new UsageError(`${option}: no standard input here`);
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(await io.stdin());
  } catch {
    throw new UsageError(`${option}: not UTF-8 text`);
  }
  text = text.replace(/\r?\n$/, '');
  if (text === '') throw new UsageError(`${option}: standard input was empty`);
  return text;
}

/** The client secret from --client-secret-env or --client-secret-stdin (never an argument). */
async function clientSecret(values: OptionValues, io: AdminIo): Promise<string | undefined> {
  const variable = values['client-secret-env'];
  const given = [
    variable !== undefined && '--client-secret-env',
    values['client-secret-stdin'] === true && '--client-secret-stdin',
    values['private-key-stdin'] === true && '--private-key-stdin',
  ].filter((option) => option !== false);
  if (given.length > 1) throw new UsageError(`give one of ${given.join(', ')}, not several`);
  if (variable !== undefined) {
    const secret = io.env[variable];
    if (secret === undefined) throw new UsageError(`${variable} is not set`);
    return secret;
  }
  if (values['client-secret-stdin'] !== true) return undefined;
  return stdinText('--client-secret-stdin', io);
}

const MODES = ['custom', 'client_credentials', 'jwt_bearer', 'enterprise'];

/** Mode `enterprise`: the identity provider from --idp-* (its secret from a variable). */
function identityProviderOf(values: OptionValues, io: AdminIo, mode: string) {
  const given = [
    'idp-issuer',
    'idp-token-endpoint',
    'idp-client-id',
    'idp-client-secret-env',
  ] as const;
  const any = given.some((name) => values[name] !== undefined);
  if (any !== (mode === 'enterprise'))
    throw new UsageError(
      '--mode enterprise takes --idp-issuer, --idp-token-endpoint and --idp-client-id, and only it',
    );
  if (mode !== 'enterprise') return undefined;
  const missing = given.slice(0, 3).find((name) => values[name] === undefined);
  if (missing !== undefined) throw new UsageError(`--mode enterprise needs --${missing}`);
  const variable = values['idp-client-secret-env'];
  const secret = variable === undefined ? undefined : io.env[variable];
  if (variable !== undefined && secret === undefined)
    throw new UsageError(`${variable} is not set`);
  return {
    issuer: values['idp-issuer'] as string,
    token_endpoint: values['idp-token-endpoint'] as string,
    client_id: values['idp-client-id'] as string,
    ...(secret === undefined ? {} : { client_secret: secret }),
  };
}

/** The provider's `credentials`, from --client-id, --mode and their options (or none). */
async function credentialsOf(
  values: OptionValues,
  io: AdminIo,
): Promise<Record<string, unknown> | undefined> {
  const secret = await clientSecret(values, io);
  const mode = values.mode ?? 'custom';
  if (!MODES.includes(mode))
    throw new UsageError(`--mode is one of ${MODES.join(', ')} (register: leave out --client-id)`);
  const keyed = values['private-key-stdin'] === true;
  const asserted = values['assertion-source'] !== undefined;
  const identityProvider = identityProviderOf(values, io, mode);
  if (values['client-id'] === undefined) {
    if (values.mode !== undefined || keyed || asserted || values['auth-method'] !== undefined)
      throw new UsageError(
        '--mode, --private-key-stdin, --assertion-source and --auth-method go with --client-id',
      );
    // Registration: the name a server that registers only the clients it lists knows.
    return values['client-name'] === undefined
      ? undefined
      : { client_metadata: { client_name: values['client-name'] } };
  }
  if (values['client-name'] !== undefined)
    throw new UsageError('--client-name is what registration sends: leave out --client-id');
  if (keyed && mode !== 'client_credentials')
    throw new UsageError('--private-key-stdin is for --mode client_credentials');
  if (values['signing-algorithm'] !== undefined && !keyed)
    throw new UsageError('--signing-algorithm goes with --private-key-stdin');
  if ((asserted || values['assertion-file'] !== undefined) !== (mode === 'jwt_bearer'))
    throw new UsageError(
      '--mode jwt_bearer takes --assertion-source [--assertion-file], and only it',
    );
  return {
    mode,
    client_id: values['client-id'],
    ...(secret === undefined ? {} : { client_secret: secret }),
    ...(keyed ? { private_key: await stdinText('--private-key-stdin', io) } : {}),
    ...(values['signing-algorithm'] === undefined
      ? {}
      : { signing_algorithm: values['signing-algorithm'] }),
    ...(asserted ? { assertion_source: values['assertion-source'] as string } : {}),
    ...(values['assertion-file'] === undefined ? {} : { assertion_file: values['assertion-file'] }),
    ...(identityProvider === undefined ? {} : { identity_provider: identityProvider }),
    ...(values['auth-method'] === undefined
      ? {}
      : { token_endpoint_auth_method: values['auth-method'] }),
  };
}

export const PROVIDER_COMMANDS: Command[] = [
  {
    name: 'provider put',
    usage: `<id> (--resource-url <url> | --profile <profile> [--param <name=value>…])
      [--scope <s>…] [--label <text>] [--client-name <name>]
      [--client-id <id> [--mode custom|client_credentials|jwt_bearer|enterprise]
        [--auth-method client_secret_basic|client_secret_post]
        [--client-secret-env <VAR> | --client-secret-stdin
          | --private-key-stdin [--signing-algorithm <alg>]
          | --assertion-source <name> [--assertion-file <file>]]
        [--idp-issuer <url> --idp-token-endpoint <url> --idp-client-id <id>
          [--idp-client-secret-env <VAR>]]]
      [--pkce assume_s256] [--authorization-param <name=value>…] [--token-param <name=value>…]
      [--register] [--inject-only] [--dpop]`,
    summary:
      'creates or replaces a provider: an MCP server (--resource-url, or an mcp --profile), or a classic API of ' +
      'the catalog (--profile, with your --client-id; "profile list" shows them). --client-name: the client_name ' +
      'registration sends (a server that registers only the clients it lists); --auth-method: how your client ' +
      'sends its secret, whatever the server lists. --mode client_credentials: the client gets its own ' +
      'tokens, with its secret or a private key (PEM on standard input), no user; --mode jwt_bearer: with a ' +
      'workload JWT from one of the broker’s assertion sources; --mode enterprise: a user’s ID token exchanged at ' +
      'the --idp-* identity provider (keyway connect --subject-token-stdin); --register: a new client, as ' +
      '"provider register"; --inject-only: its tokens never handed out; --dpop: its tokens DPoP-bound even where ' +
      'the server does not say it takes DPoP (inject-only too)',
    options: [
      'resource-url',
      'profile',
      'param',
      'scope',
      'label',
      'client-id',
      'auth-method',
      'client-name',
      'client-secret-env',
      'client-secret-stdin',
      'mode',
      'private-key-stdin',
      'signing-algorithm',
      'assertion-source',
      'assertion-file',
      'idp-issuer',
      'idp-token-endpoint',
      'idp-client-id',
      'idp-client-secret-env',
      'pkce',
      'authorization-param',
      'token-param',
      'register',
      'inject-only',
      'dpop',
    ],
    async run({ api, arg, values, io, show }) {
      const id = arg(0, 'id');
      const client = await credentialsOf(values, io);
      const profile = values.profile;
      // An mcp profile is an MCP server the catalog knows: its endpoint, what works there.
      const mcpProfile = profile !== undefined && mcpCatalog().has(profile);
      if (mcpProfile && (values['resource-url'] !== undefined || values.param !== undefined))
        throw new UsageError(
          `--profile ${profile} names its MCP server: leave out --resource-url and --param`,
        );
      if (
        profile !== undefined &&
        !mcpProfile &&
        values.mode !== undefined &&
        values.mode !== 'custom'
      )
        throw new UsageError(`--mode ${values.mode} is for an MCP server (--resource-url)`);
      if (profile !== undefined && values['resource-url'] !== undefined)
        throw new UsageError(
          'give --resource-url (an MCP server) or --profile (a classic API), not both',
        );
      if (profile === undefined && values.param !== undefined)
        throw new UsageError('--param fills the placeholders of a --profile');
      const authorizationParams = nameValues(
        '--authorization-param',
        values['authorization-param'],
      );
      const tokenParams = nameValues('--token-param', values['token-param']);
      const params = nameValues('--param', values.param);
      const extra = {
        ...(values.scope === undefined ? {} : { scopes: values.scope }),
        ...(authorizationParams === undefined ? {} : { authorization_params: authorizationParams }),
        ...(tokenParams === undefined ? {} : { token_params: tokenParams }),
      };
      const common = {
        ...(values.dpop === true
          ? { dpop: true }
          : values['inject-only'] === true
            ? { hand_out: false }
            : {}),
        ...(values.label === undefined ? {} : { label: values.label }),
      };
      let body = await api(
        'PUT',
        `/api/admin/providers/${encodePath(id)}`,
        profile === undefined || mcpProfile
          ? {
              template: 'mcp',
              ...(mcpProfile ? { profile } : {}),
              ...common,
              configuration: {
                ...(mcpProfile ? {} : { resource_url: values['resource-url'] ?? '' }),
                ...(values.pkce === undefined ? {} : { pkce: values.pkce }),
                ...extra,
              },
              ...(client === undefined ? {} : { credentials: client }),
            }
          : {
              template: 'oauth2',
              profile,
              ...common,
              configuration: { ...(params === undefined ? {} : { params }), ...extra },
              credentials: client ?? {},
            },
      );
      if (values.register === true) {
        body = await api('POST', `/api/admin/providers/${encodePath(id)}/register`);
      }
      show(body, () => providerLine(body));
      return EXIT.ok;
    },
  },
  {
    name: 'profile list',
    usage: '',
    summary:
      'the profiles a provider can be made from (--profile): classic OAuth 2 APIs (oauth2) and MCP servers (mcp)',
    async run({ api, show }) {
      const body = await api('GET', '/api/admin/profiles');
      show(body, () =>
        table(
          body.items.map((item: Record<string, unknown>) => ({
            ...item,
            params: (item.params as string[]).join(', '),
            scopes_example: (item.scopes_example as string[]).join(' '),
          })),
          ['id', 'template', 'label', 'credentials', 'params', 'scopes_example', 'refresh'],
        ),
      );
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
    name: 'doctor',
    usage: '<resource-url>',
    summary:
      'probes an MCP server through the broker and says what will work: the credentials mode, the callback URL ' +
      'to register, the resource sent, the known quirks of its catalog profile (registers a test client, deleted ' +
      'again where the server allows; exit 1 when nothing will work)',
    async run({ api, arg, show }) {
      const url = arg(0, 'resource-url');
      const body = await api('POST', '/api/admin/discover', {
        resource_url: url,
        try_registration: true,
      });
      const report = body.report;
      show(body, () =>
        [
          `${clean(url)}: ${report.ok ? `use credentials.mode "${report.recommended}"` : 'nothing will work'}`,
          ...report.findings.map((line: string) => `  ${clean(line)}`),
          ...(report.recommended === 'custom' && report.callback_url !== null
            ? [`  Callback URL to register: ${clean(report.callback_url)}`]
            : []),
        ].join('\n'),
      );
      return report.ok ? EXIT.ok : EXIT.refused;
    },
  },
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
            ? `authorization server ${clean(body.authorization_server.issuer)}; scopes ` +
              `${clean(body.scopes.join(' ') || '(none)')}`
            : `discovery failed: ${clean(body.error)}`,
        ].join('\n'),
      );
      return body.ok ? EXIT.ok : EXIT.refused;
    },
  },
];
