/** Byte helpers shared by the crypto modules. Web APIs only. */

const encoder = new TextEncoder();

/** UTF-8 bytes of a string. */
export function utf8(value: string): Uint8Array {
  return encoder.encode(value);
}

/** Unpadded base64url (RFC 4648 §5) of bytes. */
export function toBase64Url(bytes: Uint8Array): string {
  let binary = '';
  for (let i = 0; i < bytes.length; i++) binary += String.fromCharCode(bytes[i] as number);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

const BASE64URL = /^[A-Za-z0-9_-]*$/;

/**
 * Decodes unpadded base64url, or returns `null` for anything that is not exactly the
 * canonical encoding of some bytes (padding, other alphabets, non-zero trailing bits).
 */
export function fromBase64Url(text: string): Uint8Array | null {
  if (!BASE64URL.test(text) || text.length % 4 === 1) return null;
  const binary = atob(text.replace(/-/g, '+').replace(/_/g, '/'));
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  // atob ignores trailing bits, so two spellings can decode to the same bytes.
  return toBase64Url(bytes) === text ? bytes : null;
}

/**
 * Compares two byte arrays in time that depends only on their lengths, never on where they
 * first differ: the defence against timing attacks on secrets and tags.
 */
export function timingSafeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= (a[i] as number) ^ (b[i] as number);
  return diff === 0;
}

/** How {@link readBounded} words its failures: each answer is thrown. */
export interface BoundedReadErrors {
  /** The body is larger than the limit (declared so, or found so while reading). */
  tooLarge: () => Error;
  /** The stream failed while being read (the peer went away). Default: its own error. */
  broken?: (cause: unknown) => Error;
}

/**
 * Reads a whole body of at most `limit` bytes without ever holding more than that: a
 * declared `Content-Length` over the limit is refused before reading, and reading stops
 * (and cancels the stream) at the first byte past it. `aborted`, when given, ends the read
 * when it rejects (an outbound deadline).
 */
export async function readBounded(
  message: { headers: Headers; body: ReadableStream<Uint8Array> | null },
  limit: number,
  errors: BoundedReadErrors,
  aborted?: Promise<never>,
): Promise<Uint8Array<ArrayBuffer>> {
  const declared = message.headers.get('content-length');
  if (declared !== null && Number(declared) > limit) {
    await message.body?.cancel().catch(() => {});
    throw errors.tooLarge();
  }
  if (message.body === null) return new Uint8Array(0);
  const reader = message.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    let chunk: ReadableStreamReadResult<Uint8Array>;
    try {
      chunk = await (aborted === undefined
        ? reader.read()
        : Promise.race([reader.read(), aborted]));
    } catch (cause) {
      await reader.cancel().catch(() => {});
      throw errors.broken === undefined ? cause : errors.broken(cause);
    }
    const { done, value } = chunk;
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      throw errors.tooLarge();
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return bytes;
}
