import {
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createBroker, generateVaultKey, rootPrincipal } from '@keyway/core';
import { sqliteStorage } from '@keyway/store-sqlite';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { type AdminIo, EXIT, runAdmin } from '../src/admin.js';
import { backupDatabase } from '../src/backup.js';

/*
 * `keyway backup <file>` (docs/operations.md): SQLite's online backup API, while
 * the broker writes; the copy is one moment of the database.
 */

const ROOT_KEY = 'backup-test-root-key-0123456789abcdefghij';
const dir = mkdtempSync(join(tmpdir(), 'keyway-backup-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function io(env: Record<string, string>) {
  const lines: string[] = [];
  const errors: string[] = [];
  const value: AdminIo & { lines: string[]; errors: string[] } = {
    env,
    out: (text) => lines.push(text),
    err: (text) => errors.push(text),
    fetch: globalThis.fetch,
    sleep: async () => {},
    tty: false,
    lines,
    errors,
  };
  return value;
}

describe('keyway backup', () => {
  it('copies the database while the broker writes, consistently, readable with the vault key', async () => {
    const file = join(dir, 'live.sqlite');
    const vaultKey = generateVaultKey();
    const broker = createBroker({
      rootKey: ROOT_KEY,
      storage: sqliteStorage(file),
      vaultKeys: [vaultKey],
      purgeIntervalMs: false,
    });
    // Each secret's value names its own version: a torn copy would show a value of one
    // write beside the version of another.
    const PATHS = 20;
    for (let i = 0; i < PATHS; i++) {
      await broker.secrets.put(rootPrincipal(), `acme/s${i}`, { value: `acme/s${i}@1` });
    }
    let writing = true;
    let written = PATHS;
    const writer = (async () => {
      for (let n = 2; writing; n++) {
        for (let i = 0; i < PATHS && writing; i++) {
          await broker.secrets.put(rootPrincipal(), `acme/s${i}`, { value: `acme/s${i}@${n}` });
          written++;
        }
      }
    })();
    // Let the writer run, then back up in the middle of it.
    while (written < PATHS * 5) await new Promise((resolve) => setImmediate(resolve));
    const target = join(dir, 'copy.sqlite');
    const cli = io({ KEYWAY_DATABASE: file, KEYWAY_VAULT_KEYS: vaultKey });
    const writtenBefore = written;
    expect(await runAdmin(['backup', target], cli)).toBe(EXIT.ok);
    const writtenAfter = written;
    writing = false;
    await writer;
    await broker.close();

    expect(cli.lines).toHaveLength(1);
    expect(cli.lines[0]).toMatch(
      new RegExp(
        `^backed up ${file} to ${target} \\(\\d+ pages\\)\\. The vault keys are not in it: keep KEYWAY_VAULT_KEYS with it, apart, or its secrets cannot be read$`,
      ),
    );
    expect(statSync(target).mode & 0o777).toBe(0o600);
    const raw = new Database(target, { readonly: true });
    expect(raw.pragma('integrity_check', { simple: true })).toBe('ok');
    raw.close();

    // The copy opens as a database of its own, and every secret reads back whole.
    const restored = createBroker({
      rootKey: ROOT_KEY,
      storage: sqliteStorage(target),
      vaultKeys: [vaultKey],
      purgeIntervalMs: false,
    });
    let total = 0;
    for (let i = 0; i < PATHS; i++) {
      const secret = await restored.secrets.get(rootPrincipal(), `acme/s${i}`);
      expect(secret.value).toBe(`acme/s${i}@${secret.version}`);
      total += secret.version;
    }
    // One moment between the writes seen before and after the backup.
    expect(total).toBeGreaterThanOrEqual(writtenBefore);
    expect(total).toBeLessThanOrEqual(writtenAfter);
    await restored.close();
  });

  it('refuses what it cannot copy, naming it, and never overwrites a file', async () => {
    const file = join(dir, 'other.sqlite');
    const made = sqliteStorage(file);
    await made.close();
    const existing = join(dir, 'existing.sqlite');
    const first = io({ KEYWAY_DATABASE: file });
    expect(await runAdmin(['backup', existing], first)).toBe(EXIT.ok);
    expect(first.lines[0]).toContain(`keep ${file}.vault-keys with it, apart`);
    const size = statSync(existing).size;
    const cases: [Record<string, string>, string[], string][] = [
      [{ KEYWAY_DATABASE: file }, [existing], `${existing} exists: name a new file`],
      [
        { KEYWAY_DATABASE: 'postgres://keyway@localhost/keyway' },
        [join(dir, 'pg.sqlite')],
        'KEYWAY_DATABASE is PostgreSQL: back it up with pg_dump (docs/operations.md); keyway backup copies a SQLite file',
      ],
      [
        { KEYWAY_DATABASE: ':memory:' },
        [join(dir, 'memory.sqlite')],
        'KEYWAY_DATABASE is :memory:: nothing to back up',
      ],
      [
        { KEYWAY_DATABASE: join(dir, 'absent.sqlite') },
        [join(dir, 'absent-copy.sqlite')],
        `no database at ${join(dir, 'absent.sqlite')} (KEYWAY_DATABASE)`,
      ],
      [{ KEYWAY_DATABASE: file }, [], 'missing <file>'],
    ];
    for (const [env, args, message] of cases) {
      const cli = io(env);
      expect(await runAdmin(['backup', ...args], cli)).toBe(EXIT.usage);
      expect(cli.errors[0]?.split('\n')[0]).toBe(`keyway: ${message}`);
    }
    expect(statSync(existing).size).toBe(size);
    expect(existsSync(join(dir, 'absent-copy.sqlite'))).toBe(false);
    expect(existsSync(join(dir, 'absent.sqlite'))).toBe(false);
  });

  it('writes the copy readable by its owner only from its first byte, and never through a link', async () => {
    // A database of several hundred pages, so the copy is written in steps.
    const file = join(dir, 'large.sqlite');
    const broker = createBroker({
      rootKey: ROOT_KEY,
      storage: sqliteStorage(file),
      vaultKeys: [generateVaultKey()],
      purgeIntervalMs: false,
    });
    for (let i = 0; i < 60; i++) {
      await broker.secrets.put(rootPrincipal(), `acme/big${i}`, { value: 'x'.repeat(30_000) });
    }
    await broker.close();
    const target = join(dir, 'large-copy.sqlite');
    // Whatever the umask lets through, the copy is the owner's alone while it is written.
    const umask = process.umask(0);
    const modes: number[] = [];
    try {
      await backupDatabase({ KEYWAY_DATABASE: file }, target, () => {
        modes.push(statSync(target).mode & 0o777);
      });
    } finally {
      process.umask(umask);
    }
    expect(modes.length).toBeGreaterThan(1);
    expect(new Set(modes)).toEqual(new Set([0o600]));
    expect(statSync(target).mode & 0o777).toBe(0o600);
    // A link at the target, even one to a file of its own, is refused and left as it is.
    const victim = join(dir, 'victim.txt');
    writeFileSync(victim, 'untouched');
    const link = join(dir, 'link.sqlite');
    symlinkSync(victim, link);
    const dangling = join(dir, 'dangling.sqlite');
    symlinkSync(join(dir, 'nowhere'), dangling);
    for (const path of [link, dangling]) {
      const cli = io({ KEYWAY_DATABASE: file });
      expect(await runAdmin(['backup', path], cli)).toBe(EXIT.usage);
      expect(cli.errors[0]?.split('\n')[0]).toBe(`keyway: ${path} exists: name a new file`);
    }
    expect(readFileSync(victim, 'utf8')).toBe('untouched');
    expect(existsSync(join(dir, 'nowhere'))).toBe(false);
  });
});
