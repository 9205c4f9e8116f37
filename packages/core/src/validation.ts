import type { z } from 'zod';
import { KeywayError, type KeywayErrorDetail } from './errors.js';

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
): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const details = result.error.issues.map((issue) => ({
    path: issue.path.map(String).join('.'),
    message: issue.message,
  })) satisfies KeywayErrorDetail[];
  const first = details[0] ?? { path: '', message: 'the input is not valid' };
  throw new KeywayError('invalid_request', describe(first), { details });
}

/**
 * Checks the shape of a request body against a zod schema: a JSON object, the right types,
 * no unknown fields, no missing required fields. The specific checks (paths, scopes, names,
 * lifetimes) come after, so a type error always wins (API.md §1.2 precedence).
 *
 * @throws {KeywayError} `invalid_request` with one `details` entry per issue.
 */
export function parseShape<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  if (!isJsonObject(input)) {
    throw new KeywayError('invalid_request', 'the body must be a JSON object');
  }
  return parseObject(schema, input, ({ path, message }) =>
    path ? `"${path}": ${message}` : message,
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
