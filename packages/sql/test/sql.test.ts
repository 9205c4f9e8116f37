import { describe, expect, it } from 'vitest';
import {
  CODECS,
  compile,
  migrations,
  pathListQuery,
  postgresDialect,
  SQLITE,
  StoredRowError,
  schemaColumns,
} from '../src/index.js';
import { TOKENS } from '../src/rows.js';

describe('the schema and the codecs', () => {
  it('each codec writes exactly the columns its table has after every migration', () => {
    const tables = schemaColumns();
    for (const codec of CODECS) {
      expect([codec.table, codec.columns]).toEqual([codec.table, tables.get(codec.table)]);
    }
  });

  it('writes each engine its own column types from one definition', () => {
    const [sqlite] = migrations(SQLITE);
    const [postgres] = migrations(postgresDialect('keyway'));
    expect(sqlite).toContain(
      'CREATE TABLE keyway_tokens (\n  id_hash TEXT PRIMARY KEY,\n  name TEXT NOT NULL UNIQUE,',
    );
    expect(sqlite).toContain('PRIMARY KEY (kind, key)\n) WITHOUT ROWID;');
    expect(postgres).toContain(
      'CREATE TABLE "keyway".keyway_tokens (\n  id_hash text PRIMARY KEY,\n  name text COLLATE "C" NOT NULL UNIQUE,',
    );
    expect(postgres).toContain('  expires_at bigint NOT NULL,');
    expect(postgres).toContain(
      'CREATE INDEX keyway_connections_provider ON "keyway".keyway_connections (provider_id, id);',
    );
    expect(migrations(SQLITE)).toHaveLength(5);
    // A token's audience (sign-in for MCP clients): old rows read as bound to nothing.
    expect(migrations(SQLITE)[3]).toBe(
      "ALTER TABLE keyway_tokens ADD COLUMN audience TEXT NOT NULL DEFAULT '';",
    );
    // A token's tool globs (the portal): old rows read as open to every tool.
    expect(migrations(SQLITE)[4]).toBe(
      "ALTER TABLE keyway_tokens ADD COLUMN tools TEXT NOT NULL DEFAULT '';",
    );
    expect(migrations(postgresDialect('keyway'))[4]).toBe(
      'ALTER TABLE "keyway".keyway_tokens ADD COLUMN tools text NOT NULL DEFAULT \'\';',
    );
  });
});

describe('compile()', () => {
  const text = 'SELECT * FROM {tokens} WHERE name = ? AND expires_at > ?{lock FOR UPDATE}';

  it('numbers parameters, qualifies tables and keeps row locks on PostgreSQL', () => {
    expect(compile(postgresDialect('k'), text)).toBe(
      'SELECT * FROM "k".keyway_tokens WHERE name = $1 AND expires_at > $2 FOR UPDATE',
    );
  });

  it('keeps `?` and drops row locks on SQLite', () => {
    expect(compile(SQLITE, text)).toBe(
      'SELECT * FROM keyway_tokens WHERE name = ? AND expires_at > ?',
    );
  });

  it('refuses a schema name that is not a plain identifier', () => {
    expect(() => postgresDialect('a"; DROP TABLE x; --')).toThrow(
      '"schema" must be a plain SQL identifier (letters, digits, _)',
    );
  });
});

describe('pathListQuery()', () => {
  it('reads each subtree as its root and one range of descendants cut at the limit, merged and cut again', () => {
    expect(
      pathListQuery(
        'connections',
        'id',
        { within: ['a', 'b/c'], after: 'a/x', limit: 3 },
        {
          status: 'active',
          provider_id: undefined,
        },
      ),
    ).toEqual({
      sql:
        'SELECT * FROM {connections} WHERE id = ? AND id > ? AND status = ?' +
        ' UNION SELECT * FROM (SELECT * FROM {connections} WHERE id >= ? AND id < ? AND id > ? AND status = ? ORDER BY id LIMIT ?) AS below0' +
        ' UNION SELECT * FROM {connections} WHERE id = ? AND id > ? AND status = ?' +
        ' UNION SELECT * FROM (SELECT * FROM {connections} WHERE id >= ? AND id < ? AND id > ? AND status = ? ORDER BY id LIMIT ?) AS below1' +
        ' ORDER BY id LIMIT ?',
      params: [
        ...['a', 'a/x', 'active'],
        ...['a/', 'a0', 'a/x', 'active', 3],
        ...['b/c', 'a/x', 'active'],
        ...['b/c/', 'b/c0', 'a/x', 'active', 3],
        3,
      ],
    });
  });

  it('lists a whole table in key order when no subtree is named', () => {
    expect(pathListQuery('providers', 'id', { after: 'm', limit: 5 })).toEqual({
      sql: 'SELECT * FROM {providers} WHERE id > ? ORDER BY id LIMIT ?',
      params: ['m', 5],
    });
  });

  it('selects nothing for an empty list of subtrees', () => {
    expect(pathListQuery('providers', 'id', { within: [], limit: 5 })).toEqual({
      sql: 'SELECT * FROM {providers} WHERE FALSE LIMIT ?',
      params: [5],
    });
  });
});

describe('row codecs', () => {
  const [tokens, providers, connections] = CODECS as [
    (typeof CODECS)[0],
    (typeof CODECS)[1],
    (typeof CODECS)[2],
  ];
  const tokenRow = {
    id_hash: 'ab',
    name: 'ci',
    scopes: '["acme/**"]',
    expires_at: '1700000000000',
    created_at: 1,
    created_by: 'root',
    audience: '',
    tools: '',
  };

  const tokenRecord = {
    idHash: 'ab',
    name: 'ci',
    scopes: ['acme/**'],
    expiresAt: 1_700_000_000_000,
    createdAt: 1,
    createdBy: 'root',
  };

  it('reads 64-bit integers that drivers answer as strings', () => {
    expect(tokens.fromRow(tokenRow)).toEqual(tokenRecord);
  });

  it('writes an absent audience as the empty text of its NOT NULL column, and reads it back absent', () => {
    expect(TOKENS.toRow(tokenRecord)).toEqual([
      'ab',
      'ci',
      '["acme/**"]',
      1_700_000_000_000,
      1,
      'root',
      '',
      '',
    ]);
    expect(tokens.fromRow(tokenRow)).not.toHaveProperty('audience');
    const bound = { ...tokenRecord, audience: 'mcp/acme/users/alice/linear' };
    expect(TOKENS.toRow(bound).at(-2)).toBe('mcp/acme/users/alice/linear');
    expect(tokens.fromRow({ ...tokenRow, audience: 'mcp/acme/users/alice/linear' })).toEqual(bound);
  });

  it('writes absent tool globs as the empty text, a list (even an empty one) as JSON, and reads each back', () => {
    expect(TOKENS.toRow(tokenRecord).at(-1)).toBe('');
    expect(tokens.fromRow(tokenRow)).not.toHaveProperty('tools');
    const limited = { ...tokenRecord, tools: ['linear__get_*', 'notion__search'] };
    expect(TOKENS.toRow(limited).at(-1)).toBe('["linear__get_*","notion__search"]');
    expect(tokens.fromRow({ ...tokenRow, tools: '["linear__get_*","notion__search"]' })).toEqual(
      limited,
    );
    // No tool at all is not the same as every tool.
    expect(TOKENS.toRow({ ...tokenRecord, tools: [] }).at(-1)).toBe('[]');
    expect(tokens.fromRow({ ...tokenRow, tools: '[]' })).toEqual({ ...tokenRecord, tools: [] });
    expect(() => tokens.fromRow({ ...tokenRow, tools: '{"a":1}' })).toThrow(
      new StoredRowError('tokens', 'tools', 'is not a JSON array of strings'),
    );
  });

  it('selects its columns in its own order and reads a row answered as those values', () => {
    expect(tokens.select).toBe(
      'SELECT id_hash, name, scopes, expires_at, created_at, created_by, audience, tools FROM {tokens}',
    );
    for (const codec of CODECS) {
      expect(codec.select).toBe(`SELECT ${codec.columns.join(', ')} FROM {${codec.table}}`);
    }
    const values = ['ab', 'ci', '["acme/**"]', '1700000000000', 1, 'root', '', ''];
    expect(tokens.fromValues(values)).toEqual(tokenRecord);
    // Values read in the codec's order: a column in the wrong place is refused by name.
    expect(() => tokens.fromValues(['ab', 'ci', 1, '["acme/**"]', 1, 'root', '', ''])).toThrow(
      new StoredRowError('tokens', 'scopes', 'is not text'),
    );
  });

  it('refuses a corrupted row, naming the column and never the value', () => {
    const cases: [() => unknown, string][] = [
      [
        () => tokens.fromRow({ ...tokenRow, scopes: '{"secret-value":1}' }),
        'keyway_tokens.scopes is not a JSON array of strings',
      ],
      [
        () => tokens.fromRow({ ...tokenRow, expires_at: 'secret-value' }),
        'keyway_tokens.expires_at is not an integer',
      ],
      [
        () =>
          providers.fromRow({
            id: 'p',
            template: 'mcp',
            state: 'secret-value{',
            version: 1,
            created_at: 0,
            updated_at: 0,
          }),
        'keyway_providers.state is not JSON',
      ],
      [
        () =>
          connections.fromRow({
            id: 'c',
            provider_id: 'p',
            status: 'secret-value',
            state: '{}',
            version: 1,
            created_at: 0,
            updated_at: 0,
          }),
        'keyway_connections.status is not pending, active or error',
      ],
      [
        () =>
          providers.fromRow({
            id: 'p',
            template: 'mcp',
            state: '["secret-value"]',
            version: 1,
            created_at: 0,
            updated_at: 0,
          }),
        'keyway_providers.state is not a JSON object',
      ],
    ];
    for (const [read, message] of cases) {
      let caught: unknown;
      try {
        read();
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(StoredRowError);
      expect((caught as Error).message).toBe(message);
      expect((caught as Error).message).not.toContain('secret-value');
    }
  });
});
