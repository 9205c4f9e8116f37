import { execFile } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { bundleCli } from '@keyway/test-support/processes';
import { afterAll, describe, expect, it } from 'vitest';
import { ADMIN_USAGE } from '../src/admin.js';
import { COMMANDS } from '../src/commands/index.js';

/*
 * The README's "Operations" section, run as it is written: `keyway` on the PATH,
 * a broker on SQLite in the background, readiness, status, metrics, a backup while it runs,
 * and SIGTERM. And the README names exactly the commands `keyway --help` lists.
 */

const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');

/** The text of a README section: from its heading to the next one of the same level. */
function section(heading: string): string {
  const start = readme.indexOf(`\n${heading}\n`);
  if (start === -1) throw new Error(`no section ${heading}`);
  const end = readme.indexOf('\n## ', start + heading.length + 2);
  return readme.slice(start, end === -1 ? undefined : end);
}

const work = mkdtempSync(join(tmpdir(), 'keyway-operations-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe("the README's operations", () => {
  it('runs the Operations block as it is written', async () => {
    const block = /```sh\n([\s\S]*?)```/.exec(section('## Operations'))?.[1];
    expect(block).toBeDefined();
    // `keyway` on the PATH: the CLI as a process, from its sources.
    const bin = join(work, 'bin');
    mkdirSync(bin);
    writeFileSync(
      join(bin, 'keyway'),
      `#!/bin/sh\nexec "${process.execPath}" "${await bundleCli()}" "$@"\n`,
    );
    chmodSync(join(bin, 'keyway'), 0o755);
    const cwd = join(work, 'run');
    mkdirSync(cwd);
    const { stdout, stderr } = await promisify(execFile)(
      'bash',
      ['--norc', '--noprofile', '-euo', 'pipefail', '-c', block as string],
      {
        cwd,
        env: { PATH: `${bin}:${process.env.PATH ?? ''}`, HOME: work },
        timeout: 60_000,
      },
    );
    expect(stderr).toBe('');
    expect(stdout).toContain('{"status":"ready"}');
    expect(stdout).toMatch(
      /^keyway \S+: ready\nstorage: sqlite, schema \d+ \(this version needs \d+\)$/m,
    );
    expect(stdout).toMatch(
      /^keyway_http_requests_total\{route="\/readyz",method="GET",status="200"\} \d+$/m,
    );
    expect(stdout).toMatch(
      /^backed up keyway\.sqlite to keyway-backup\.sqlite \(\d+ pages\)\. The vault keys are not in it: keep KEYWAY_VAULT_KEYS with it, apart, or its secrets cannot be read$/m,
    );
    expect(statSync(join(cwd, 'keyway-backup.sqlite')).mode & 0o777).toBe(0o600);
    // The log: the start lines, then a JSON line per request, the status request's among them.
    const log = readFileSync(join(cwd, 'keyway.log'), 'utf8');
    const records = log
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { route: string; principal: string | null });
    expect(records.map((record) => record.route)).toContain('/api/admin/status');
    expect(records.find((record) => record.route === '/api/admin/status')?.principal).toBe('root');
    expect(log).toMatch(
      /^Keyway broker listening on http:\/\/127\.0\.0\.1:8787 \(storage: sqlite keyway\.sqlite\)$/m,
    );
    expect(log).toContain('Metrics at http://127.0.0.1:9464/metrics');
    // The keys came from the environment: nothing generated, nothing printed.
    expect(existsSync(join(cwd, 'keyway.sqlite.vault-keys'))).toBe(false);
    expect(log).not.toContain('KEYWAY_ROOT_KEY=');
  }, 120_000);

  it('names every command keyway --help lists, and no other', () => {
    const documented = section('## Operating from the command line');
    const names = new Set<string>();
    // `keyway token create | list | get` names token create, token list and token get.
    for (const [, first, rest] of documented.matchAll(/`keyway ([a-z]+)((?: (?:\| )?[a-z]+)*)`/g)) {
      const words = (rest ?? '').split(/\s*\|\s*|\s+/).filter((word) => word !== '');
      if (words.length === 0) names.add(first as string);
      for (const word of words) names.add(`${first} ${word}`);
    }
    expect([...names].sort()).toEqual(COMMANDS.map((command) => command.name).sort());
    for (const command of COMMANDS) expect(ADMIN_USAGE).toContain(`keyway ${command.name}`);
  });
});
