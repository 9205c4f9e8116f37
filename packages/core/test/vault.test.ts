import { createCipheriv, randomBytes } from 'node:crypto';
import { memoryStorage } from '@keyway/store-memory';
import { describe, expect, it } from 'vitest';
import { fromBase64Url, toBase64Url } from '../src/platform/bytes.js';
import { generateVaultKey, parseVaultKeys, Vault } from '../src/vault/vault.js';

const KEY = generateVaultKey();
const OTHER = generateVaultKey();
const ENTRY = { kind: 'secret', key: 'acme/a' } as const;
const REFUSED = {
  code: 'internal_error',
  message: 'vault entry secret:acme/a could not be decrypted',
};

const encode = (value: unknown) => toBase64Url(new TextEncoder().encode(JSON.stringify(value)));
const idOf = (key: string) => (parseVaultKeys([key])[0] as { id: string }).id;

/**
 * A compact JWE built here with node:crypto, part by part (RFC 7516 §7.1), so that every
 * field can be made wrong while the tag still verifies.
 */
function jwe(
  plaintext: string,
  options: {
    header?: Record<string, unknown>;
    key?: string;
    encryptedKey?: string;
    ivLength?: number;
    tagLength?: number;
    extra?: string[];
  } = {},
): string {
  const header = options.header ?? {
    alg: 'dir',
    enc: 'A256GCM',
    kid: idOf(options.key ?? KEY),
    kw_entry: 'secret:acme/a',
  };
  const protectedHeader = encode(header);
  const iv = randomBytes(options.ivLength ?? 12);
  const cipher = createCipheriv(
    'aes-256-gcm',
    fromBase64Url(options.key ?? KEY) as Uint8Array,
    iv,
    { authTagLength: 16 },
  );
  cipher.setAAD(Buffer.from(protectedHeader, 'ascii'));
  const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  const tag = cipher.getAuthTag().subarray(0, options.tagLength ?? 16);
  return [
    protectedHeader,
    options.encryptedKey ?? '',
    toBase64Url(iv),
    toBase64Url(ciphertext),
    toBase64Url(tag),
    ...(options.extra ?? []),
  ].join('.');
}

const stored = (ciphertext: string) => ({ ...ENTRY, ciphertext, keyId: idOf(KEY) });

describe('the vault', () => {
  const vault = new Vault([KEY]);

  it('opens what another instance sealed, and what was built part by part', async () => {
    const write = await new Vault([KEY]).seal(ENTRY, 's3cr3t é ✓');
    expect(await vault.open(write)).toBe('s3cr3t é ✓');
    expect(await vault.open(stored(jwe('by hand')))).toBe('by hand');
    expect(await vault.open(stored(jwe('')))).toBe('');
  });

  it('opens with any key of the ring, the one the header names', async () => {
    const older = await new Vault([OTHER]).seal(ENTRY, 'under the old key');
    const ring = new Vault([KEY, OTHER]);
    expect(ring.activeKeyId).toBe(idOf(KEY));
    expect(await ring.open(older)).toBe('under the old key');
    await expect(vault.open(older)).rejects.toMatchObject(REFUSED);
  });

  it('refuses a ciphertext moved to another entry', async () => {
    const write = await vault.seal({ kind: 'secret', key: 'acme/b' }, 's3cr3t');
    await expect(vault.open({ ...write, key: 'acme/a' })).rejects.toMatchObject(REFUSED);
    const other = await vault.seal({ kind: 'client_secret', key: 'acme/a' }, 's3cr3t');
    await expect(vault.open({ ...other, kind: 'secret' })).rejects.toMatchObject(REFUSED);
  });

  it('refuses any altered part, and tells nothing of the plaintext', async () => {
    const { ciphertext } = await vault.seal(ENTRY, 's3cr3t-value');
    const parts = ciphertext.split('.');
    for (const at of [0, 2, 3, 4]) {
      const part = parts[at] as string;
      const changed = `${part.slice(0, 1) === 'A' ? 'B' : 'A'}${part.slice(1)}`;
      const altered = parts.map((p, i) => (i === at ? changed : p)).join('.');
      const error = await vault.open(stored(altered)).catch((caught: unknown) => caught);
      expect(error, `part ${at}`).toMatchObject(REFUSED);
      expect(JSON.stringify(error)).not.toContain('s3cr3t');
    }
  });

  it('refuses what the vault never writes, even with a tag that verifies', async () => {
    const kid = idOf(KEY);
    const header = { alg: 'dir', enc: 'A256GCM', kid, kw_entry: 'secret:acme/a' };
    const cases: [string, string][] = [
      ['another alg', jwe('x', { header: { ...header, alg: 'A256KW' } })],
      ['another enc', jwe('x', { header: { ...header, enc: 'A128GCM' } })],
      ['compressed', jwe('x', { header: { ...header, zip: 'DEF' } })],
      ['a critical extension', jwe('x', { header: { ...header, crit: ['kw_x'], kw_x: 1 } })],
      ['an encrypted key', jwe('x', { encryptedKey: 'AAAA' })],
      ['a 16-byte IV', jwe('x', { ivLength: 16 })],
      ['a tag cut to 12 bytes', jwe('x', { tagLength: 12 })],
      ['a tag cut to 4 bytes', jwe('x', { tagLength: 4 })],
      ['six parts', jwe('x', { extra: [''] })],
      ['four parts', jwe('x').split('.').slice(0, 4).join('.')],
      ['an unknown key', jwe('x', { key: OTHER })],
      ['no kid', jwe('x', { header: { ...header, kid: undefined } })],
      ['no entry', jwe('x', { header: { ...header, kw_entry: undefined } })],
      [
        'a header that is not an object',
        `${encode(['dir'])}.${jwe('x').split('.').slice(1).join('.')}`,
      ],
      ['a header that is not JSON', `e30x.${jwe('x').split('.').slice(1).join('.')}`],
      ['padding', `${jwe('x')}=`],
      ['empty', ''],
    ];
    for (const [name, ciphertext] of cases) {
      await expect(vault.open(stored(ciphertext)), name).rejects.toMatchObject(REFUSED);
    }
  });
});

describe('the keys a vault was sealed with', () => {
  /** Entries of kind `secret` named `names`, sealed by `vault`. */
  async function sealed(storage: ReturnType<typeof memoryStorage>, vault: Vault, names: string[]) {
    for (const name of names) {
      const write = await vault.seal({ kind: 'secret', key: name }, `value of ${name}`);
      await storage.putVaultEntry(write, 0);
    }
  }

  it('names the keys a ring does not hold, with their entries, and none it holds', async () => {
    const storage = memoryStorage();
    await sealed(storage, new Vault([KEY]), ['acme/a', 'acme/b']);
    await sealed(storage, new Vault([OTHER]), ['acme/c', 'acme/d', 'acme/e']);
    expect(await new Vault([KEY, OTHER]).foreignKeys(storage)).toEqual(new Map());
    expect(await new Vault([OTHER, KEY]).foreignKeys(storage)).toEqual(new Map());
    expect(await new Vault([KEY]).foreignKeys(storage)).toEqual(new Map([[idOf(OTHER), 3]]));
    const wrong = generateVaultKey();
    expect(await new Vault([wrong]).foreignKeys(storage)).toEqual(
      new Map([
        [idOf(KEY), 2],
        [idOf(OTHER), 3],
      ]),
    );
  });

  it('looks at no more entries than its limit, page after page', async () => {
    const storage = memoryStorage();
    const names = Array.from({ length: 450 }, (_, i) => `acme/${String(i).padStart(3, '0')}`);
    await sealed(storage, new Vault([OTHER]), names);
    const ring = new Vault([KEY]);
    expect(await ring.foreignKeys(storage)).toEqual(new Map([[idOf(OTHER), 450]]));
    expect(await ring.foreignKeys(storage, 401)).toEqual(new Map([[idOf(OTHER), 401]]));
    expect(await ring.foreignKeys(storage, 200)).toEqual(new Map([[idOf(OTHER), 200]]));
  });
});
