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
 * answer 401 itself. A hop with {@link HopGuards} also needs the connection and the endpoint
 * its token was authorized for.
 */
export type Swap = (req: IncomingMessage) => Swapped | null | Promise<Swapped | null>;

/** What a {@link Swap} found. */
export interface Swapped {
  path: string;
  token: string;
  /** The connection and the caller: their open upstream requests are counted (guards). */
  connection?: string;
  caller?: string;
  /** The endpoint the token is for: checked against the address policy (guards). */
  endpoint?: string;
}

/**
 * What docs/api.md §13 and the SSRF rule ask of every forwarded call beyond the check and the
 * read, done bare: the caller's slot among a connection's open upstream requests, taken
 * before the body is read; the body read whole under its limit (the one retry after a
 * refresh sends it again); the endpoint parsed and held to the address policy (https, or
 * plain http to an allowed host, no user info); a deadline for the answer's head; whether
 * the answer is a challenge (401, `WWW-Authenticate`); and an idle limit between the
 * answer's chunks.
 */
export interface HopGuards {
  maxBodyBytes: number;
  /** Request bytes held by all calls of the process at once. */
  maxBufferedBytes: number;
  perConnection: number;
  perCaller: number;
  allowedHosts: ReadonlySet<string>;
  headMs: number;
  idleMs: number;
}

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
export function proxyHop(port: number, swap: Swap = FIXED, guards?: HopGuards): Server {
  const asGateway = swap !== FIXED;
  const forward = (req: IncomingMessage, res: ServerResponse, to: Swapped | null) => {
    if (to === null) {
      res.writeHead(401).end();
      req.resume();
      return;
    }
    if (guards !== undefined) {
      guarded(req, res, to, guards);
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

/** Open upstream requests per connection and per caller, and the request bytes held, of a hop with guards. */
const open = {
  connections: new Map<string, number>(),
  callers: new Map<string, number>(),
  held: 0,
};

/** Takes a slot of `key` in `counts` under `limit`: whether it was free. */
function take(counts: Map<string, number>, key: string, limit: number): boolean {
  const taken = counts.get(key) ?? 0;
  if (taken >= limit) return false;
  counts.set(key, taken + 1);
  return true;
}

/** {@link proxyHop}'s forwarding with its {@link HopGuards}: the gateway's whole work, bare. */
function guarded(req: IncomingMessage, res: ServerResponse, to: Swapped, guards: HopGuards): void {
  const { connection, caller, endpoint } = to;
  if (connection === undefined || caller === undefined || endpoint === undefined) {
    throw new Error('a guarded hop needs the connection, the caller and the endpoint');
  }
  const refuse = (status: number) => {
    res.writeHead(status, { connection: 'close' }).end();
    req.resume();
  };
  if (!take(open.connections, connection, guards.perConnection)) {
    refuse(429);
    return;
  }
  if (!take(open.callers, caller, guards.perCaller)) {
    open.connections.set(connection, (open.connections.get(connection) as number) - 1);
    refuse(429);
    return;
  }
  res.once('close', () => {
    open.connections.set(connection, (open.connections.get(connection) as number) - 1);
    open.callers.set(caller, (open.callers.get(caller) as number) - 1);
  });
  const url = new URL(endpoint);
  const allowed = guards.allowedHosts.has(url.hostname);
  const scheme = url.protocol === 'https:' || (url.protocol === 'http:' && allowed);
  if (url.username !== '' || url.password !== '' || !scheme) {
    refuse(502);
    return;
  }
  if (Number(req.headers['content-length'] ?? 0) > guards.maxBodyBytes) {
    refuse(413);
    return;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  const release = () => {
    open.held -= size;
    size = 0;
  };
  req.on('data', (chunk: Buffer) => {
    size += chunk.byteLength;
    open.held += chunk.byteLength;
    if (size > guards.maxBodyBytes || open.held > guards.maxBufferedBytes) {
      release();
      req.destroy();
      res.writeHead(size > guards.maxBodyBytes ? 413 : 429, { connection: 'close' }).end();
    } else chunks.push(chunk);
  });
  req.once('end', () => {
    const body = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
    const headers = asGatewaySends(req, to.token);
    headers['content-length'] = String(body.byteLength);
    const forwarded = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        path: `${url.pathname}${url.search}`,
        method: req.method,
        headers,
      },
      (answer) => {
        clearTimeout(head);
        release();
        const raw = { status: 0, headers: {}, rawHeaders: answer.rawHeaders, body: null };
        if (answer.statusCode === 401 || pipedHeader(raw, 'www-authenticate') !== null) {
          // The gateway refreshes and sends the body again here; the bench's calls are
          // never refused.
          answer.resume();
          res.writeHead(502).end();
          return;
        }
        res.writeHead(answer.statusCode ?? 502, asGatewayAnswers(answer));
        const idle = setTimeout(() => answer.destroy(), guards.idleMs);
        answer.on('data', () => idle.refresh());
        answer.once('close', () => clearTimeout(idle));
        answer.pipe(res);
      },
    );
    const head = setTimeout(() => forwarded.destroy(), guards.headMs);
    forwarded.once('error', () => {
      clearTimeout(head);
      release();
      res.destroy();
    });
    forwarded.end(body);
  });
}
