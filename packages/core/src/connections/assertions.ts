import { z } from 'zod';
import { KeywayError } from '../contract/errors.js';
import { builtinModules } from '../platform/builtin.js';

/*
 * Where a `jwt_bearer` provider's assertions come from (docs/api.md §14, workload identity
 * federation): sources the operator configures when the broker starts — a file (a
 * projected service-account token), a file of a directory, an environment variable, or a
 * function of the app — named by providers, read at each token request and never kept.
 * Only the operator chooses what is read: a provider names a source, never a path.
 */

/** A source of JWT assertions (`createBroker({ assertionSources })`). */
export type AssertionSource =
  | { file: string }
  | { directory: string }
  | { env: string }
  | (() => string | Promise<string>);

const pathText = z.string().min(1).max(4096);

/** The `assertionSources` option: names to sources. */
export const AssertionSourcesSchema = z.record(
  z.string().regex(/^[a-z][a-z0-9_-]{0,63}$/, 'a source name: lower case letters, digits, _ and -'),
  z.union([
    z.strictObject({ file: pathText }),
    z.strictObject({ directory: pathText }),
    z.strictObject({
      env: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable'),
    }),
    z.custom<() => string | Promise<string>>((value) => typeof value === 'function'),
  ]),
);

/** A file a provider names in a `directory` source: one name, nothing that climbs out. */
export const ASSERTION_FILE = /^(?!\.{1,2}$)[A-Za-z0-9._-]{1,128}$/;

/** The longest assertion read; a longer one is not a JWT we send. */
const MAX_ASSERTION = 16 * 1024;
const COMPACT_JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/** Where a provider's assertion is read: its source, and a file of a `directory` source. */
export interface AssertionRef {
  source: string;
  file?: string | undefined;
}

async function readText(path: string): Promise<string> {
  const fs = builtinModules()?.('node:fs/promises') as
    | { readFile(path: string, encoding: 'utf8'): Promise<string> }
    | undefined;
  if (fs === undefined) throw new Error('this runtime has no file system');
  return fs.readFile(path, 'utf8');
}

function failed(ref: AssertionRef, why: string): KeywayError {
  return new KeywayError(
    'upstream_error',
    `the assertion source ${JSON.stringify(ref.source)} gave no assertion: ${why}`,
  );
}

/**
 * The assertion of `ref`, read now: a compact JWT, surrounding whitespace removed.
 *
 * @throws {KeywayError} `upstream_error` when the source is missing, unreadable or gives
 *   something that is not a JWT (the value itself is never in the message).
 */
export async function readAssertion(
  sources: Readonly<Record<string, AssertionSource>>,
  ref: AssertionRef,
): Promise<string> {
  const source = sources[ref.source];
  if (source === undefined) throw failed(ref, 'no such source is configured');
  let text: string | undefined;
  try {
    if (typeof source === 'function') text = await source();
    else if ('env' in source) text = globalEnv()[source.env];
    else if ('file' in source) text = await readText(source.file);
    else {
      if (ref.file === undefined || !ASSERTION_FILE.test(ref.file))
        throw failed(ref, 'the provider names no file of the directory');
      text = await readText(`${source.directory.replace(/\/$/, '')}/${ref.file}`);
    }
  } catch (error) {
    if (error instanceof KeywayError) throw error;
    throw failed(ref, 'it could not be read');
  }
  const value = typeof text === 'string' ? text.trim() : '';
  if (value.length > MAX_ASSERTION || !COMPACT_JWT.test(value))
    throw failed(ref, value === '' ? 'it is empty' : 'it is not a compact JWT');
  return value;
}

function globalEnv(): Record<string, string | undefined> {
  return (
    (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env ?? {}
  );
}
