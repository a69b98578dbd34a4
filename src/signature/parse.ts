import { SignatureError } from '../errors.js';
import { parseRfc3339 } from '../lib/rfc3339.js';
import { trimOws, type HeaderValue } from './canonicalize.js';

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
const KEY_START = SIGNATURE_CHARS + 1;

// The whole header in one pass, as strictly as decoding each part would check it: the URL-safe
// alphabet only, single spaces, and a last character per part that leaves no stray bits (86
// characters carry 4 unused bits, so the last one is a multiple of 16: A, Q, g, w; 43 carry 2).
const SIGNATURE_TEXT = /^[A-Za-z0-9_-]{85}[AQgw] [A-Za-z0-9_-]{42}[AEIMQUYcgkosw048] [A-Za-z0-9_-]{85}[AQgw]$/;

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
  const value = signatureText(header);
  return {
    requestSignature: requestSignatureOf(value),
    livePublicKey: Buffer.from(value.slice(KEY_START, KEY_START + PUBLIC_KEY_CHARS), 'base64url'),
    endorsement: Buffer.from(value.slice(KEY_START + PUBLIC_KEY_CHARS + 1), 'base64url'),
    endorsementText: value.slice(KEY_START),
  };
}

/**
 * @internal X-Signature checked exactly as {@link parseSignature} checks it, without decoding: a
 * verifier that knows the endorsement (by its text) needs only the request signature's bytes.
 */
export function signatureText(header: HeaderValue): string {
  const value = single(header);
  if (value === undefined || value === '') throw new SignatureError('ERR_SIGNATURE_MISSING', 'Missing X-Signature header');
  if (!SIGNATURE_TEXT.test(value)) throw malformedSignature();
  return value;
}

/** @internal The request signature's 64 bytes, from a text {@link signatureText} accepted. */
export function requestSignatureOf(text: string): Buffer {
  return Buffer.from(text.slice(0, SIGNATURE_CHARS), 'base64url');
}

/** @internal `<live key> <endorsement>` of a text {@link signatureText} accepted. */
export function endorsementTextOf(text: string): string {
  return text.slice(KEY_START);
}

/** @internal The live public key (base64url) of a text {@link signatureText} accepted. */
export function livePublicKeyOf(text: string): string {
  return text.slice(KEY_START, KEY_START + PUBLIC_KEY_CHARS);
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
  if (typeof header !== 'string') return parseSignedHeaderList(header?.[0]);
  const comma = header.indexOf(',');
  return parseSignedHeaderList(comma === -1 ? header : header.slice(0, comma));
}

/**
 * @internal One occurrence of X-Signed-Headers, as it came: for callers that know the header was
 * sent once, where a comma is part of the (then malformed) list rather than a join.
 */
export function parseSignedHeaderList(occurrence: string | undefined): string[] {
  // The marketplace sends the same list on every request: the last one parsed is reused (a copy,
  // since the caller may keep or change it).
  if (occurrence !== undefined && occurrence === lastList.text) return lastList.names.slice();
  const value = occurrence === undefined ? undefined : trimOws(occurrence);
  if (value === undefined || value === '') throw new SignatureError('ERR_SIGNED_HEADERS_MISSING', 'Missing X-Signed-Headers header');
  const names = NAME_LIST.test(value) ? value.split(' ') : [];
  if (names.length === 0 || names.length > MAX_SIGNED_HEADERS || hasDuplicate(names)) {
    throw new SignatureError('ERR_SIGNED_HEADERS_MALFORMED', 'X-Signed-Headers must be distinct lowercase header names separated by single spaces');
  }
  lastList = { text: occurrence!, names: names.slice() };
  return names;
}

let lastList: { text: string | undefined; names: readonly string[] } = { text: undefined, names: [] };

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
  // Requests signed within the same second carry the same Date: the last one parsed is reused.
  if (value === lastDate.text) return new Date(lastDate.millis);
  const millis = parseRfc3339(value);
  if (millis === undefined || !Number.isFinite(millis)) throw new SignatureError('ERR_DATE_MALFORMED', 'Date header must be an RFC 3339 date-time');
  lastDate = { text: value, millis };
  return new Date(millis);
}

let lastDate: { text: string | undefined; millis: number } = { text: undefined, millis: 0 };

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
