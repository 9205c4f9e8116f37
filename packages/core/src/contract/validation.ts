import type { z } from 'zod';
import { KeywayError, type KeywayErrorCode, type KeywayErrorDetail } from './errors.js';

/**
 * Most `details` entries a validation error carries: the first issues, then one entry that
 * counts the rest. An answer never grows with the body that caused it.
 */
export const MAX_DETAILS = 20;
/** Longest message or path of one entry, in UTF-16 code units; longer ones are cut with `…`. */
const MAX_DETAIL_TEXT = 300;

const clip = (text: string): string =>
  text.length <= MAX_DETAIL_TEXT ? text : `${text.slice(0, MAX_DETAIL_TEXT - 1)}…`;

/**
 * The `details` of a list of issues, bounded: at most {@link MAX_DETAILS} entries and
 * {@link MAX_DETAIL_TEXT} characters each (an unknown key's name is the caller's text).
 */
export function boundedDetails(issues: readonly KeywayErrorDetail[]): KeywayErrorDetail[] {
  const clipped = (issue: KeywayErrorDetail): KeywayErrorDetail => ({
    ...issue,
    ...(typeof issue.path === 'string' ? { path: clip(issue.path) } : {}),
    ...(typeof issue.message === 'string' ? { message: clip(issue.message) } : {}),
  });
  if (issues.length <= MAX_DETAILS) return issues.map(clipped);
  const shown = issues.slice(0, MAX_DETAILS - 1).map(clipped);
  return [...shown, { path: '', message: `and ${issues.length - shown.length} more issues` }];
}

/** Most fields any object of a request body may have; no schema has more. */
export const MAX_FIELDS = 64;

/**
 * The path of the first object in a JSON value with more than {@link MAX_FIELDS} fields, or
 * `null`: a body of sixty thousand unknown fields (or record entries) is refused at this
 * one cheap walk, before a schema spends an issue on each of them. Iterative, so a value
 * nested deeper than the call stack is walked too.
 */
function crowdedObject(value: unknown): string | null {
  // The path is built only for the object found: each entry points at its parent.
  type Entry = { value: unknown; key: string; parent: Entry | null };
  const pathOf = (entry: Entry): string => {
    const keys: string[] = [];
    for (let at: Entry | null = entry; at?.parent; at = at.parent) keys.push(at.key);
    return keys.reverse().join('.');
  };
  const stack: Entry[] = [{ value, key: '', parent: null }];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const current = next.value;
    if (typeof current !== 'object' || current === null) continue;
    if (Array.isArray(current)) {
      for (let i = 0; i < current.length; i++) {
        const item: unknown = current[i];
        if (typeof item === 'object' && item !== null) {
          stack.push({ value: item, key: String(i), parent: next });
        }
      }
      continue;
    }
    const keys = Object.keys(current);
    if (keys.length > MAX_FIELDS) return pathOf(next);
    for (const key of keys) {
      const item = (current as Record<string, unknown>)[key];
      if (typeof item === 'object' && item !== null) stack.push({ value: item, key, parent: next });
    }
  }
  return null;
}

/** Whether a value is a plain JSON object (not an array, not `null`). */
export function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Parses a JSON object through a request schema, or throws `invalid_request` with one
 * `details` entry per issue; `describe` words the message from the first one.
 */
function parseObject<S extends z.ZodType>(
  schema: S,
  input: Record<string, unknown>,
  describe: (first: { path: string; message: string }) => string,
  tooMany: KeywayErrorCode = 'invalid_request',
): z.output<S> {
  const crowded = crowdedObject(input);
  if (crowded !== null) {
    const message = `${crowded ? `"${clip(crowded)}"` : 'the body'} has more than ${MAX_FIELDS} fields`;
    throw new KeywayError('invalid_request', message, {
      details: [{ path: clip(crowded), message }],
    });
  }
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const { issues } = result.error;
  const details = boundedDetails(
    issues.map((issue) => ({ path: issue.path.map(String).join('.'), message: issue.message })),
  ) as { path: string; message: string }[];
  const first = details[0] ?? { path: '', message: 'the input is not valid' };
  // A list longer than its bound is refused before its entries are read (so a huge one
  // costs nothing); some bounds have a code of their own (docs/api.md §1.2: `invalid_scope`).
  const code = issues.every((issue) => issue.code === 'too_big' && issue.origin === 'array')
    ? tooMany
    : 'invalid_request';
  throw new KeywayError(code, describe(first), { details });
}

/**
 * Checks the shape of a request body against a zod schema: a JSON object, the right types,
 * no unknown fields, no missing required fields. The specific checks (paths, scopes, names,
 * lifetimes) come after, so a type error always wins (docs/api.md §1.2 precedence).
 *
 * @throws {KeywayError} `invalid_request` with one `details` entry per issue.
 */
export function parseShape<S extends z.ZodType>(
  schema: S,
  input: unknown,
  options: { tooMany?: KeywayErrorCode } = {},
): z.output<S> {
  if (!isJsonObject(input)) {
    throw new KeywayError('invalid_request', 'the body must be a JSON object');
  }
  return parseObject(
    schema,
    input,
    // A message that names its field already is not prefixed with it again.
    ({ path, message }) =>
      path && !message.startsWith(`"${path}"`) ? `"${path}": ${message}` : message,
    options.tooMany,
  );
}

/**
 * Checks a query (already typed by the HTTP layer, or passed in process) against its schema.
 * `undefined` is an empty query. Each message names its parameter itself.
 *
 * @throws {KeywayError} `invalid_request` with one `details` entry per issue.
 */
export function parseQuery<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const value = input === undefined ? {} : input;
  if (!isJsonObject(value)) {
    throw new KeywayError('invalid_request', 'the query must be an object of parameters');
  }
  return parseObject(schema, value, ({ message }) => message);
}
