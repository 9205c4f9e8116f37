import { createServer, request as httpRequest, type Server } from 'node:http';

/**
 * The floor of any proxy hop in `pnpm bench`: a bare node:http reverse proxy to a server on
 * `port` of this host, which swaps in a fixed token and pipes both ways (no check, no
 * storage, no parsing of the answer).
 */
export function proxyHop(port: number): Server {
  return createServer((req, res) => {
    const headers = { ...req.headers, authorization: 'Bearer proxy-token' };
    const forwarded = httpRequest(
      { host: '127.0.0.1', port, path: req.url, method: req.method, headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forwarded.once('error', () => res.destroy());
    req.pipe(forwarded);
  });
}
