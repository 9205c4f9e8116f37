/**
 * Storage operations are written once, as generators that yield the statements they need
 * and receive each answer: a driver runs them synchronously inside one SQLite transaction,
 * or awaits each statement on a PostgreSQL connection. The same code, two engines, no
 * duplicated skeleton.
 */

/** A row as a driver returns it: column name to value. */
export type Row = Record<string, unknown>;

/** One statement of a program, in the shared notation of `compile()`. */
export type Statement =
  /** Runs a statement; answers the number of rows it changed. */
  | { kind: 'run'; sql: string; params: readonly unknown[] }
  /**
   * Answers the first row, or `undefined`: an object by column name, or with `values` the
   * row's values in the order the statement selects them (an array).
   */
  | { kind: 'get'; sql: string; params: readonly unknown[]; values?: boolean }
  /** Answers every row. */
  | { kind: 'all'; sql: string; params: readonly unknown[] }
  /** Runs a script of several statements without parameters (migrations). */
  | { kind: 'script'; sql: string; params: readonly [] };

/** A storage operation: yields statements, receives their answers, returns `T`. */
export type Program<T> = Generator<Statement, T, unknown>;

/** Runs a statement; answers how many rows it changed. */
export function* run(sql: string, params: readonly unknown[] = []): Generator<Statement, number> {
  const changes = yield { kind: 'run', sql, params };
  return typeof changes === 'number' ? changes : 0;
}

/** The first row of a query, or `undefined`. */
export function* get(
  sql: string,
  params: readonly unknown[] = [],
): Generator<Statement, Row | undefined> {
  const row = yield { kind: 'get', sql, params };
  return isRow(row) ? row : undefined;
}

/** Every row of a query. */
export function* all(sql: string, params: readonly unknown[] = []): Generator<Statement, Row[]> {
  const rows = yield { kind: 'all', sql, params };
  return Array.isArray(rows) ? rows.filter(isRow) : [];
}

/** Runs a parameterless script (DDL). */
export function* script(sql: string): Generator<Statement, void> {
  yield { kind: 'script', sql, params: [] };
}

function isRow(value: unknown): value is Row {
  return typeof value === 'object' && value !== null;
}

/** Runs a program synchronously, answering each statement with `execute`. */
export function runSync<T>(program: Program<T>, execute: (statement: Statement) => unknown): T {
  let step = program.next();
  while (!step.done) step = program.next(execute(step.value));
  return step.value;
}

/** Runs a program, awaiting each statement's answer from `execute`. */
export async function runAsync<T>(
  program: Program<T>,
  execute: (statement: Statement) => Promise<unknown>,
): Promise<T> {
  let step = program.next();
  while (!step.done) step = program.next(await execute(step.value));
  return step.value;
}

/**
 * What an engine adapter supplies: a way to run a program, either as one transaction (all
 * or nothing, isolated from every other writer, in this process and others) or statement
 * by statement.
 */
export interface SqlDriver {
  execute<T>(program: Program<T>, transaction: boolean): Promise<T>;
  /**
   * Runs one statement on its own and answers as a program's statement would be answered:
   * the hot path of point reads and lists, without a program around them (synchronously
   * where the engine answers synchronously).
   */
  query(statement: Statement): unknown;
  /** `query` answers synchronously, never with a promise (SQLite). */
  readonly synchronous?: boolean;
}
