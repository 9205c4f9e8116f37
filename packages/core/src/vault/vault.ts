import { hkdf } from '@noble/hashes/hkdf.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { CompactEncrypt, compactDecrypt, decodeProtectedHeader } from 'jose';
import { KeywayError } from '../contract/errors.js';
import { fromBase64Url, toBase64Url, utf8 } from '../platform/bytes.js';
import type { VaultStorage } from '../storage/contract.js';
import type { VaultEntryRecord, VaultKey, VaultWrite } from '../storage/record-types.js';

/** The header parameter that names the entry a ciphertext belongs to. */
const ENTRY_HEADER = 'kw_entry';

const decoder = new TextDecoder();

/** One key of the ring: its id (derived from the key, not secret) and its bytes. */
interface RingKey {
  id: string;
  bytes: Uint8Array;
}

/**
 * Parses a key ring: base64url-encoded 32-byte keys, the first of which encrypts. A key's
 * id is the base64url of the first 9 bytes of its SHA-256, so ids are stable across
 * restarts and reveal nothing useful about the key.
 *
 * @throws {TypeError} naming the position of a malformed key (never its value).
 */
export function parseVaultKeys(keys: readonly string[]): RingKey[] {
  if (keys.length === 0) throw new TypeError('"vaultKeys" must contain at least one key');
  const ring = keys.map((text, i) => {
    const bytes = typeof text === 'string' ? fromBase64Url(text.trim()) : null;
    if (bytes === null || bytes.length !== 32) {
      throw new TypeError(`"vaultKeys" entry ${i + 1} is not a base64url-encoded 32-byte key`);
    }
    return { id: toBase64Url(sha256(bytes).subarray(0, 9)), bytes };
  });
  if (new Set(ring.map((key) => key.id)).size !== ring.length) {
    throw new TypeError('"vaultKeys" contains the same key twice');
  }
  return ring;
}

/**
 * A new random vault key, base64url-encoded, for `vaultKeys` / `KEYWAY_VAULT_KEYS`.
 *
 * @see docs/vault.md "Keys"
 */
export function generateVaultKey(): string {
  return toBase64Url(crypto.getRandomValues(new Uint8Array(32)));
}

/**
 * The vault key a broker uses when `vaultKeys` is not given: derived from the root key
 * with HKDF-SHA-256 under its own label, so it is never the key that tags broker tokens.
 * With it, a root key and a storage are all a broker needs. To rotate the root key without
 * losing the vault, first move to explicit keys: `vaultKeys: [generateVaultKey(),
 * deriveVaultKey(rootKey)]`, then `broker.vault.rewrap(broker.storage)`.
 *
 * @example
 * const keys = [generateVaultKey(), deriveVaultKey(process.env.KEYWAY_ROOT_KEY ?? '')];
 * @see docs/vault.md "Keys"; [RFC 5869](https://www.rfc-editor.org/rfc/rfc5869.html) (HKDF)
 */
export function deriveVaultKey(rootKey: string): string {
  return toBase64Url(hkdf(sha256, utf8(rootKey), utf8('keyway'), utf8('keyway vault key v1'), 32));
}

function entryName({ kind, key }: VaultKey): string {
  return `${kind}:${key}`;
}

function undecryptable(entry: VaultKey, cause?: unknown): KeywayError {
  // Integrity failure of stored data: the operator must look; the caller learns nothing.
  return new KeywayError(
    'internal_error',
    `vault entry ${entryName(entry)} could not be decrypted`,
    {
      cause,
    },
  );
}

/**
 * Envelope encryption for every secret Keyway keeps (docs/api.md §7): AES-256-GCM as a compact
 * JWE (`alg: dir`), under the first key of a ring; any key of the ring decrypts. The
 * protected header, which GCM authenticates, names the key (`kid`) and the entry
 * (`kw_entry`: kind and key), and decryption checks the entry: a ciphertext copied to
 * another row does not decrypt.
 *
 * @example
 * const vault = new Vault([generateVaultKey()]);
 * const write = await vault.seal({ kind: 'secret', key: 'acme/api-key' }, 's3cr3t');
 * await vault.open(write); // 's3cr3t'
 */
export class Vault {
  readonly #ring: RingKey[];
  /** Each ring key imported into WebCrypto once, not on every seal and open. */
  readonly #imported = new Map<string, Promise<CryptoKey>>();

  constructor(keys: readonly string[]) {
    this.#ring = parseVaultKeys(keys);
  }

  #cryptoKey(key: RingKey): Promise<CryptoKey> {
    let imported = this.#imported.get(key.id);
    if (imported === undefined) {
      imported = crypto.subtle.importKey(
        'raw',
        // parseVaultKeys decoded it into a fresh, plain ArrayBuffer.
        key.bytes as Uint8Array<ArrayBuffer>,
        { name: 'AES-GCM' },
        false,
        ['encrypt', 'decrypt'],
      );
      this.#imported.set(key.id, imported);
    }
    return imported;
  }

  /** Id of the key that encrypts new entries. */
  get activeKeyId(): string {
    return (this.#ring[0] as RingKey).id;
  }

  /** Encrypts a value for one entry under the active key. */
  async seal(entry: VaultKey, value: string): Promise<VaultWrite> {
    const key = this.#ring[0] as RingKey;
    const ciphertext = await new CompactEncrypt(utf8(value))
      .setProtectedHeader({
        alg: 'dir',
        enc: 'A256GCM',
        kid: key.id,
        [ENTRY_HEADER]: entryName(entry),
      })
      .encrypt(await this.#cryptoKey(key));
    return { kind: entry.kind, key: entry.key, ciphertext, keyId: key.id };
  }

  /**
   * Decrypts a stored entry.
   *
   * @throws {KeywayError} `internal_error` when no key of the ring fits, the ciphertext was
   *   altered, or it belongs to another entry.
   */
  async open(entry: VaultWrite | VaultEntryRecord): Promise<string> {
    let kid: unknown;
    try {
      kid = decodeProtectedHeader(entry.ciphertext).kid;
    } catch (cause) {
      throw undecryptable(entry, cause);
    }
    const key = this.#ring.find((candidate) => candidate.id === kid);
    if (key === undefined) throw undecryptable(entry);
    try {
      const { plaintext, protectedHeader } = await compactDecrypt(
        entry.ciphertext,
        await this.#cryptoKey(key),
        {
          keyManagementAlgorithms: ['dir'],
          contentEncryptionAlgorithms: ['A256GCM'],
        },
      );
      if (protectedHeader[ENTRY_HEADER] !== entryName(entry)) throw undecryptable(entry);
      return decoder.decode(plaintext);
    } catch (cause) {
      if (cause instanceof KeywayError) throw cause;
      throw undecryptable(entry, cause);
    }
  }

  /**
   * The keys that sealed entries of `storage` and that this ring does not hold, with how
   * many entries each sealed: entries no broker with this ring can open. Looks at the
   * entries not under the active key, at most `limit` of them: a ring that is the wrong one
   * altogether is found on the first page, and a vault in the middle of a re-wrap is not read
   * whole. Empty when every entry looked at can be opened.
   */
  async foreignKeys(storage: VaultStorage, limit = 1_000): Promise<Map<string, number>> {
    const foreign = new Map<string, number>();
    const held = new Set(this.#ring.map((key) => key.id));
    for await (const entry of this.#notUnderActiveKey(storage, 200, limit)) {
      if (!held.has(entry.keyId)) foreign.set(entry.keyId, (foreign.get(entry.keyId) ?? 0) + 1);
    }
    return foreign;
  }

  /**
   * Re-encrypts every entry not under the active key, in pages, with compare-and-set so a
   * concurrent write is never overwritten with an old value. Afterwards no entry needs an
   * older key, which can then leave the ring.
   *
   * @returns how many entries were re-encrypted.
   */
  async rewrap(storage: VaultStorage, pageSize = 200): Promise<number> {
    let moved = 0;
    for await (const entry of this.#notUnderActiveKey(storage, pageSize)) {
      const next = await this.seal(entry, await this.open(entry));
      if (await storage.replaceVaultCiphertext(entry.kind, entry.key, entry.ciphertext, next)) {
        moved++;
      }
    }
    return moved;
  }

  /**
   * The entries not under the active key, read `pageSize` at a time in (kind, key) order, at
   * most `limit` of them.
   */
  async *#notUnderActiveKey(
    storage: VaultStorage,
    pageSize: number,
    limit = Number.POSITIVE_INFINITY,
  ): AsyncGenerator<VaultEntryRecord> {
    let after: VaultKey | null = null;
    let seen = 0;
    while (seen < limit) {
      const size = Math.min(pageSize, limit - seen);
      const page = await storage.listVaultEntriesNotUnderKey(this.activeKeyId, after, size);
      yield* page;
      seen += page.length;
      const last = page[page.length - 1];
      if (page.length < size || last === undefined) return;
      after = { kind: last.kind, key: last.key };
    }
  }
}
