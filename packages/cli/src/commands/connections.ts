import { EXIT, Refused, table, UsageError } from '../admin-client.js';
import { clean } from '../terminal.js';
import { type Command, deleting, encodePath, query } from './command.js';

/* Connections (docs/api.md §5) and the connect flow from a terminal. */

/** The columns of a connection in a table (`get` adds its scopes and error). */
const COLUMNS = ['connection_id', 'provider_id', 'status', 'refreshable', 'token_expires_at'];

export const CONNECTION_COMMANDS: Command[] = [
  {
    name: 'connect',
    usage: '<provider> <connection> [--scope <s>…] [--subject-token-stdin]',
    summary:
      'starts an authorization, prints the consent URL and waits for the outcome (a provider of the client ' +
      'credentials grant connects at once)',
    options: ['scope', 'subject-token-stdin'],
    async run({ api, arg, values, io, json, show }) {
      const provider = arg(0, 'provider');
      const connection = arg(1, 'connection');
      // An enterprise-managed provider (docs/api.md §14): the user's ID token, never an argument.
      let subjectToken: string | undefined;
      if (values['subject-token-stdin'] === true) {
        if (io.stdin === undefined)
          throw new UsageError('--subject-token-stdin: no standard input here');
        subjectToken = new TextDecoder().decode(await io.stdin()).trim();
        if (subjectToken === '')
          throw new UsageError('--subject-token-stdin: standard input was empty');
      }
      const started = await api('POST', `/api/oauth/authorize/${encodePath(provider)}`, {
        connection_id: connection,
        ...(values.scope === undefined ? {} : { scopes: values.scope }),
        ...(subjectToken === undefined ? {} : { subject_token: subjectToken }),
      });
      const connected = (view: { scopes: string[]; refreshable: boolean }) =>
        `connected ${clean(connection)}: scopes ${clean(view.scopes.join(' ') || '(none)')}` +
        (view.refreshable
          ? ''
          : ' (no refresh token: a new consent is needed when the token expires)');
      if (started.authorization_url === undefined) {
        // The client credentials grant (docs/api.md §14): no consent, the connection is active.
        show(started, () => `${connected(started)} (${started.grant.replace('_', ' ')} grant)`);
        return EXIT.ok;
      }
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
              ? connected(view)
              : `failed: ${clean(view.error?.code)}: ${clean(view.error?.description)}`,
          );
          return authorized ? EXIT.ok : EXIT.refused;
        }
        if (Date.now() > deadline)
          throw new Refused('invalid_request', 'the consent was not given in time');
        if (io.tty && !json) io.err(`\r${frames[i % frames.length]} waiting for consent…`);
        await io.sleep(1000);
      }
    },
  },
  {
    name: 'connection list',
    usage: '[--prefix <p>] [--provider <id>] [--status <s>] [--limit <n>]',
    summary: 'connections, with status, refreshability and expiry',
    options: ['prefix', 'provider', 'status', 'limit'],
    async run({ api, values, show }) {
      const body = await api(
        'GET',
        `/api/oauth/connections${query({
          prefix: values.prefix,
          provider_id: values.provider,
          status: values.status,
          limit: values.limit,
        })}`,
      );
      show(body, () => table(body.items, COLUMNS));
      return EXIT.ok;
    },
  },
  {
    name: 'connection get',
    usage: '<id>',
    summary: 'one connection (never its tokens)',
    async run({ api, arg, show }) {
      const body = await api('GET', `/api/oauth/connections/${encodePath(arg(0, 'id'))}`);
      show(body, () =>
        table(
          [{ ...body, error: body.error === null ? null : body.error.code }],
          [...COLUMNS.slice(0, 4), 'scopes', 'token_expires_at', 'error'],
        ),
      );
      return EXIT.ok;
    },
  },
  deleting({
    name: 'connection delete',
    argument: 'id',
    summary: 'deletes a connection; its tokens are revoked where the server allows',
    path: (id) => `/api/oauth/connections/${encodePath(id)}`,
    said: (id) => `deleted connection ${id} (its tokens revoked where the server allows)`,
  }),
];
