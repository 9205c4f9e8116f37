import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type BrokerProcess, startBrokerProcess } from '@keyway/test-support/processes';
import { build } from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..');
const require = createRequire(import.meta.url);

/** The two pinned releases of the suite: the latest release and the newest pre-release. */
export const SUITES = {
  '0.1.16': 'conformance-0.1',
  '0.2.0-alpha.12': 'conformance-0.2',
} as const;
export type SuiteVersion = keyof typeof SUITES;

/** The client-id metadata document URL the suite's `basic-cimd` scenario expects. */
export const CIMD_URL = 'https://conformance-test.local/client-metadata.json';

/** One check the suite recorded (its `checks.json`). */
export interface Check {
  id: string;
  name: string;
  status: 'SUCCESS' | 'FAILURE' | 'WARNING' | 'INFO' | 'SKIPPED';
  description: string;
  /** What the suite measured (the scope asked for, the header seen, …). */
  details?: Record<string, unknown>;
}

/** The outcome of one scenario run. */
export interface ScenarioResult {
  exitCode: number;
  checks: Check[];
  /** Checks that make the suite call the run failed: failures and warnings. */
  failing: Check[];
  output: string;
  /** What the client reported of the server's tokens in Keyway's answers (one line a run). */
  report: string;
}

/** Bundles the client from its TypeScript source into one runnable ES module. */
export async function bundleClient(): Promise<string> {
  const outdir = join(root, '.test-build');
  mkdirSync(outdir, { recursive: true });
  const outfile = join(outdir, `client-${process.pid}.mjs`);
  await build({
    entryPoints: [join(root, 'src', 'client.ts')],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    logLevel: 'silent',
  });
  return outfile;
}

/** `keyway serve` on a fresh SQLite file, allowed to reach the suite's loopback servers. */
/** The directory of workload JWTs the broker's `conformance` assertion source reads. */
const assertionsOf = (directory: string) => join(directory, 'assertions');

export async function startBroker(directory: string): Promise<{
  broker: BrokerProcess;
  rootKey: string;
}> {
  const rootKey = randomBytes(32).toString('base64url');
  mkdirSync(assertionsOf(directory), { recursive: true });
  const broker = await startBrokerProcess({
    KEYWAY_ROOT_KEY: rootKey,
    KEYWAY_DATABASE: join(directory, 'keyway.sqlite'),
    KEYWAY_ALLOWED_HOSTS: 'localhost,127.0.0.1,::1',
    KEYWAY_CLIENT_METADATA_URL: CIMD_URL,
    // Workload identity (`auth/wif-jwt-bearer`): each run's client leaves its workload's
    // JWT as a file of this directory, as a projected service-account token would be.
    KEYWAY_ASSERTION_SOURCES: `conformance=directory:${assertionsOf(directory)}`,
  });
  return { broker, rootKey };
}

/**
 * Runs one scenario of one suite release against the client, at one spec version (the
 * wire follows it), and reads the checks the suite wrote.
 */
export async function runScenario(options: {
  suite: SuiteVersion;
  scenario: string;
  specVersion: string | null;
  force?: boolean;
  client: string;
  /** The directory `startBroker` was given (its assertion source lives there). */
  brokerDirectory: string;
  keywayUrl: string;
  keywayToken: string;
  outputDir: string;
  /** `gateway`: the client calls the server through Keyway's gateway, holding no token. */
  via: 'token' | 'gateway';
}): Promise<ScenarioResult> {
  const cli = join(
    dirname(require.resolve(`${SUITES[options.suite]}/package.json`)),
    'dist',
    'index.js',
  );
  const outputDir = join(
    options.outputDir,
    `${options.suite}-${options.scenario.replace('/', '_')}-${options.specVersion ?? 'default'}-${options.via}`,
  );
  rmSync(outputDir, { recursive: true, force: true });
  mkdirSync(outputDir, { recursive: true });
  const report = join(outputDir, 'client-report.txt');
  const args = [
    '--import',
    join(root, 'preload', 'register.mjs'),
    cli,
    'client',
    '--command',
    `${process.execPath} ${options.client}`,
    '--scenario',
    options.scenario,
    '--output-dir',
    outputDir,
    '--timeout',
    '20000',
    ...(options.specVersion === null ? [] : ['--spec-version', options.specVersion]),
    ...(options.force === true ? ['--force'] : []),
  ];
  const child = spawn(process.execPath, args, {
    env: {
      PATH: process.env.PATH ?? '',
      KEYWAY_URL: options.keywayUrl,
      KEYWAY_TOKEN: options.keywayToken,
      KEYWAY_CONFORMANCE_VIA: options.via,
      KEYWAY_CONFORMANCE_ASSERTIONS: assertionsOf(options.brokerDirectory),
      KEYWAY_CONFORMANCE_REPORT: report,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
  });
  const exitCode = await new Promise<number>((resolve) =>
    child.once('exit', (code) => resolve(code ?? 1)),
  );
  const checks = readChecks(outputDir);
  return {
    exitCode,
    checks,
    failing: checks.filter((check) => check.status === 'FAILURE' || check.status === 'WARNING'),
    output,
    report: existsSync(report) ? readFileSync(report, 'utf8') : '',
  };
}

/** The checks.json the suite wrote under a result directory (one scenario run). */
function readChecks(directory: string): Check[] {
  if (!existsSync(directory)) return [];
  const files = (readdirSync(directory, { recursive: true }) as string[]).filter((entry) =>
    entry.endsWith('checks.json'),
  );
  return files.flatMap(
    (file) => JSON.parse(readFileSync(join(directory, file), 'utf8')) as Check[],
  );
}

/**
 * Runs the suite's CLI (`authorization`, `server`, … and its arguments) with its results in
 * `outputDir`, `watch` told of everything it prints: its exit code, its output, and the
 * checks it recorded by result file (`<scenario dir>/checks.json`).
 */
export async function runSuiteCli(
  version: SuiteVersion,
  args: string[],
  outputDir: string,
  watch: (output: string) => void = () => {},
): Promise<{ exitCode: number; output: string; checks: [file: string, checks: Check[]][] }> {
  const cli = join(dirname(require.resolve(`${SUITES[version]}/package.json`)), 'dist', 'index.js');
  const child = spawn(
    process.execPath,
    ['--import', join(root, 'preload', 'register.mjs'), cli, ...args, '--output-dir', outputDir],
    { env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  const heard = (chunk: string) => {
    output += chunk;
    watch(output);
  };
  child.stdout.setEncoding('utf8').on('data', heard);
  child.stderr.setEncoding('utf8').on('data', heard);
  const exitCode = await new Promise<number>((resolve) =>
    child.once('exit', (code) => resolve(code ?? 1)),
  );
  const files = existsSync(outputDir)
    ? (readdirSync(outputDir, { recursive: true }) as string[]).filter((file) =>
        file.endsWith('checks.json'),
      )
    : [];
  const checks = files.map(
    (file) =>
      [file, JSON.parse(readFileSync(join(outputDir, file), 'utf8')) as Check[]] as [
        string,
        Check[],
      ],
  );
  return { exitCode, output, checks };
}
