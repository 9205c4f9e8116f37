import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
let bundled: Promise<string> | undefined;

/**
 * Bundles `keyway serve` from the TypeScript sources into one ES module (native drivers
 * left external), so tests can run it as real, separate Node processes without a build.
 * Written inside packages/cli so that the drivers resolve from its node_modules.
 */
export function bundleCli(): Promise<string> {
  bundled ??= (async () => {
    const outdir = join(repo, 'packages', 'cli', '.test-build');
    mkdirSync(outdir, { recursive: true });
    const outfile = join(outdir, `keyway-${process.pid}.mjs`);
    await build({
      entryPoints: [join(repo, 'packages', 'cli', 'src', 'bin.ts')],
      outfile,
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      conditions: ['@keyway/source'],
      external: ['better-sqlite3', 'pg'],
      logLevel: 'silent',
    });
    return outfile;
  })();
  return bundled;
}

/** A broker running in its own process. */
export interface BrokerProcess {
  readonly url: string;
  readonly child: ChildProcess;
  /** Everything it printed so far. */
  output(): string;
  stop(): Promise<void>;
}

/** Starts `keyway serve` in a new process on a free port and waits until it listens. */
export async function startBrokerProcess(env: Record<string, string>): Promise<BrokerProcess> {
  const entry = await bundleCli();
  const child = spawn(process.execPath, [entry, 'serve'], {
    env: { PATH: process.env.PATH ?? '', PORT: '0', HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    text += chunk;
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    text += chunk;
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`broker did not start:\n${text}`)), 30_000);
    const check = () => {
      const port = text.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/)?.[1];
      if (port !== undefined) {
        clearTimeout(timer);
        resolve(`http://127.0.0.1:${port}`);
      }
    };
    child.stdout?.on('data', check);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`broker exited with ${code}:\n${text}`));
    });
  });
  return {
    url,
    child,
    output: () => text,
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
