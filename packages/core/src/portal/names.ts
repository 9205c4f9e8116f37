import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import { utf8 } from '../platform/bytes.js';

/*
 * How the portal names what its connections offer (docs/api.md §18): a connection by its
 * alias, a tool or prompt as `<alias>__<name>` in at most 64 characters of `[A-Za-z0-9_-]`,
 * the same in every session and after a restart.
 */

/** The separator between an alias and a server's own name. */
export const SEPARATOR = '__';

/** The most characters a portal name has (what clients accept as a tool name). */
export const MAX_NAME = 64;

const VALID = /^[A-Za-z0-9_-]{1,64}$/;
const INVALID_CHAR = /[^A-Za-z0-9_-]/g;

/** A short, stable digest of a text: 8 hex characters of its SHA-256. */
function digest(text: string): string {
  return bytesToHex(sha256(utf8(text))).slice(0, 8);
}

/**
 * The portal name of a server's tool or prompt. Kept as `<alias>__<name>` when that is
 * valid; otherwise its characters outside the alphabet become `_`, it is cut to fit, and
 * `-` and a digest of the whole original end it, so two names never meet.
 */
export function portalName(alias: string, name: string): string {
  const full = `${alias}${SEPARATOR}${name}`;
  if (VALID.test(full)) return full;
  const suffix = `-${digest(full)}`;
  return full.replace(INVALID_CHAR, '_').slice(0, MAX_NAME - suffix.length) + suffix;
}

/** A connection's path segment as an alias: characters outside the alphabet become `_`. */
function aliasText(text: string): string {
  const clean = text.replace(INVALID_CHAR, '_');
  return clean.length <= 32 && clean === text ? clean : `${clean.slice(0, 23)}-${digest(text)}`;
}

/**
 * The alias of each connection of a portal: its own (set on the connection) or its last
 * path segment; connections that would share one are named by their path below the
 * portal's prefix instead (`alice_linear`), so every alias is unique and depends only on
 * the connections themselves.
 *
 * @param connections `[id, alias set on it or undefined]` of every connection of the portal.
 * @param prefix The portal's prefix (a resource path).
 */
export function aliasesOf(
  connections: readonly (readonly [id: string, own: string | undefined])[],
  prefix: string,
): Map<string, string> {
  const wanted = new Map<string, string>();
  const count = new Map<string, number>();
  for (const [id, own] of connections) {
    const alias = own ?? aliasText(id.slice(id.lastIndexOf('/') + 1));
    wanted.set(id, alias);
    count.set(alias, (count.get(alias) ?? 0) + 1);
  }
  const aliases = new Map<string, string>();
  for (const [id, alias] of wanted) {
    if (count.get(alias) === 1 || alias === 'keyway') {
      aliases.set(id, alias === 'keyway' ? `keyway_${digest(id)}` : alias);
      continue;
    }
    const below = id.startsWith(`${prefix}/`) ? id.slice(prefix.length + 1) : id;
    aliases.set(id, aliasText(below.replaceAll('/', '_')));
  }
  return aliases;
}

/**
 * A resource's URI as the portal lists it: as the server wrote it, unless another
 * connection of the portal lists the same URI; then `keyway-portal://<alias>/<URI>`.
 */
export function portalUri(alias: string, uri: string, shared: boolean): string {
  return shared ? `keyway-portal://${alias}/${encodeURIComponent(uri)}` : uri;
}
