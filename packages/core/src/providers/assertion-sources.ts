import { decodeJwt } from 'jose';
import { z } from 'zod';
import { canonicalizeScopes, parseScope, setCoversPath } from '../auth/scope.js';
import { KeywayError } from '../contract/errors.js';
import { builtinModules } from '../platform/builtin.js';

/*
 * Where a `jwt_bearer` provider's assertions come from (docs/api.md §14, workload identity
 * federation): sources the operator configures when the broker starts — a file (a
 * projected service-account token), a file of a directory, an environment variable, or a
 * function of the app — named by providers, read at each token request and never kept.
 * Only the operator chooses what is read: a provider names a source, never a path.
 */

/**
 * The providers a source's assertions may go to: scopes over provider ids (`acme/billing`
 * covers that id and those below it, `**` every one), as broker tokens' scopes are written.
 * A provider a broker token writes may name the source only when one of them covers its id;
 * a source without `providers` serves providers the root key wrote (or code declared) only.
 */
type Bound = { providers?: string[] };

/** A source of JWT assertions (`createBroker({ assertionSources })`). */
export type AssertionSource =
  | ({ file: string } & Bound)
  | ({ directory: string } & Bound)
  | ({ env: string } & Bound)
  | ({ read: () => string | Promise<string> } & Bound)
  | (() => string | Promise<string>);

const pathText = z.string().min(1).max(4096);
const providers = z
  .array(
    z
      .string()
      .min(1)
      .max(514)
      .refine((scope) => {
        try {
          parseScope(scope);
          return true;
        } catch {
          return false;
        }
      }, 'a scope over provider ids (docs/api.md §3.1)'),
  )
  .min(1)
  .max(32)
  .optional();
const reader = z.custom<() => string | Promise<string>>((value) => typeof value === 'function');

/** The `assertionSources` option: names to sources. */
export const AssertionSourcesSchema = z.record(
  z.string().regex(/^[a-z][a-z0-9_-]{0,63}$/, 'a source name: lower case letters, digits, _ and -'),
  z.union([
    z.strictObject({ file: pathText, providers }),
    z.strictObject({ directory: pathText, providers }),
    z.strictObject({
      env: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable'),
      providers,
    }),
    z.strictObject({ read: reader, providers }),
    reader,
  ]),
);

/**
 * Whether a provider a broker token writes may use the source: the source names providers
 * and one of them covers `providerId`.
 */
export function sourceServes(source: AssertionSource | undefined, providerId: string): boolean {
  if (source === undefined || typeof source === 'function' || source.providers === undefined)
    return false;
  return setCoversPath(canonicalizeScopes(source.providers), providerId);
}

/** A file a provider names in a `directory` source: one name, nothing that climbs out. */
export const ASSERTION_FILE = /^(?!\.{1,2}$)[A-Za-z0-9._-]{1,128}$/;

/** The longest assertion read; a longer one is not a JWT we send. */
const MAX_ASSERTION = 16 * 1024;
const COMPACT_JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/** Where a provider's assertion is read: its source, and a file of a `directory` source. */
export interface AssertionRef {
  source: string;
  file?: string | undefined;
  /** The provider was written with the root key (or declared in code): any source serves it. */
  root?: boolean | undefined;
}

/** Who the assertion is for: the provider, and the server it is sent to (RFC 7523 §3). */
export interface AssertionTarget {
  providerId: string;
  issuer: string;
  tokenEndpoint: string;
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
 * The `aud` of a compact JWT, as a list (RFC 7519 §4.1.3), without verifying anything: what
 * Keyway checks before it sends a workload's assertion anywhere.
 */
function audienceOf(jwt: string): string[] {
  try {
    const { aud } = decodeJwt(jwt);
    if (typeof aud === 'string') return [aud];
    return Array.isArray(aud) ? aud.filter((value) => typeof value === 'string') : [];
  } catch {
    return [];
  }
}

/**
 * The assertion of `ref` for `target`, read now: a compact JWT, surrounding whitespace
 * removed. It is read only for a provider the source serves (written with the root key, or
 * covered by the source's `providers`), and sent only when its `aud` names the server it goes
 * to — its issuer or its token endpoint (RFC 7523 §3) — so a provider pointed at another
 * server never receives a workload's JWT.
 *
 * @throws {KeywayError} `upstream_error` when the source is missing, not bound to the
 *   provider, unreadable, gives something that is not a JWT, or one for another audience
 *   (the value itself is never in the message).
 */
export async function readAssertion(
  sources: Readonly<Record<string, AssertionSource>>,
  ref: AssertionRef,
  target: AssertionTarget,
): Promise<string> {
  const source = sources[ref.source];
  if (source === undefined) throw failed(ref, 'no such source is configured');
  if (ref.root !== true && !sourceServes(source, target.providerId))
    throw failed(
      ref,
      `it does not serve provider ${JSON.stringify(target.providerId)} (its "providers" do not cover it, and the ` +
        `root key did not write the provider)`,
    );
  let text: string | undefined;
  try {
    if (typeof source === 'function') text = await source();
    else if ('read' in source) text = await source.read();
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
  const audience = audienceOf(value);
  if (!audience.includes(target.issuer) && !audience.includes(target.tokenEndpoint))
    throw failed(
      ref,
      `its "aud" names neither the authorization server ${target.issuer} nor its token endpoint, so it is not sent ` +
        `there`,
    );
  return value;
}

function globalEnv(): Record<string, string | undefined> {
  return (
    (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env ?? {}
  );
}
