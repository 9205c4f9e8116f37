import { fileURLToPath } from 'node:url';
import { freePort } from '@keyway/test-support/examples';
import { build } from 'esbuild';
import { Miniflare } from 'miniflare';

const source = fileURLToPath(new URL('../worker/mcp-worker.ts', import.meta.url));

/**
 * The Worker of `worker/mcp-worker.ts` in workerd (miniflare from npm, offline), on a
 * loopback port: Cloudflare's `workers-oauth-provider` serving OAuth and an MCP server of
 * the official SDK, with a KV namespace for its grants. Its compatibility date is the one
 * this workerd supports.
 */
export async function startWorker(): Promise<{ origin: string; close(): Promise<void> }> {
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const bundle = await build({
    entryPoints: [source],
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    conditions: ['workerd', 'worker', 'browser'],
    define: { ORIGIN: JSON.stringify(origin) },
    external: ['cloudflare:*', 'node:*'],
    logLevel: 'silent',
  });
  const script = bundle.outputFiles[0]?.text ?? '';
  const mf = new Miniflare({
    modules: true,
    script,
    compatibilityDate: '2025-07-01',
    compatibilityFlags: ['nodejs_compat'],
    kvNamespaces: ['OAUTH_KV'],
    host: '127.0.0.1',
    port,
  });
  await mf.ready;
  return { origin, close: () => mf.dispose() };
}
