import { asOptionsObject, optionalFunction, rejectUnknownKeys } from '../lib/options.js';
import { InvalidOptionsError } from '../errors.js';
import { encodeBase64Url } from '../lib/base64.js';
import { canonicalRequest } from '../signature/canonicalize.js';
import { decodeKey, generateKeyPair, publicKeyOf, signBytes } from './keys.js';

/** Options of {@link createSigner}. */
export interface SignerOptions {
  /** The master private key (32-byte seed, base64url or base64) whose public key the verifier trusts. */
  masterPrivateKey: string;
  /** The live signing key (seed). Default: a fresh random one, endorsed at creation. */
  livePrivateKey?: string;
  /** The clock for Date. Default `() => new Date()`. */
  now?: () => Date | number;
}

/** One request to sign. Send exactly these bytes, with exactly the returned headers. */
export interface SignInput {
  /** HTTP method (`PUT`). */
  method: string;
  /** Path and query as they will be sent (`/v1/resources/x?a=1`); percent-encoded; a `#fragment` is dropped, as clients drop it. */
  url: string;
  /** The Host header the server will receive (`127.0.0.1:3000`). */
  host: string;
  /**
   * Headers to send and sign, such as `content-type` or the callback headers. A `date` here
   * replaces the one from `now()` (to test stale requests). Names are lowercased.
   */
  headers?: Record<string, string>;
  /** The body; a string is sent as UTF-8. Default empty. */
  body?: Uint8Array | string;
}

/** A stand-in for the marketplace's signing chain. */
export interface Signer {
  /** The master public key (base64url): give it to the verifier as `masterKey`. */
  readonly masterPublicKey: string;
  /** The live public key (base64url) carried in every X-Signature. */
  readonly livePublicKey: string;
  /**
   * The headers to send: yours (lowercased), `host`, `date`, `x-signed-headers` (host, date, then
   * yours in order) and `x-signature`.
   */
  sign(input: SignInput): Record<string, string>;
}

const FACTORY = 'createSigner';
const KNOWN_OPTIONS = ['masterPrivateKey', 'livePrivateKey', 'now'] as const;
const TOKEN = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const TARGET = /^\/[\x21-\x7e]*$/;
const RESERVED = new Set(['host', 'x-signed-headers', 'x-signature']);

/**
 * A signer that produces requests exactly as the marketplace signs them (interface section 5.2):
 * the master key endorses the live public key's 32 raw bytes, the live key signs the canonical
 * request. Requests it signs verify with `createVerifier({ masterKey: signer.masterPublicKey })`.
 *
 * @throws {InvalidOptionsError} for a missing or malformed key option.
 * @example
 * ```ts
 * const master = generateKeyPair();
 * const signer = createSigner({ masterPrivateKey: master.privateKey });
 * const body = JSON.stringify({ id, product: 'generator', plan: 'low', region: 'aws::us-east-1' });
 * const headers = signer.sign({ method: 'PUT', url: `/v1/resources/${id}`, host: '127.0.0.1:3000', headers: { 'content-type': 'application/json' }, body });
 * await fetch(`http://127.0.0.1:3000/v1/resources/${id}`, { method: 'PUT', headers, body });
 * ```
 */
export function createSigner(options: SignerOptions): Signer {
  const opts = asOptionsObject(FACTORY, options);
  rejectUnknownKeys(FACTORY, opts, KNOWN_OPTIONS);
  const masterSeed = readKey(opts.masterPrivateKey, 'masterPrivateKey', true)!;
  const liveText = readKey(opts.livePrivateKey, 'livePrivateKey', false) ?? generateKeyPair().privateKey;
  const liveSeed = decodeKey(liveText, 'livePrivateKey');
  const now = optionalFunction<() => Date | number>(FACTORY, opts, 'now') ?? (() => Date.now());

  const masterPublicKey = publicKeyOf(masterSeed);
  const livePublicKey = publicKeyOf(liveText);
  const endorsement = encodeBase64Url(signBytes(decodeKey(livePublicKey, 'livePublicKey'), decodeKey(masterSeed, 'masterPrivateKey')));

  function sign(input: SignInput): Record<string, string> {
    const method = input.method;
    if (typeof method !== 'string' || !TOKEN.test(method)) throw new TypeError('sign: method must be an HTTP method such as "PUT"');
    const hash = input.url.indexOf('#');
    const url = hash === -1 ? input.url : input.url.slice(0, hash);
    if (!TARGET.test(url)) throw new TypeError('sign: url must be a path starting with "/", percent-encoded (no spaces or non-ASCII)');
    if (typeof input.host !== 'string' || !/^[\x21-\x7e]+$/.test(input.host)) throw new TypeError('sign: host must be the Host header value, such as "127.0.0.1:3000"');

    const given: Record<string, string> = {};
    for (const [rawName, value] of Object.entries(input.headers ?? {})) {
      const name = rawName.toLowerCase();
      if (!TOKEN.test(name) || RESERVED.has(name) || Object.hasOwn(given, name)) {
        throw new TypeError(`sign: header "${rawName}" cannot be set here (host is the "host" field; x-signed-headers and x-signature are computed; names must be distinct)`);
      }
      if (typeof value !== 'string' || !FIELD_VALUE.test(value)) throw new TypeError(`sign: header "${name}" must be a string HTTP can carry (no line breaks, ISO-8859-1 only)`);
      given[name] = value;
    }
    const date = given.date ?? formatDate(now());
    delete given.date;

    const names = ['host', 'date', ...Object.keys(given)];
    const headers: Record<string, string> = { host: input.host, date, ...given, 'x-signed-headers': names.join(' ') };
    const body = typeof input.body === 'string' ? Buffer.from(input.body, 'utf8') : input.body;
    const canonical = canonicalRequest({ method, url, headers, body, signedHeaders: names });
    headers['x-signature'] = `${encodeBase64Url(signBytes(canonical, liveSeed))} ${livePublicKey} ${endorsement}`;
    return headers;
  }

  return { masterPublicKey, livePublicKey, sign };
}

/** RFC 3339 in UTC to the second, as the marketplace writes Date (`2017-04-06T19:17:03Z`). */
function formatDate(now: Date | number): string {
  const date = typeof now === 'number' ? new Date(now) : now;
  return `${date.toISOString().slice(0, 19)}Z`;
}

function readKey(value: unknown, key: string, required: boolean): string | undefined {
  if (value === undefined && !required) return undefined;
  try {
    if (typeof value !== 'string') throw new TypeError('not a string');
    decodeKey(value, key);
    return value.trim();
  } catch {
    throw new InvalidOptionsError(`${FACTORY}: option "${key}" must be a 32-byte Ed25519 private key (seed) in base64url or base64, e.g. generateKeyPair().privateKey`);
  }
}
