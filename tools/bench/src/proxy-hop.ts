// The hops of `pnpm bench` (hop.ts) in a process of their own, in front of the MCP server
// whose port is the first argument: the floor of a hop that costs what the gateway's
// topology costs (client → another process → the server's process). With
// `--same-work <keyway.sqlite>` (and HOP_ROOT_KEY, HOP_VAULT_KEY set), the hop does the
// gateway's work first (same-work-hop.ts), under the limits and the address policy the gateway
// keeps (hop.ts `HopGuards`, with `keyway serve`'s defaults); HOP_SKIP (`check`, `read`,
// `guards`, comma-separated) leaves parts of it out, to weigh them.
import { type HopGuards, proxyHop } from './hop.js';
import { sameWorkSwap } from './same-work-hop.js';

const port = Number(process.argv[2]);
const at = process.argv.indexOf('--same-work');
const file = at === -1 ? undefined : process.argv[at + 1];
const { HOP_ROOT_KEY: rootKey, HOP_VAULT_KEY: vaultKey, HOP_SKIP: skips = '' } = process.env;
const skip = skips.split(',').filter((part) => part !== '');
if (skip.some((part) => part !== 'check' && part !== 'read' && part !== 'guards')) {
  console.error(`HOP_SKIP names "check", "read" and "guards" only, not ${JSON.stringify(skips)}`);
  process.exit(2);
}
if (!Number.isInteger(port) || port <= 0 || (at !== -1 && (!file || !rootKey || !vaultKey))) {
  console.error(
    'usage: node proxy-hop.js <port of the MCP server> [--same-work <keyway.sqlite>] (HOP_ROOT_KEY, HOP_VAULT_KEY set)',
  );
  process.exit(2);
}
/** The gateway's defaults (core's gatewayLimits and streaming fetch), the bench's allowed host. */
const GUARDS: HopGuards = {
  maxBodyBytes: 4 * 1024 * 1024,
  maxBufferedBytes: 64 * 1024 * 1024,
  perConnection: 64,
  perCaller: 256,
  allowedHosts: new Set(['127.0.0.1']),
  headMs: 300_000,
  idleMs: 300_000,
};
const hop =
  file === undefined
    ? proxyHop(port)
    : proxyHop(
        port,
        sameWorkSwap({
          file,
          rootKey: rootKey as string,
          vaultKey: vaultKey as string,
          skip: { check: skip.includes('check'), read: skip.includes('read') },
        }),
        skip.includes('guards') ? undefined : GUARDS,
      );
hop.maxConnections = 10_000;
hop.listen(0, '127.0.0.1', () => {
  console.log(`hop listening on http://127.0.0.1:${(hop.address() as { port: number }).port}`);
});
