import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Plugin } from 'esbuild';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
let bundled: Promise<string> | undefined;

/**
 * Bundles `keyway serve` from the TypeScript sources into one ES module (native drivers
 * left external), so tests can run it as real, separate Node processes without a build.
 * Written inside packages/cli so that the drivers resolve from its node_modules.
 */
export function bundleCli(): Promise<string> {
  bundled ??= bundleCliEntry(join(repo, 'packages', 'cli', 'src', 'bin.ts'), 'keyway');
  return bundled;
}

/**
 * Bundles another entry point that runs Keyway's CLI code (a test's own server script) as
 * {@link bundleCli} does, into packages/cli/.test-build/`name`-`pid`.mjs; `plugins` are
 * esbuild's (the benchmarks' builds with a part answered from memory).
 */
export async function bundleCliEntry(
  entry: string,
  name: string,
  plugins: Plugin[] = [],
): Promise<string> {
  const outdir = join(repo, 'packages', 'cli', '.test-build');
  mkdirSync(outdir, { recursive: true });
  const outfile = join(outdir, `${name}-${process.pid}.mjs`);
  await build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    conditions: ['@keyway/source'],
    // As tsup defines it in every package's build.
    define: { __KEYWAY_VERSION__: JSON.stringify(keywayVersion()) },
    external: ['better-sqlite3', 'pg', 'pino', '@opentelemetry/sdk-node'],
    // CommonJS dependencies bundled into this ES module (prom-client) require Node's modules.
    banner: {
      js: "import { createRequire as __keywayRequire } from 'node:module'; const require = __keywayRequire(import.meta.url);",
    },
    logLevel: 'silent',
    plugins,
  });
  return outfile;
}

/** A broker running in its own process. */
export interface BrokerProcess {
  readonly url: string;
  readonly child: ChildProcess;
  /** Everything it printed so far. */
  output(): string;
  stop(): Promise<void>;
}

/**
 * Asks `url` until a new connection is refused (a server that stopped listening), at most
 * 200 times 25 ms apart: answers the last failure's code (`ECONNREFUSED` once refused), or
 * `null` when the server still answered. A kept-alive socket that fails first is asked again.
 */
export async function untilRefused(url: string): Promise<string | null> {
  let code: string | null = null;
  for (let attempt = 0; attempt < 200 && code !== 'ECONNREFUSED'; attempt++) {
    code = await fetch(url).then(
      () => null,
      (error: { cause?: { code?: string } }) => error.cause?.code ?? 'failed',
    );
    if (code === null) await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return code;
}

/**
 * Starts `keyway serve` in a new process on a free port and waits until it listens; `nodeOptions`
 * go to `node` before the entry (`--log-maps`). `bundle` is another build of the CLI to run
 * ({@link bundleCliEntry}); by default {@link bundleCli}'s.
 */
export async function startBrokerProcess(
  env: Record<string, string>,
  nodeOptions: string[] = [],
  bundle?: string,
): Promise<BrokerProcess> {
  const entry = bundle ?? (await bundleCli());
  const child = spawn(process.execPath, [...nodeOptions, entry, 'serve'], {
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
        // Once: the output goes on growing (a request log), and is not searched again.
        child.stdout?.off('data', check);
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
      // Exited already, or killed (a signal leaves exitCode null).
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/**
 * Runs `fn` while no other test process builds or reads the workspace packages' `dist/`
 * folders: a build cleans them first, so a concurrent build, pack or `next build` would
 * see them half-written. The lock is a directory, created atomically.
 */
export async function withBuildLock<T>(fn: () => Promise<T>): Promise<T> {
  const { mkdirSync: makeDir, rmSync } = await import('node:fs');
  const lock = join(repo, 'node_modules', '.keyway-build-lock');
  for (let waited = 0; ; waited += 200) {
    try {
      makeDir(lock);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || waited > 600_000) throw error;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** Builds workspace packages (`pnpm --filter … build`, declarations included). */
export async function buildWorkspacePackages(filters: string[]): Promise<void> {
  const { execFile } = await import('node:child_process');
  const { promisify } = await import('node:util');
  try {
    await promisify(execFile)(
      'npx',
      ['-y', 'pnpm@10.34.9', ...filters.flatMap((filter) => ['--filter', filter]), 'build'],
      { cwd: repo, env: { ...process.env, KEYWAY_BUILD_DTS: '1' }, maxBuffer: 64 * 1024 * 1024 },
    );
  } catch (error) {
    // pnpm prints the failing step (a compiler error, say) on stdout, which execFile's
    // message leaves out: keep its end, so a failed build says why.
    const { stdout } = error as { stdout?: string };
    throw new Error(`building ${filters.join(' ')} failed:\n${(stdout ?? '').slice(-4000)}`, {
      cause: error,
    });
  }
}

/**
 * Starts a server process that prints where it listens (by default `notes app on
 * http://127.0.0.1:<port>`; `listening` names another pattern, its first group the URL),
 * and answers its base URL, the id of the process it started (a wrapper's, for `bun` and `deno`)
 * and a way to stop it.
 */
export async function startServerProcess(
  command: string,
  args: string[],
  options: { cwd: string; env: Record<string, string>; listening?: RegExp },
): Promise<{ base: string; pid: number; stop: () => Promise<void> }> {
  const { spawn } = await import('node:child_process');
  // Its own process group: the npm packages' `bun` and `deno` are wrappers that start the
  // real binary as a child, and stopping the wrapper alone would leave the server running.
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...options.env },
    detached: true,
  });
  let output = '';
  const pattern = options.listening ?? /notes app on (http:\/\/127\.0\.0\.1:\d+)/;
  const base = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no start within 30 s:\n${output}`)), 30_000);
    const read = (chunk: Buffer) => {
      output += chunk.toString();
      const match = pattern.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1] as string);
      }
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`exited with ${code}:\n${output}`));
    });
  });
  return {
    base,
    pid: child.pid as number,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      process.kill(-(child.pid as number), 'SIGTERM');
      await exited;
    },
  };
}

/** The version the packages share (tsup writes it into each build as `__KEYWAY_VERSION__`). */
export function keywayVersion(): string {
  const manifest = fileURLToPath(new URL('../../../packages/http/package.json', import.meta.url));
  return (JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }).version;
}
