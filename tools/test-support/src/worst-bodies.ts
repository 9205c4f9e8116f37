/**
 * The worst request bodies of every route that reads one (the amplification a validation answer can be): each just
 * under the handler's 1 MiB body limit and built to make validation work hard — a list of
 * a quarter million wrong entries, sixty thousand unknown fields, a nesting deeper than a
 * parser's stack. The answer to each must stay small and quick: the HTTP tests hold its size,
 * `pnpm bench` measures its time.
 */

/** One worst request: what it is, and how to send it. */
export interface WorstRequest {
  name: string;
  method: 'POST' | 'PUT' | 'PATCH';
  path: string;
  /** The raw JSON text (already serialized: some are too big to build as objects cheaply). */
  body: string;
}

/** Stays under the handler's default body limit (1 MiB), with room for the rest. */
const BUDGET = 1_000_000;

/** `[1,1,1,…]`: as many wrong-typed entries as fit. */
function numbers(room: number): string {
  return `[${Array(Math.floor(room / 2))
    .fill('1')
    .join(',')}]`;
}

/** `{"k0":0,"k1":0,…}`: as many unknown fields as fit, beside the required ones. */
function unknownFields(required: Record<string, unknown>, room: number): string {
  const fields: string[] = [];
  let size = 0;
  for (let i = 0; size < room; i++) {
    const field = `"k${i}":0`;
    fields.push(field);
    size += field.length + 1;
  }
  const known = JSON.stringify(required).slice(1, -1);
  return `{${known ? `${known},` : ''}${fields.join(',')}}`;
}

/** An array nested as deep as fits: `[[[…]]]`. */
function nested(room: number): string {
  const depth = Math.floor(room / 2);
  return `${'['.repeat(depth)}${']'.repeat(depth)}`;
}

/** The routes that take a body, each with a valid minimal body. */
const ROUTES: { route: string; method: WorstRequest['method']; path: string; body: object }[] = [
  { route: 'mint', method: 'POST', path: '/api/admin/tokens', body: { name: 'n', scopes: ['a'] } },
  { route: 'narrow', method: 'PATCH', path: '/api/admin/tokens/n', body: { scopes: ['a'] } },
  {
    route: 'provider',
    method: 'PUT',
    path: '/api/admin/providers/p',
    body: { template: 'mcp', configuration: { resource_url: 'https://mcp.example.test/mcp' } },
  },
  {
    route: 'discover',
    method: 'POST',
    path: '/api/admin/discover',
    body: { resource_url: 'https://mcp.example.test/mcp' },
  },
  {
    route: 'authorize',
    method: 'POST',
    path: '/api/oauth/authorize/p',
    body: { connection_id: 'a/b' },
  },
  { route: 'verify', method: 'POST', path: '/api/oauth/verify', body: { flow_id: 'f' } },
  { route: 'secret', method: 'PUT', path: '/api/vault/secrets/a/b', body: { value: 'v' } },
];

/** Where each route takes a list, the JSON text before and after it. */
const LISTS: Record<string, [string, string]> = {
  mint: ['{"name":"n","scopes":', '}'],
  narrow: ['{"scopes":', '}'],
  provider: [
    '{"template":"mcp","configuration":{"resource_url":"https://mcp.example.test/mcp","scopes":',
    '}}',
  ],
  authorize: ['{"connection_id":"a/b","scopes":', '}'],
};

/** Every worst request, three or four per route. */
export function worstRequests(): WorstRequest[] {
  const requests: WorstRequest[] = [];
  for (const { route, method, path, body } of ROUTES) {
    requests.push({
      name: `${route}: unknown fields`,
      method,
      path,
      body: unknownFields(body as Record<string, unknown>, BUDGET - 200),
    });
    requests.push({
      name: `${route}: nested arrays`,
      method,
      path,
      body: `{"x":${nested(BUDGET - 10)}}`,
    });
    const list = LISTS[route];
    if (list !== undefined) {
      const [before, after] = list;
      requests.push({
        name: `${route}: a list of wrong entries`,
        method,
        path,
        body: `${before}${numbers(BUDGET - before.length - after.length - 10)}${after}`,
      });
      requests.push({
        name: `${route}: a list of long strings`,
        method,
        path,
        body: `${before}${JSON.stringify(Array(2_000).fill('x'.repeat(490)))}${after}`,
      });
    }
  }
  return requests;
}
