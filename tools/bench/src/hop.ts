import { randomUUID } from 'node:crypto';
import {
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { gatewayForwards } from '@keyway/core/contract';
import { pipedHeader } from '@keyway/core/outbound';

/**
 * What a hop sends upstream in place of the caller's request line and token, or `null` to
 * answer 401 itself.
 */
export type Swap = (
  req: IncomingMessage,
) => { path: string; token: string } | null | Promise<{ path: string; token: string } | null>;

/** The bare hop's swap: the same path, a fixed token, nothing checked. */
const FIXED: Swap = (req) => ({ path: req.url ?? '/', token: 'proxy-token' });

/** The request headers as the gateway sends them upstream: its agent, MCP's own, the token. */
function asGatewaySends(req: IncomingMessage, token: string): Record<string, string> {
  const headers: Record<string, string> = { 'user-agent': 'Keyway-Gateway' };
  for (const [name, value] of Object.entries(req.headers)) {
    if (typeof value === 'string' && (gatewayForwards(name) || name === 'content-length'))
      headers[name] = value;
  }
  headers.authorization = `Bearer ${token}`;
  return headers;
}

/** The answer's headers as the gateway writes them: two of the upstream's, and its own. */
function asGatewayAnswers(answer: IncomingMessage): Record<string, string> {
  // Read from the raw headers, as the gateway reads them: Node's object of them all unmade.
  const raw = { status: 0, headers: {}, rawHeaders: answer.rawHeaders, body: null };
  const headers: Record<string, string> = { 'cache-control': 'no-store' };
  const type = pipedHeader(raw, 'content-type');
  const session = pipedHeader(raw, 'mcp-session-id');
  if (type !== null) headers['content-type'] = type;
  if (session !== null) headers['mcp-session-id'] = session;
  headers['x-request-id'] = randomUUID();
  return headers;
}

/**
 * The floor of any proxy hop in `pnpm bench`: a bare node:http reverse proxy to a server on
 * `port` of this host, which swaps in a fixed token and pipes both ways (no check, no
 * storage, no parsing of the answer). With `swap`, the hop first does that work, and sends
 * and answers the headers the gateway does (the same-work hop of same-work-hop.ts).
 */
export function proxyHop(port: number, swap: Swap = FIXED): Server {
  const asGateway = swap !== FIXED;
  const forward = (
    req: IncomingMessage,
    res: ServerResponse,
    to: { path: string; token: string } | null,
  ) => {
    if (to === null) {
      res.writeHead(401).end();
      req.resume();
      return;
    }
    const headers = asGateway
      ? asGatewaySends(req, to.token)
      : { ...req.headers, authorization: `Bearer ${to.token}` };
    const forwarded = httpRequest(
      { host: '127.0.0.1', port, path: to.path, method: req.method, headers },
      (answer) => {
        res.writeHead(
          answer.statusCode ?? 502,
          asGateway ? asGatewayAnswers(answer) : answer.headers,
        );
        answer.pipe(res);
      },
    );
    forwarded.once('error', () => res.destroy());
    req.pipe(forwarded);
  };
  return createServer((req, res) => {
    const to = swap(req);
    // The bare hop's swap answers at once: no promise, no turn of the event loop.
    if (to instanceof Promise) {
      to.then(
        (value) => forward(req, res, value),
        () => res.writeHead(500).end(),
      );
    } else forward(req, res, to);
  });
}
