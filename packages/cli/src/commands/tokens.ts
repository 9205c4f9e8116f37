import { EXIT, table } from '../admin-client.js';
import { clean } from '../terminal.js';
import { type Command, deleting, lifetime, query } from './command.js';

/* Broker tokens (docs/api.md §3) and the broker's status (§16). */

const TOKEN_COLUMNS = ['name', 'scopes', 'expires_at', 'created_by'];
const LIFETIME = '[--expires-in <seconds|1h|7d>]';

export const TOKEN_COMMANDS: Command[] = [
  {
    name: 'token create',
    usage: `<name> --scope <s> [--scope <s>…] ${LIFETIME}`,
    summary: 'mints a broker token and prints it once',
    options: ['scope', 'expires-in'],
    async run({ api, arg, values, show }) {
      const body = await api('POST', '/api/admin/tokens', {
        name: arg(0, 'name'),
        scopes: values.scope ?? [],
        ...lifetime(values),
      });
      show(
        body,
        () =>
          `${body.access_token}\n(name ${body.name}, scopes ${body.scopes.join(' ')}, expires ${body.expires_at}; ` +
          `shown once)`,
      );
      return EXIT.ok;
    },
  },
  {
    name: 'token list',
    usage: '[--limit <n>]',
    summary: 'the tokens this credential may see',
    options: ['limit'],
    async run({ api, values, show }) {
      const body = await api('GET', `/api/admin/tokens${query({ limit: values.limit })}`);
      show(body, () => table(body.items, TOKEN_COLUMNS));
      return EXIT.ok;
    },
  },
  {
    name: 'token get',
    usage: '<name>',
    summary: "one token's name, scopes and expiry (never the token)",
    async run({ api, arg, show }) {
      const body = await api('GET', `/api/admin/tokens/${encodeURIComponent(arg(0, 'name'))}`);
      show(body, () => table([body], TOKEN_COLUMNS));
      return EXIT.ok;
    },
  },
  {
    name: 'token narrow',
    usage: `<name> [--scope <s>…] ${LIFETIME}`,
    summary: "narrows a token's scopes or shortens its life",
    options: ['scope', 'expires-in'],
    async run({ api, arg, values, show }) {
      const body = await api('PATCH', `/api/admin/tokens/${encodeURIComponent(arg(0, 'name'))}`, {
        ...(values.scope === undefined ? {} : { scopes: values.scope }),
        ...lifetime(values),
      });
      show(body, () => table([body], TOKEN_COLUMNS));
      return EXIT.ok;
    },
  },
  deleting({
    name: 'token revoke',
    argument: 'name',
    summary: 'revokes a token and every token minted under it',
    path: (name) => `/api/admin/tokens/${encodeURIComponent(name)}`,
    said: (name) => `revoked ${name} and its descendants`,
  }),
  {
    name: 'status',
    usage: '',
    summary: 'version, readiness, storage (exit 1 when not ready)',
    async run({ api, show }) {
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
            : `storage: ${clean(storage.engine)}${schemaOf(storage)}`,
          ...(body.reason === null ? [] : [`reason: ${clean(body.reason)}`]),
        ].join('\n'),
      );
      return body.ready ? EXIT.ok : EXIT.refused;
    },
  },
];

/** The schema a status answer reports, and the one this version needs. */
function schemaOf(storage: {
  schema_version: number | null;
  schema_expected: number | null;
}): string {
  if (storage.schema_version === null) return '';
  return `, schema ${storage.schema_version} (this version needs ${storage.schema_expected})`;
}
