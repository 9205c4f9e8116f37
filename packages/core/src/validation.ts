import type { z } from 'zod';
import { KeywayError, type KeywayErrorDetail } from './errors.js';

/** Whether a value is a plain JSON object (not an array, not `null`). */
export function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Checks the shape of a request body against a zod schema: a JSON object, the right types,
 * no unknown fields, no missing required fields. The specific checks (paths, scopes, names,
 * lifetimes) come after, so a type error always wins (API.md §1.2 precedence).
 *
 * @throws {KeywayError} `invalid_request` with one `details` entry per issue.
 */
export function parseShape<T>(schema: z.ZodType<T>, input: unknown): T {
  if (!isJsonObject(input)) {
    throw new KeywayError('invalid_request', 'the body must be a JSON object');
  }
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const details: KeywayErrorDetail[] = result.error.issues.map((issue) => ({
    path: issue.path.map(String).join('.'),
    message: issue.message,
  }));
  const first = details[0] as KeywayErrorDetail;
  const where = first.path ? `"${first.path}": ` : '';
  throw new KeywayError('invalid_request', `${where}${first.message}`, { details });
}
