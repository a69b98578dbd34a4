import { SignatureError } from '../errors.js';
import { parseRfc3339 } from '../lib/rfc3339.js';
import { decodeBase64Url } from '../lib/base64.js';
import { trimOws, type HeaderValue } from './canonicalize.js';
import { PUBLIC_KEY_BYTES, SIGNATURE_BYTES } from './ed25519.js';

/** The three parts of an X-Signature header, decoded. */
export interface ParsedSignature {
  /** Ed25519 signature of the canonical request by the live key (64 bytes). */
  requestSignature: Buffer;
  /** The live public key (32 bytes). */
  livePublicKey: Buffer;
  /** Ed25519 signature of the live key's 32 raw bytes by the master key (64 bytes). */
  endorsement: Buffer;
  /**
   * `<live key> <endorsement>` as sent. Strict decoding gives every byte string exactly one text,
   * so this identifies the endorsement without copying bytes (the verifier's cache key).
   */
  endorsementText: string;
}

// Unpadded base64url lengths of 64 and 32 bytes.
const SIGNATURE_CHARS = 86;
const PUBLIC_KEY_CHARS = 43;

/**
 * Parses X-Signature: `<request signature> <live public key> <master signature>`, three unpadded
 * base64url parts separated by single spaces, decoding to 64, 32 and 64 bytes.
 *
 * @throws {SignatureError} `ERR_SIGNATURE_MISSING` or `ERR_SIGNATURE_MALFORMED`.
 * @example
 * ```ts
 * const { livePublicKey } = parseSignature(req.headers['x-signature']);
 * ```
 */
export function parseSignature(header: HeaderValue): ParsedSignature {
  const value = single(header);
  if (value === undefined || value === '') throw new SignatureError('ERR_SIGNATURE_MISSING', 'Missing X-Signature header');
  // Fixed lengths: the separators must sit exactly here, so no split and no scanning.
  if (value.length !== SIGNATURE_CHARS + 1 + PUBLIC_KEY_CHARS + 1 + SIGNATURE_CHARS
    || value.charCodeAt(SIGNATURE_CHARS) !== 0x20
    || value.charCodeAt(SIGNATURE_CHARS + 1 + PUBLIC_KEY_CHARS) !== 0x20) throw malformedSignature();
  const keyStart = SIGNATURE_CHARS + 1;
  const endorsementStart = keyStart + PUBLIC_KEY_CHARS + 1;
  const requestSignature = decodeBase64Url(value.slice(0, SIGNATURE_CHARS));
  const livePublicKey = decodeBase64Url(value.slice(keyStart, keyStart + PUBLIC_KEY_CHARS));
  const endorsement = decodeBase64Url(value.slice(endorsementStart));
  if (requestSignature?.length !== SIGNATURE_BYTES || livePublicKey?.length !== PUBLIC_KEY_BYTES || endorsement?.length !== SIGNATURE_BYTES) {
    throw malformedSignature();
  }
  return { requestSignature, livePublicKey, endorsement, endorsementText: value.slice(keyStart) };
}

// HTTP tokens (RFC 9110 section 5.6.2) in lowercase, what header names are on the wire, separated
// by single spaces: one pass over the text instead of one test per name.
const NAME_LIST = /^[a-z0-9!#$%&'*+.^_`|~-]+(?: [a-z0-9!#$%&'*+.^_`|~-]+)*$/;
const MAX_SIGNED_HEADERS = 64;

/**
 * Parses X-Signed-Headers: lowercase header names separated by single spaces. When the header is
 * repeated the first occurrence is the list (Node joins repeats with `", "`; names hold no comma,
 * so the first occurrence is the text before the first comma).
 *
 * A name listed twice is refused: the marketplace never does it, and allowing it would let a
 * short header make the canonical form, built before any signature check, arbitrarily large.
 *
 * @throws {SignatureError} `ERR_SIGNED_HEADERS_MISSING` or `ERR_SIGNED_HEADERS_MALFORMED`.
 * @example
 * ```ts
 * parseSignedHeaders('host date content-type'); // ['host', 'date', 'content-type']
 * ```
 */
export function parseSignedHeaders(header: HeaderValue): string[] {
  let value = typeof header === 'string' ? header : header?.[0];
  if (typeof header === 'string') {
    const comma = value!.indexOf(',');
    if (comma !== -1) value = value!.slice(0, comma);
  }
  value = value === undefined ? undefined : trimOws(value);
  if (value === undefined || value === '') throw new SignatureError('ERR_SIGNED_HEADERS_MISSING', 'Missing X-Signed-Headers header');
  const names = NAME_LIST.test(value) ? value.split(' ') : [];
  if (names.length === 0 || names.length > MAX_SIGNED_HEADERS || hasDuplicate(names)) {
    throw new SignatureError('ERR_SIGNED_HEADERS_MALFORMED', 'X-Signed-Headers must be distinct lowercase header names separated by single spaces');
  }
  return names;
}

/**
 * Parses the Date header as RFC 3339 (`2017-04-06T19:17:03Z`, fractions and offsets allowed).
 * Give it the same text that goes into the canonical form, so the checked date is the signed one.
 *
 * @throws {SignatureError} `ERR_DATE_MISSING` or `ERR_DATE_MALFORMED`.
 * @example
 * ```ts
 * parseDate('2017-04-06T19:17:03Z').toISOString(); // '2017-04-06T19:17:03.000Z'
 * ```
 */
export function parseDate(header: HeaderValue): Date {
  // Repeats are joined as in the canonical form, which no RFC 3339 parser accepts: one Date only.
  const value = typeof header === 'string' ? trimOws(header) : header === undefined || header.length === 0 ? undefined : header.map(trimOws).join(', ');
  if (value === undefined || value === '') throw new SignatureError('ERR_DATE_MISSING', 'Missing Date header');
  const millis = parseRfc3339(value);
  if (millis === undefined || !Number.isFinite(millis)) throw new SignatureError('ERR_DATE_MALFORMED', 'Date header must be an RFC 3339 date-time');
  return new Date(millis);
}

function hasDuplicate(names: readonly string[]): boolean {
  for (let i = 1; i < names.length; i++) if (names.lastIndexOf(names[i - 1]!) !== i - 1) return true;
  return false;
}

function single(header: HeaderValue): string | undefined {
  if (typeof header === 'string' || header === undefined) return header;
  if (header.length > 1) throw malformedSignature();
  return header[0];
}

function malformedSignature(): SignatureError {
  return new SignatureError('ERR_SIGNATURE_MALFORMED', 'X-Signature must be three base64url parts: request signature, live public key, master signature');
}
