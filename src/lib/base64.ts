/**
 * Strict base64 helpers for keys and signatures. Node's own decoder skips characters it does not
 * know and ignores stray bits, so that two different header texts could decode to the same bytes;
 * here every byte string has exactly one accepted text per alphabet and anything else is refused.
 */

// Value of each ASCII character in either alphabet, -1 outside both. `-`/`_` and `+`/`/` share
// values so one table serves both alphabets; mixing them in one text is refused separately.
const VALUES = new Int8Array(128).fill(-1);
const STANDARD = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
for (let i = 0; i < 64; i++) VALUES[STANDARD.charCodeAt(i)] = i;
VALUES[0x2d] = 62; // '-'
VALUES[0x5f] = 63; // '_'

const URL_SAFE = /^[A-Za-z0-9_-]*$/;
const STANDARD_ONLY = /^[A-Za-z0-9+/]*$/;

/**
 * Decodes unpadded base64url (RFC 4648 section 5) strictly: only the URL-safe alphabet, no `=`,
 * no impossible length, and the unused low bits of the last character must be zero.
 * Returns `undefined` for anything else.
 *
 * @example
 * ```ts
 * decodeBase64Url('AQID'); // <Buffer 01 02 03>
 * decodeBase64Url('AQID='); // undefined
 * ```
 */
export function decodeBase64Url(text: string): Buffer | undefined {
  if (!URL_SAFE.test(text) || !canonicalTail(text)) return undefined;
  return Buffer.from(text, 'base64url');
}

/**
 * Decodes a key or signature written in base64url or standard base64, padded or not, strictly:
 * one alphabet per text, padding (when present) exactly to a multiple of four, zero unused bits.
 * Returns `undefined` for anything else.
 *
 * @example
 * ```ts
 * decodeBase64Any('PtISNzqQmQPBxNlUw3CdxsWczXbIwyExxlkRqZ7E690');  // 32 bytes
 * decodeBase64Any('PtISNzqQmQPBxNlUw3CdxsWczXbIwyExxlkRqZ7E690='); // the same 32 bytes
 * ```
 */
export function decodeBase64Any(text: string): Buffer | undefined {
  let end = text.length;
  while (end > 0 && text.charCodeAt(end - 1) === 0x3d /* = */) end--;
  const padding = text.length - end;
  if (padding > 2 || (padding > 0 && text.length % 4 !== 0)) return undefined;
  const body = padding === 0 ? text : text.slice(0, end);
  if (!(URL_SAFE.test(body) || STANDARD_ONLY.test(body)) || !canonicalTail(body)) return undefined;
  // Node's 'base64' decoder reads both alphabets; validity was settled above.
  return Buffer.from(body, 'base64');
}

/**
 * Encodes bytes as unpadded base64url, the form the marketplace uses in X-Signature and for keys.
 *
 * @example
 * ```ts
 * encodeBase64Url(Uint8Array.of(0xfb, 0xff)); // '-_8'
 * ```
 */
export function encodeBase64Url(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64url');
}

/** Unpadded length is possible and the last character carries no stray bits. */
function canonicalTail(text: string): boolean {
  const rest = text.length % 4;
  if (rest === 0) return true;
  if (rest === 1) return false;
  const last = VALUES[text.charCodeAt(text.length - 1)] ?? -1;
  // 2 characters carry 12 bits for 8 (4 unused); 3 carry 18 for 16 (2 unused).
  return last >= 0 && (last & (rest === 2 ? 0x0f : 0x03)) === 0;
}
