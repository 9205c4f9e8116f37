import { KeywayError } from '../contract/errors.js';

/** Longest resource path, in Unicode code points after NFC normalization (SEED.md Limits). */
export const MAX_RESOURCE_PATH_LENGTH = 512;

/**
 * Cheap guard before normalizing: NFC composes at most three code points into one and a code
 * point takes at most two UTF-16 units, so anything longer than this cannot be valid.
 */
const MAX_RAW_UTF16_LENGTH = MAX_RESOURCE_PATH_LENGTH * 3 * 2;

/** `%2F`, `%5C`, `%2E` behind any number of `%25` layers, in any letter case (docs/api.md §2 rule 5). */
const ENCODED_STRUCTURE = /%(?:25)*(?:2f|5c|2e)/i;
// U+0000–U+001F, U+007F–U+009F (docs/api.md §2 rule 4).
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point.
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f-\u009f]/;
const ONLY_STARS = /^\*+$/;
/**
 * A path that needs no closer look: printable ASCII segments without `%`, `*` or `\`
 * (so nothing to normalize, decode or reserve), none empty. Only dot segments remain to
 * be refused, by {@link DOT_SEGMENT}.
 */
const PLAIN_PATH =
  /^[\x21-\x24\x26-\x29\x2b-\x2e\x30-\x5b\x5d-\x7e]+(?:\/[\x21-\x24\x26-\x29\x2b-\x2e\x30-\x5b\x5d-\x7e]+)*$/;
const DOT_SEGMENT = /(?:^|\/)\.\.?(?:\/|$)/;

/** The rule of docs/api.md §2 a path broke, named in the error's `details`. */
export type ResourcePathRule =
  | 'type'
  | 'length'
  | 'empty_segment'
  | 'dot_segment'
  | 'backslash'
  | 'control_character'
  | 'lone_surrogate'
  | 'encoded_structure'
  | 'reserved_segment'
  | 'percent_encoding';

function quote(value: string): string {
  return JSON.stringify(value.length > 64 ? `${value.slice(0, 64)}…` : value);
}

function invalid(rule: ResourcePathRule, message: string, field?: string): KeywayError {
  return new KeywayError('invalid_path', message, {
    details: [field === undefined ? { rule, message } : { path: field, rule, message }],
  });
}

/**
 * Why `path` (already NFC) is not a valid resource path, or `null` when it is valid.
 * Shared by {@link parseResourcePath} and the scope parser, which reports the same rules
 * under its own error code.
 */
export function resourcePathProblem(
  path: string,
): { rule: ResourcePathRule; message: string } | null {
  if (path.length === 0) return { rule: 'length', message: 'the path is empty' };
  if (!path.isWellFormed()) {
    return { rule: 'lone_surrogate', message: `${quote(path)} contains a lone surrogate` };
  }
  let codePoints = 0;
  for (const _ of path) codePoints++;
  if (codePoints > MAX_RESOURCE_PATH_LENGTH) {
    return {
      rule: 'length',
      message: `the path has ${codePoints} characters; at most ${MAX_RESOURCE_PATH_LENGTH} are allowed`,
    };
  }
  if (path.includes('\\')) {
    return { rule: 'backslash', message: `${quote(path)} contains a backslash` };
  }
  if (CONTROL_CHARACTER.test(path)) {
    return { rule: 'control_character', message: `${quote(path)} contains a control character` };
  }
  if (ENCODED_STRUCTURE.test(path)) {
    return {
      rule: 'encoded_structure',
      message: `${quote(path)} contains an encoded "/", "\\" or "."`,
    };
  }
  const segments = path.split('/');
  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i] as string;
    if (segment === '') {
      return { rule: 'empty_segment', message: `segment ${i + 1} of ${quote(path)} is empty` };
    }
    if (segment === '.' || segment === '..') {
      return {
        rule: 'dot_segment',
        message: `segment ${i + 1} of ${quote(path)} is a dot segment`,
      };
    }
    if (ONLY_STARS.test(segment)) {
      return {
        rule: 'reserved_segment',
        message: `segment ${i + 1} of ${quote(path)} is only "*", which is reserved for scopes`,
      };
    }
  }
  return null;
}

/**
 * Validates a resource path (docs/api.md §2) and returns its canonical NFC form, the only form
 * Keyway stores, compares or returns.
 *
 * @param field Where the value came from (e.g. `connection_id`), named in `details`.
 * @throws {KeywayError} `invalid_path`, naming the rule broken.
 * @example
 * parseResourcePath('acme/users/alice'); // 'acme/users/alice'
 * parseResourcePath('cafe\u0301');        // 'café' (composed)
 * parseResourcePath('a//b');              // throws: segment 2 of "a//b" is empty
 *
 * @see [docs/api.md §2](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#2-resource-paths)
 */
export function parseResourcePath(input: unknown, field?: string): string {
  if (typeof input !== 'string') {
    throw invalid('type', 'a resource path must be a string', field);
  }
  // Every authorization checks a path: the usual plain one is valid at one match, and
  // is its own NFC form.
  if (
    input.length <= MAX_RESOURCE_PATH_LENGTH &&
    PLAIN_PATH.test(input) &&
    !DOT_SEGMENT.test(input)
  ) {
    return input;
  }
  return checkedResourcePath(input, field);
}

/**
 * {@link parseResourcePath} without its shortcut for plain ASCII paths: every rule checked
 * one by one (exported for the test that holds the two to the same answers).
 */
export function checkedResourcePath(input: string, field?: string): string {
  if (input.length > MAX_RAW_UTF16_LENGTH) {
    throw invalid(
      'length',
      `the path is longer than ${MAX_RESOURCE_PATH_LENGTH} characters`,
      field,
    );
  }
  // A lone surrogate survives normalize(); check before so the message names it.
  const path = input.isWellFormed() ? input.normalize('NFC') : input;
  const problem = resourcePathProblem(path);
  if (problem !== null) throw invalid(problem.rule, problem.message, field);
  return path;
}

/**
 * Reads a resource path from the raw (still percent-encoded) rest of a URL path after a
 * route prefix: split on `/`, percent-decoded exactly once segment by segment, then checked
 * like any other path. Encoded structure is refused in the raw text too, so `a%2Fb` is never
 * read as `a/b` (docs/api.md §2).
 *
 * @throws {KeywayError} `invalid_path`.
 * @example
 * resourcePathFromUrl('acme/users/caf%C3%A9'); // 'acme/users/café'
 * resourcePathFromUrl('a%2Fb');                // throws invalid_path (encoded_structure)
 *
 * @see [docs/api.md §2](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#2-resource-paths) (paths in URLs)
 */
export function resourcePathFromUrl(raw: string): string {
  if (raw.length > MAX_RAW_UTF16_LENGTH * 3) {
    throw invalid('length', `the path is longer than ${MAX_RESOURCE_PATH_LENGTH} characters`);
  }
  // Without a `%` there is nothing to decode: the path is checked as it came (most are).
  if (!raw.includes('%')) return parseResourcePath(raw);
  if (ENCODED_STRUCTURE.test(raw)) {
    throw invalid('encoded_structure', `${quote(raw)} contains an encoded "/", "\\" or "."`);
  }
  let decoded: string;
  try {
    decoded = raw
      .split('/')
      .map((segment) => decodeURIComponent(segment))
      .join('/');
  } catch (cause) {
    throw new KeywayError('invalid_path', `${quote(raw)} has malformed percent-encoding`, {
      details: [{ rule: 'percent_encoding', message: 'malformed percent-encoding' }],
      cause,
    });
  }
  return parseResourcePath(decoded);
}

/**
 * Compares two strings by Unicode code point, the order of every list Keyway returns
 * (docs/api.md §1.4). JavaScript's default string order compares UTF-16 units, which puts
 * astral characters before U+E000–U+FFFF; this one does not.
 */
export function compareCodePoints(a: string, b: string): number {
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    // Both surrogates or both not: UTF-16 order equals code point order.
    const xs = x >= 0xd800 && x <= 0xdfff;
    const ys = y >= 0xd800 && y <= 0xdfff;
    if (xs === ys) return x - y;
    return xs ? 1 : -1;
  }
  return a.length - b.length;
}
