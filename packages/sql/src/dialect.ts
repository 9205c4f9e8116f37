/**
 * What differs between the engines, and nothing else. Statements are written once, in one
 * notation: `?` for each parameter, `{tokens}` for a table, `{lock FOR UPDATE}` for a row
 * lock. {@link compile} turns them into each engine's text.
 */
export interface Dialect {
  readonly engine: 'sqlite' | 'postgres';
  /**
   * The schema that qualifies every table (PostgreSQL), or `null` (SQLite: one file, one
   * namespace).
   */
  readonly schema: string | null;
}

/** The SQLite dialect: `?` parameters, no row locks (`BEGIN IMMEDIATE` serializes writers). */
export const SQLITE: Dialect = { engine: 'sqlite', schema: null };

/** A PostgreSQL dialect whose tables live in `schema`; `$n` parameters and row locks. */
export function postgresDialect(schema: string): Dialect {
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(schema)) {
    throw new TypeError('"schema" must be a plain SQL identifier (letters, digits, _)');
  }
  return { engine: 'postgres', schema };
}

/** The name a statement uses for Keyway's table `name` (`tokens` → `keyway_tokens`). */
export function tableName(dialect: Dialect, name: string): string {
  return dialect.schema === null ? `keyway_${name}` : `"${dialect.schema}".keyway_${name}`;
}

const compiled = new WeakMap<Dialect, Map<string, string>>();

/**
 * The engine's text of a statement written in the shared notation: tables qualified, row
 * locks kept only where the engine has them, and `?` numbered `$1, $2, …` for PostgreSQL.
 * Cached: a statement is compiled once per dialect.
 */
export function compile(dialect: Dialect, text: string): string {
  let cache = compiled.get(dialect);
  if (cache === undefined) {
    cache = new Map();
    compiled.set(dialect, cache);
  }
  let sql = cache.get(text);
  if (sql === undefined) {
    let index = 0;
    sql = text
      .replace(/\{lock ([A-Z ]+)\}/g, (_, clause: string) =>
        dialect.engine === 'postgres' ? ` ${clause}` : '',
      )
      .replace(/\{([a-z_]+)\}/g, (_, name: string) => tableName(dialect, name))
      .replace(/\?/g, () => (dialect.engine === 'postgres' ? `$${++index}` : '?'));
    cache.set(text, sql);
  }
  return sql;
}

/** `?, ?, ?` for a column list. */
export function marks(columns: readonly string[]): string {
  return columns.map(() => '?').join(', ');
}
