import { KeywayError } from '../contract/errors.js';

/** Longest token name (docs/api.md §3.2). */
export const MAX_TOKEN_NAME_LENGTH = 255;
/** Longest label of a token name (docs/api.md §3.2). */
export const MAX_TOKEN_LABEL_LENGTH = 64;

const LABEL = /^[A-Za-z0-9_-]+$/;
/** A whole valid name (its length checked apart): the labels' rule at once. */
const VALID_NAME = /^[A-Za-z0-9_-]{1,64}(?:\.[A-Za-z0-9_-]{1,64})*$/;

function invalidName(message: string): KeywayError {
  return new KeywayError('invalid_name', message, { details: [{ path: 'name', message }] });
}

/**
 * Validates a broker token name (docs/api.md §3.2): labels of 1–64 characters from
 * `A–Z a–z 0–9 _ -` joined by `.`, at most 255 characters in all. Case-sensitive.
 *
 * @throws {KeywayError} `invalid_name`.
 * @example
 * parseTokenName('alice.bot'); // 'alice.bot'
 * parseTokenName('alice..bot'); // throws: label 2 of "alice..bot" is empty
 */
export function parseTokenName(input: unknown): string {
  if (typeof input !== 'string') throw invalidName('"name" must be a string');
  if (input.length > MAX_TOKEN_NAME_LENGTH) {
    throw invalidName(
      `the name has ${input.length} characters; at most ${MAX_TOKEN_NAME_LENGTH} are allowed`,
    );
  }
  // Every request naming a token passes here: one match for a valid name, the labels one by
  // one only to say what is wrong with another.
  if (VALID_NAME.test(input)) return input;
  const shown = JSON.stringify(input);
  const labels = input.split('.');
  for (let i = 0; i < labels.length; i++) {
    const label = labels[i] as string;
    if (label === '') throw invalidName(`label ${i + 1} of ${shown} is empty`);
    if (label.length > MAX_TOKEN_LABEL_LENGTH) {
      throw invalidName(
        `label ${i + 1} of ${shown} is longer than ${MAX_TOKEN_LABEL_LENGTH} characters`,
      );
    }
    if (!LABEL.test(label)) {
      throw invalidName(`label ${i + 1} of ${shown} may only contain A-Z a-z 0-9 _ -`);
    }
  }
  return input;
}

/**
 * Whether `name` lies in the delegation namespace of `ancestor`, i.e. is a strict
 * descendant `ancestor.<suffix>` (docs/api.md §3.2). Ancestry is by name only.
 *
 * @example
 * isDescendantName('alice', 'alice.bot');  // true
 * isDescendantName('alice', 'alice2');     // false
 */
export function isDescendantName(ancestor: string, name: string): boolean {
  return (
    name.length > ancestor.length + 1 &&
    name.startsWith(ancestor) &&
    name.charCodeAt(ancestor.length) === 0x2e /* '.' */
  );
}

/** Token lifetime limits in seconds (SEED.md Limits). */
export const TOKEN_LIFETIME = { default: 3600, min: 60, max: 30 * 24 * 3600 } as const;

/**
 * Validates `expires_in`: an integer number of seconds from 60 to 2592000; `undefined`
 * gives the default of 3600. Any other type (a string, `null`, a fraction) is refused too.
 *
 * @throws {KeywayError} `invalid_lifetime`.
 */
export function parseLifetime(input: unknown): number {
  if (input === undefined) return TOKEN_LIFETIME.default;
  if (
    typeof input !== 'number' ||
    !Number.isInteger(input) ||
    input < TOKEN_LIFETIME.min ||
    input > TOKEN_LIFETIME.max
  ) {
    const message = `"expires_in" must be an integer from ${TOKEN_LIFETIME.min} to ${TOKEN_LIFETIME.max} seconds`;
    throw new KeywayError('invalid_lifetime', message, {
      details: [{ path: 'expires_in', message }],
    });
  }
  return input;
}

/**
 * The root of a token's delegation tree: the first label of its name (`ci` of `ci.a.b`).
 * Limits that a token could otherwise multiply by minting children count per tree.
 *
 * @example
 * delegationRoot('ci.jobs.42'); // 'ci'
 */
export function delegationRoot(name: string): string {
  const dot = name.indexOf('.');
  return dot === -1 ? name : name.slice(0, dot);
}
