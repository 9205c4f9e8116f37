// The bare proxy hop of `pnpm bench` (hop.ts) in a process of its own, in front of the MCP
// server whose port is its argument: the floor of a hop that costs what the gateway's
// topology costs (client → another process → the server's process).
import { proxyHop } from './hop.js';

const port = Number(process.argv[2]);
if (!Number.isInteger(port) || port <= 0) {
  console.error('usage: node proxy-hop.js <port of the MCP server>');
  process.exit(2);
}
const hop = proxyHop(port);
hop.maxConnections = 10_000;
hop.listen(0, '127.0.0.1', () => {
  console.log(`hop listening on http://127.0.0.1:${(hop.address() as { port: number }).port}`);
});
