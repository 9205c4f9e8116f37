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

/** The value of each base64url character (RFC 4648 §5) by char code; -1 for the rest. */
const BASE64URL_VALUES = (() => {
  const values = new Int8Array(128).fill(-1);
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  for (let i = 0; i < alphabet.length; i++) values[alphabet.charCodeAt(i)] = i;
  return values;
})();

/** The 6-bit value of the character at `index`, or -1 outside the alphabet. */
function sextet(text: string, index: number): number {
  const code = text.charCodeAt(index);
  return code < 128 ? (BASE64URL_VALUES[code] as number) : -1;
}

/**
 * Decodes unpadded base64url (from `start`, default 0), or returns `null` for anything
 * that is not exactly the canonical encoding of some bytes: padding, other alphabets,
 * a lone trailing character, non-zero trailing bits (so each byte string has one
 * spelling). One pass, no intermediate strings: it runs on every token check.
 */
export function fromBase64Url(text: string, start = 0): Uint8Array | null {
  const length = text.length - start;
  const tail = length % 4;
  if (tail === 1) return null;
  const bytes = new Uint8Array(((length - tail) / 4) * 3 + (tail === 0 ? 0 : tail - 1));
  let at = start;
  let out = 0;
  for (const whole = start + length - tail; at < whole; at += 4) {
    const a = sextet(text, at);
    const b = sextet(text, at + 1);
    const c = sextet(text, at + 2);
    const d = sextet(text, at + 3);
    if ((a | b | c | d) < 0) return null;
    bytes[out++] = (a << 2) | (b >> 4);
    bytes[out++] = ((b & 15) << 4) | (c >> 2);
    bytes[out++] = ((c & 3) << 6) | d;
  }
  if (tail >= 2) {
    const a = sextet(text, at);
    const b = sextet(text, at + 1);
    if ((a | b) < 0) return null;
    bytes[out++] = (a << 2) | (b >> 4);
    if (tail === 2) return (b & 15) === 0 ? bytes : null;
    const c = sextet(text, at + 2);
    if (c < 0 || (c & 3) !== 0) return null;
    bytes[out] = ((b & 15) << 4) | (c >> 2);
  }
  return bytes;
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
 * when it rejects (an outbound deadline); `hold`, when given, is told each chunk's size before
 * it is kept, and ends the read when it throws.
 */
export async function readBounded(
  message: { headers: Headers; body: ReadableStream<Uint8Array> | null },
  limit: number,
  errors: BoundedReadErrors,
  aborted?: Promise<never>,
  hold?: (bytes: number) => void,
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
    try {
      hold?.(value.byteLength);
    } catch (error) {
      await reader.cancel().catch(() => {});
      throw error;
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
