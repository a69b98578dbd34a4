import { randomBytes } from 'node:crypto';
import type { RecordedRequest, RecordedResponse } from './types.js';

/** What the acceptance client needs of a signer (`createSigner(...)` from the test kit). */
export interface RequestSigner {
  sign(request: { method: string; url: string; headers?: Record<string, string>; body?: Uint8Array | string; host: string }): Record<string, string>;
}

/** One request and its answer, raw (for judging) and redacted (for the report). */
export interface Exchange {
  status: number;
  headers: Headers;
  /** The parsed JSON body, or undefined when the body is empty or not JSON. */
  json: unknown;
  text: string;
  request: RecordedRequest;
  response: RecordedResponse;
}

const BASE32 = '0123456789abcdefghjkmnpqrtuvwxyz';

/** A marketplace-style id: 18 random bytes in base32, 29 characters (gaps.md, "Identifiers"). */
export function newMarketplaceId(): string {
  const bytes = randomBytes(18);
  let bits = 0;
  let value = 0;
  let out = '';
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += BASE32[(value << (5 - bits)) & 31];
  return out;
}

/** Replaces the values of every `credentials` object (test secrets still) with their length. */
export function redactBody(body: unknown): unknown {
  if (Array.isArray(body)) return body.map(redactBody);
  if (typeof body !== 'object' || body === null) return body;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(body)) {
    if (key === 'credentials' && typeof value === 'object' && value !== null && !Array.isArray(value)) {
      out[key] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, typeof v === 'string' ? `<redacted: ${v.length} chars>` : v]));
    } else {
      out[key] = redactBody(value);
    }
  }
  return out;
}

/** The SSO code in a URL is a bearer secret until used: never show it. */
export function redactUrl(url: string): string {
  return url.replace(/([?&]code=)[^&]*/g, '$1<redacted>');
}

const SHOWN_RESPONSE_HEADERS = ['content-type', 'location', 'set-cookie', 'retry-after', 'www-authenticate'];

function recordResponse(status: number, headers: Headers, json: unknown, text: string): RecordedResponse {
  const shown: Record<string, string> = {};
  for (const name of SHOWN_RESPONSE_HEADERS) {
    if (name === 'set-cookie') {
      const cookies = headers.getSetCookie();
      // Session ids are secrets: show that a cookie was set and its attributes, never its value.
      if (cookies.length > 0) shown[name] = cookies.map((c) => c.replace(/^([^=;]*)=[^;]*/, '$1=<redacted>')).join(', ');
      continue;
    }
    const value = headers.get(name);
    if (value !== null) shown[name] = name === 'location' ? redactUrl(value) : value;
  }
  const recorded: RecordedResponse = { status, headers: shown };
  if (json !== undefined) recorded.body = redactBody(json);
  else if (text.length > 0) recorded.body = text.length > 300 ? `${text.slice(0, 300)}…` : text;
  return recorded;
}

function parseJson(text: string): unknown {
  if (text.length === 0) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** Options of one signed request. */
export interface SendOptions {
  /** Another signer (stale clock, rogue key) instead of the client's own. */
  signer?: RequestSigner;
  /** Send no signature headers at all. */
  unsigned?: boolean;
  /** Long-running support: send X-Callback-ID and X-Callback-URL. */
  callback?: { id: string; url: string };
  /** Sign these bytes but send `body` (a tampered request). */
  signedBody?: unknown;
}

/** Sends signed requests to a provider like the marketplace does, and records them for the report. */
export class ProviderClient {
  readonly base: URL;
  /** Called with the callback id of every request answered 202 (its callback is then owed). */
  onAccepted: ((callbackId: string) => void) | undefined;

  constructor(baseUrl: string, private readonly signer: RequestSigner, private readonly timeoutMs: number) {
    const url = new URL(baseUrl);
    // Paths are written with their /v1 prefix; accept a base URL given with or without it.
    url.pathname = url.pathname.replace(/\/+$/, '').replace(/\/v1$/, '');
    url.search = '';
    url.hash = '';
    this.base = url;
  }

  /** The absolute URL of a provider path such as `/v1/resources/x`. */
  urlOf(path: string): URL {
    return new URL(`${this.base.href.replace(/\/+$/, '')}${path}`);
  }

  /** A signed request; `body` is sent as JSON. */
  async send(method: string, path: string, body?: unknown, options: SendOptions = {}): Promise<Exchange> {
    const target = this.urlOf(path);
    const bytes = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const headers: Record<string, string> = { accept: 'application/json' };
    if (bytes !== undefined) headers['content-type'] = 'application/json';
    if (options.callback !== undefined) {
      headers['x-callback-id'] = options.callback.id;
      headers['x-callback-url'] = options.callback.url;
    }
    let sent: Record<string, string>;
    if (options.unsigned === true) {
      sent = { ...headers, date: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'), host: target.host };
    } else {
      const signedBytes = options.signedBody === undefined ? bytes : Buffer.from(JSON.stringify(options.signedBody));
      sent = (options.signer ?? this.signer).sign({
        method,
        url: `${target.pathname}${target.search}`,
        headers,
        ...(signedBytes === undefined ? {} : { body: signedBytes }),
        host: target.host,
      });
    }
    const request: RecordedRequest = {
      method,
      url: target.href,
      headers: Object.fromEntries(Object.entries(sent).map(([k, v]) => [k.toLowerCase(), k.toLowerCase() === 'x-signature' ? '<redacted>' : v])),
      ...(body === undefined ? {} : { body: redactBody(body) }),
    };
    const response = await fetch(target, {
      method,
      headers: sent,
      ...(bytes === undefined ? {} : { body: bytes }),
      redirect: 'manual',
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    if (response.status === 202 && options.callback !== undefined) this.onAccepted?.(options.callback.id);
    const text = await response.text();
    const json = parseJson(text);
    return { status: response.status, headers: response.headers, json, text, request, response: recordResponse(response.status, response.headers, json, text) };
  }

  /** An unsigned browser-like GET (single sign-on), never following redirects. */
  async browse(url: URL, cookie?: string): Promise<Exchange> {
    const headers: Record<string, string> = { accept: 'text/html,application/json' };
    if (cookie !== undefined) headers.cookie = cookie;
    const response = await fetch(url, { method: 'GET', headers, redirect: 'manual', signal: AbortSignal.timeout(this.timeoutMs) });
    const text = await response.text();
    const json = parseJson(text);
    const request: RecordedRequest = { method: 'GET', url: redactUrl(url.href), headers: cookie === undefined ? { accept: headers.accept ?? '' } : { accept: headers.accept ?? '', cookie: '<redacted>' } };
    return { status: response.status, headers: response.headers, json, text, request, response: recordResponse(response.status, response.headers, json, text) };
  }
}
