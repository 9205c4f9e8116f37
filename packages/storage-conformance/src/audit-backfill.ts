import type { Storage } from '@keyway/core';
import { expect } from 'vitest';

/**
 * Events as a SQL adapter held them before migration 4 (no ancestors): `[id, kind,
 * resource]`. An adapter's test writes them into a database at schema 3, opens it (the
 * migration runs), and hands the storage and the ancestors table's rows to
 * {@link expectBackfilled}.
 */
export const EVENTS_BEFORE_ANCESTORS: readonly [string, 'path' | 'token', string][] = [
  ['evt_1', 'path', 'acme/users/alice/linear'],
  ['evt_2', 'path', 'acme'],
  ['evt_3', 'token', 'ci.deploy.x'],
  ['evt_4', 'token', 'ci'],
  ['evt_5', 'path', 'acme-x/one'],
];

/**
 * Checks migration 4's backfill: each event listed under every ancestor of its resource (a
 * path under itself too, a token only under strict ancestors), and found by scoped reads.
 *
 * @param rows the ancestors table, `{ kind, ancestor, id }` ordered by id then ancestor.
 */
export async function expectBackfilled(
  storage: Pick<Storage, 'listAuditEvents'>,
  rows: unknown[],
): Promise<void> {
  expect(rows).toEqual([
    { kind: 'path', ancestor: 'acme', id: 'evt_1' },
    { kind: 'path', ancestor: 'acme/users', id: 'evt_1' },
    { kind: 'path', ancestor: 'acme/users/alice', id: 'evt_1' },
    { kind: 'path', ancestor: 'acme/users/alice/linear', id: 'evt_1' },
    { kind: 'path', ancestor: 'acme', id: 'evt_2' },
    { kind: 'token', ancestor: 'ci', id: 'evt_3' },
    { kind: 'token', ancestor: 'ci.deploy', id: 'evt_3' },
    { kind: 'path', ancestor: 'acme-x', id: 'evt_5' },
    { kind: 'path', ancestor: 'acme-x/one', id: 'evt_5' },
  ]);
  const ids = async (within: string[], tokensBelow: string | null) =>
    (await storage.listAuditEvents({ limit: 10, within, tokensBelow })).map((e) => e.id);
  expect(await ids(['acme'], null)).toEqual(['evt_2', 'evt_1']);
  expect(await ids(['acme/users'], null)).toEqual(['evt_1']);
  expect(await ids(['acme/users/alice/linear'], null)).toEqual(['evt_1']);
  expect(await ids(['acme-x'], null)).toEqual(['evt_5']);
  expect(await ids([], 'ci')).toEqual(['evt_3']);
  expect(await ids([], 'ci.deploy')).toEqual(['evt_3']);
  expect(await ids([], 'ci.deploy.x')).toEqual([]);
}
