import { SignatureError } from '../errors.js';

/**
 * The canonical form of a signed marketplace request (interface section 5.2): pure, no Express.
 *
 * ```text
 * lowercase(METHOD) SP PATH ["?" sorted raw query pairs joined by "&"] LF
 * name ": " value LF          for each name in X-Signed-Headers, in order
 * "x-signed-headers: " value LF
 * body bytes
 * ```
 *
 * Text is turned into bytes as ISO-8859-1, the way Node's HTTP parser turned the bytes on the wire
 * into the strings of `req.url` and `req.headers`: the canonical bytes are then the wire bytes.
 */

/** One header as Node hands it over: a string, an array for repeats, or absent. */
export type HeaderValue = string | readonly string[] | undefined;

/**
 * Request headers keyed by lowercase name, as in Node's `IncomingHttpHeaders` (`req.headers`) or
 * `req.headersDistinct`. Arrays are repeated headers in request order.
 */
export type RequestHeaders = Readonly<Record<string, HeaderValue>>;

/** What {@link canonicalRequest} needs: plain values, no framework objects. */
export interface CanonicalRequestInput {
  /** HTTP method in any case (`PUT`). */
  method: string;
  /** Path and raw query exactly as received (`/v1/resources/x?b=2&a=1`), still percent-encoded. */
  url: string;
  /** Request headers keyed by lowercase name. */
  headers: RequestHeaders;
  /** Body bytes exactly as received; absent means empty. */
  body?: Uint8Array | undefined;
  /** Names from X-Signed-Headers, lowercase, in the listed order (see `parseSignedHeaders`). */
  signedHeaders: readonly string[];
  /** Canonical value of `host` instead of the received Host header (proxies that rewrite Host). */
  hostOverride?: string | undefined;
}

// What HTTP allows in a field value (RFC 9110 section 5.5) and in a request target. Anything else
// cannot have come off the wire, and a line break in a value would make the form ambiguous.
const FIELD_VALUE_INVALID = /[^\t\x20-\x7e\x80-\xff]/;
const TARGET_INVALID = /[^\x21-\x7e\x80-\xff]/;
const METHOD = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;

/**
 * Builds the bytes the marketplace signed for a request, in one buffer.
 *
 * The query keeps every `&`-separated piece as sent (pairs without `=`, empty pieces, repeated
 * names) and sorts them bytewise; an empty query after `?` counts as no query. A `#` is an
 * ordinary byte here: clients do not send fragments, so one on the wire is part of what was signed.
 * Each header value loses surrounding spaces and tabs; repeats are joined with `", "` in request
 * order. A named header that is absent throws rather than being rendered empty.
 *
 * @throws {SignatureError} `ERR_SIGNED_HEADER_ABSENT` when a named header is missing;
 *   `ERR_SIGNATURE_MALFORMED` when the method, the URL or a value holds characters HTTP does not carry.
 * @example
 * ```ts
 * const bytes = canonicalRequest({
 *   method: 'PUT',
 *   url: '/v1/resources/abc?b=2&a=1',
 *   headers: { host: 'localhost:3000', date: '2017-04-06T19:17:03Z', 'x-signed-headers': 'host date' },
 *   body: Buffer.from('{}'),
 *   signedHeaders: ['host', 'date'],
 * });
 * // "put /v1/resources/abc?a=1&b=2\nhost: localhost:3000\ndate: 2017-04-06T19:17:03Z\nx-signed-headers: host date\n{}"
 * ```
 */
export function canonicalRequest(input: CanonicalRequestInput): Buffer {
  const { url, headers, hostOverride } = input;
  if (TARGET_INVALID.test(url) || !METHOD.test(input.method)) throw unsignable();

  const mark = url.indexOf('?');
  let text: string;
  if (mark === -1 || mark === url.length - 1) {
    text = `${input.method.toLowerCase()} ${mark === -1 ? url : url.slice(0, mark)}\n`;
  } else {
    const query = url.slice(mark + 1);
    // Every character is at most U+00FF (checked above), so sorting UTF-16 units sorts bytes.
    const sorted = query.includes('&') ? query.split('&').sort().join('&') : query;
    text = `${input.method.toLowerCase()} ${url.slice(0, mark)}?${sorted}\n`;
  }

  for (const name of input.signedHeaders) text += line(headers, name, hostOverride);
  text += line(headers, 'x-signed-headers', undefined);

  // ISO-8859-1: one byte per character, so the text's length is its size in bytes.
  const body = input.body;
  const size = text.length + (body === undefined ? 0 : body.length);
  const out = Buffer.allocUnsafe(size);
  const written = out.write(text, 0, 'latin1');
  if (body !== undefined) out.set(body, written);
  return out;
}

function line(headers: RequestHeaders, name: string, hostOverride: string | undefined): string {
  let value: string | undefined;
  if (name === 'host' && hostOverride !== undefined) {
    value = hostOverride;
  } else {
    // Own properties only: a listed name such as `constructor` must not find Object.prototype.
    const raw = Object.hasOwn(headers, name) ? headers[name] : undefined;
    if (typeof raw === 'string') {
      value = trimOws(raw);
    } else if (Array.isArray(raw) && raw.length > 0) {
      value = raw.length === 1 ? trimOws(String(raw[0])) : raw.map((v: unknown) => trimOws(String(v))).join(', ');
    }
  }
  if (value === undefined) throw new SignatureError('ERR_SIGNED_HEADER_ABSENT', `Signed header "${name}" is missing from the request`);
  if (FIELD_VALUE_INVALID.test(value)) throw unsignable();
  return `${name}: ${value}\n`;
}

/** Removes optional whitespace (spaces and tabs, RFC 9110 OWS) around a field value. */
export function trimOws(value: string): string {
  let start = 0;
  let end = value.length;
  while (start < end && isOws(value.charCodeAt(start))) start++;
  while (end > start && isOws(value.charCodeAt(end - 1))) end--;
  return start === 0 && end === value.length ? value : value.slice(start, end);
}

function isOws(code: number): boolean {
  return code === 0x20 || code === 0x09;
}

function unsignable(): SignatureError {
  return new SignatureError('ERR_SIGNATURE_MALFORMED', 'Request holds characters that HTTP cannot carry');
}
