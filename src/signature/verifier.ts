import type { KeyObject } from 'node:crypto';
import { InvalidOptionsError, SignatureError } from '../errors.js';
import { asOptionsObject, optionalFunction, optionalPositiveNumber, rejectUnknownKeys } from '../lib/options.js';
import { decodeBase64Any, encodeBase64Url } from '../lib/base64.js';
import { canonicalRequest, type HeaderValue, type RequestHeaders } from './canonicalize.js';
import { importPublicKey, isWeakPublicKey, PUBLIC_KEY_BYTES, verifyEd25519, verifyEd25519Then } from './ed25519.js';
import { endorsementTextOf, livePublicKeyOf, parseDate, parseSignature, parseSignedHeaderList, parseSignedHeaders, requestSignatureOf, signatureText } from './parse.js';

/** The marketplace's production master public key (base64url), the default of `masterKey`. */
export const PRODUCTION_MASTER_PUBLIC_KEY = 'PtISNzqQmQPBxNlUw3CdxsWczXbIwyExxlkRqZ7E690';
/** Allowed distance between a request's Date and the verifier's clock: 5 minutes (interface section 8). */
export const DEFAULT_TOLERANCE_MS = 300_000;
/** Endorsed live keys remembered by default. */
export const DEFAULT_ENDORSEMENT_CACHE_SIZE = 1024;

/** Options of {@link createVerifier}. Every one is optional. */
export interface VerifierOptions {
  /** Master public key, 32 bytes in base64url or base64 (padded or not). Default {@link PRODUCTION_MASTER_PUBLIC_KEY}. */
  masterKey?: string | Uint8Array;
  /** The clock. Default `() => new Date()`. */
  now?: () => Date | number;
  /** Largest accepted distance between Date and `now()`, either way, in ms. Default 300 000; `0` means exact. */
  toleranceMs?: number;
  /**
   * The Host (or Hosts) the marketplace addresses (`api.example.com` or `host:port`). A signature is
   * accepted only for one of them: a request signed for another provider's Host is refused even when
   * it arrives with that Host header. When the received Host is listed, it is the one verified;
   * otherwise (a proxy rewrote Host) each listed host is tried. Unset, the received Host is trusted
   * as signed (a warning is logged at start-up). At most 16 hosts.
   */
  publicHost?: string | readonly string[];
  /** How many endorsed live keys to remember (LRU). Default 1024; `0` verifies the endorsement every time. */
  endorsementCacheSize?: number;
}

/** A request to verify, framework-free. */
export interface SignedRequest {
  /** HTTP method (`PUT`). */
  method: string;
  /** Path and raw query exactly as on the wire (`req.originalUrl` in Express). */
  url: string;
  /** Headers keyed by lowercase name, arrays for repeats (`req.headers` or `req.headersDistinct`). */
  headers: RequestHeaders;
  /**
   * Body bytes exactly as received; absent means empty. A string is taken as its UTF-8 bytes
   * (serverless platforms hand bodies as strings); any other type throws a TypeError.
   */
  body?: Uint8Array | string;
}

/** What a successful verification established. */
export interface VerifiedRequest {
  /** The live key that signed the request (base64url). */
  livePublicKey: string;
  /** The headers the signature covers, as listed in X-Signed-Headers. */
  signedHeaders: string[];
  /** The request's Date. */
  date: Date;
}

/** What {@link Verifier.checkHeaders} established: the signature chain and a fresh Date. */
export interface HeaderCheck {
  /** Verifies the request signature over the checked request and `body` (the Date is checked again). */
  verify(body: Uint8Array | string): Promise<VerifiedRequest>;
}

/** Verifies marketplace request signatures; see {@link createVerifier}. */
export interface Verifier {
  /**
   * Resolves when the request carries a valid signature chain and a fresh Date; rejects with a
   * {@link SignatureError} (status 401, stable `code`, safe message) otherwise.
   */
  verify(request: SignedRequest): Promise<VerifiedRequest>;
  /**
   * The checks that need no body: X-Signature present and well-formed, X-Signed-Headers, a fresh
   * Date and an endorsed live key. Run it before reading a body so that unsigned or stale requests
   * are refused before their bytes are buffered, then finish with the answer's `verify(body)`,
   * which does not parse or endorse again.
   */
  checkHeaders(request: Omit<SignedRequest, 'body'>): Promise<HeaderCheck>;
  /** The master public key in use (base64url). */
  readonly masterPublicKey: string;
  /** How many endorsed live keys are cached now (never more than `endorsementCacheSize`). */
  cachedEndorsements(): number;
}

const FACTORY = 'createVerifier';
const KNOWN_OPTIONS = ['masterKey', 'now', 'toleranceMs', 'publicHost', 'endorsementCacheSize'] as const;
const HOST = /^[\x21-\x7e]+$/;
const MAX_PUBLIC_HOSTS = 16;

// Operator-only detail of a refusal (never sent): why it probably failed and what to change.
const hints = new WeakMap<Error, SignatureHint>();

/** What the log line of a refused signature carries besides its code. */
export interface SignatureHint {
  /** What to check, for the operator reading the log. */
  hint: string;
  /** `ERR_DATE_STALE`: the request's Date minus this server's clock, in ms. */
  dateOffsetMs?: number;
}

/**
 * The operator hint attached to a refusal by a verifier from {@link createVerifier}, if any. For
 * logs only: it may mention configuration, so it never goes into a response.
 */
export function signatureHint(error: unknown): SignatureHint | undefined {
  return typeof error === 'object' && error !== null ? hints.get(error as Error) : undefined;
}

function withHint(error: SignatureError, hint: SignatureHint): SignatureError {
  hints.set(error, hint);
  return error;
}

/**
 * Creates a verifier for requests signed by the marketplace (interface section 5.2): X-Signature
 * carries the request signature, the live public key and the master key's signature of that key.
 *
 * The master key is imported once. An endorsed live key is remembered in a bounded LRU cache keyed
 * by the key and its endorsement, so a steady stream costs one Ed25519 verification per request.
 * Only successful endorsements enter the cache: forging an entry needs the master key, so an
 * attacker can neither poison it nor churn it cheaply. Verifications run on libuv's thread pool.
 *
 * @throws {InvalidOptionsError} at construction for an unknown option, a bad key or a negative tolerance.
 * @example
 * ```ts
 * const verifier = createVerifier({ masterKey: process.env.MASTER_PUBLIC_KEY });
 * const { livePublicKey } = await verifier.verify({ method: 'PUT', url: '/v1/resources/abc', headers, body });
 * ```
 */
export function createVerifier(options: VerifierOptions = {}): Verifier {
  const opts = asOptionsObject(FACTORY, options);
  rejectUnknownKeys(FACTORY, opts, KNOWN_OPTIONS);
  const masterRaw = readMasterKey(opts.masterKey);
  const masterKey = importPublicKey(masterRaw);
  const now = optionalFunction<() => Date | number>(FACTORY, opts, 'now') ?? (() => Date.now());
  const toleranceMs = optionalPositiveNumber(FACTORY, opts, 'toleranceMs', { allowZero: true }) ?? DEFAULT_TOLERANCE_MS;
  const publicHosts = readPublicHost(opts.publicHost);
  const isProduction = encodeBase64Url(masterRaw) === PRODUCTION_MASTER_PUBLIC_KEY;
  const cacheSize = readCacheSize(opts.endorsementCacheSize);
  const cache = new EndorsementCache(cacheSize);
  // Endorsement checks in progress. When the marketplace switches to a new live key, every request
  // in flight carries it: they wait for one check instead of each verifying the endorsement again.
  // Entries live only while a check runs, so the map is bounded by the requests in flight.
  const checking = new Map<string, Promise<EndorsementOutcome>>();

  async function checkEndorsement(signature: string, endorsementText: string): Promise<EndorsementOutcome> {
    const { livePublicKey, endorsement } = parseSignature(signature);
    if (isWeakPublicKey(livePublicKey) || !(await verifyEd25519(livePublicKey, masterKey, endorsement))) {
      return { key: undefined, cause: undefined };
    }
    let key: KeyObject;
    try {
      key = importPublicKey(livePublicKey);
    } catch (error) {
      return { key: undefined, cause: error };
    }
    cache.set(endorsementText, key);
    return { key, cause: undefined };
  }

  /** The live key once its endorsement is verified; the caller has looked in the cache. */
  async function endorsedKey(signature: string, endorsementText: string): Promise<KeyObject> {
    let check = checking.get(endorsementText);
    if (check === undefined) {
      check = checkEndorsement(signature, endorsementText);
      // With the cache off, every request checks its own endorsement, as documented.
      if (cacheSize > 0) {
        checking.set(endorsementText, check);
        const forget = () => checking.delete(endorsementText);
        check.then(forget, forget);
      }
    }
    const { key, cause } = await check;
    if (key === undefined) {
      const error = new SignatureError('ERR_ENDORSEMENT_INVALID', 'Live public key is not endorsed by the master key', cause === undefined ? undefined : { cause });
      throw withHint(error, {
        hint: isProduction
          ? 'the live key is not endorsed by the production master key: is this a test marketplace? Set masterKey (MASTER_PUBLIC_KEY) to its master public key'
          : 'the live key is not endorsed by the configured masterKey: is it the master public key of the marketplace sending these requests?',
      });
    }
    return key;
  }

  /**
   * The checks that need no body. Synchronous when the endorsement is cached (the steady state):
   * the cache is keyed by the endorsement's text, so a known one is neither decoded nor verified.
   * `onceEach`: every header was sent once, so a string is one occurrence, never a join of several.
   */
  function checkSigned(headers: RequestHeaders, onceEach: boolean): Checked | Promise<Checked> {
    const signature = signatureText(header(headers, 'x-signature'));
    const listed = header(headers, 'x-signed-headers');
    const signedHeaders = onceEach && typeof listed === 'string' ? parseSignedHeaderList(listed) : parseSignedHeaders(listed);
    if (!signedHeaders.includes('date') || !signedHeaders.includes('host')) {
      throw new SignatureError('ERR_REQUIRED_HEADER_UNSIGNED', 'X-Signed-Headers must include date and host');
    }
    const date = parseDate(header(headers, 'date'));
    checkFresh(date);
    const endorsementText = endorsementTextOf(signature);
    const liveKey = cache.get(endorsementText);
    if (liveKey !== undefined) return { signature, signedHeaders, date, liveKey };
    return endorsedKey(signature, endorsementText).then((key) => ({ signature, signedHeaders, date, liveKey: key }));
  }

  function checkFresh(date: Date): void {
    const clock = now();
    const offset = date.getTime() - (typeof clock === 'number' ? clock : clock.getTime());
    // Written so that a NaN from a broken clock fails closed.
    if (!(Math.abs(offset) <= toleranceMs)) {
      throw withHint(new SignatureError('ERR_DATE_STALE', 'Request Date is too far from the current time'), {
        hint: Number.isFinite(offset)
          ? `the request Date is ${Math.round(Math.abs(offset) / 1000)} s ${offset > 0 ? 'ahead of' : 'behind'} this server's clock (tolerance ${toleranceMs} ms): check this host's clock (NTP)`
          : 'the verifier clock returned no valid time',
        dateOffsetMs: offset,
      });
    }
  }

  /** The request signature over the body, answered through `done` (no promise per request). */
  function verifyChecked(request: Omit<SignedRequest, 'body'>, checked: Checked, body: Uint8Array | undefined, done: VerifyDone): void {
    const received = single(header(request.headers, 'host'));
    // Host binding: with publicHost set, the signature must be for one of those hosts.
    const listed = received === undefined ? undefined : publicHosts?.find((host) => host.toLowerCase() === received.toLowerCase());
    const attempt: Attempt = {
      request, checked, body, done, received, listed,
      // Signed for a listed Host, or any Host without publicHost: one candidate, else each listed one.
      candidates: publicHosts === undefined || listed !== undefined ? undefined : publicHosts,
      index: 0,
      signature: requestSignatureOf(checked.signature),
    };
    tryHost(attempt);
  }

  function tryHost(attempt: Attempt): void {
    const { request, checked, candidates } = attempt;
    const hostOverride = candidates === undefined ? attempt.listed === undefined ? undefined : attempt.received : candidates[attempt.index];
    let data: Buffer;
    try {
      data = canonicalRequest({ method: request.method, url: request.url, headers: request.headers, body: attempt.body, signedHeaders: checked.signedHeaders, hostOverride });
    } catch (error) {
      attempt.done(error);
      return;
    }
    verifyEd25519Then(data, checked.liveKey, attempt.signature, (valid) => {
      if (valid) {
        attempt.done(undefined, { livePublicKey: livePublicKeyOf(checked.signature), signedHeaders: checked.signedHeaders, date: checked.date });
      } else if (candidates !== undefined && ++attempt.index < candidates.length) {
        tryHost(attempt);
      } else {
        attempt.done(withHint(new SignatureError('ERR_REQUEST_SIGNATURE_INVALID', 'Request signature does not match the request'), {
          hint: mismatchHint(request.headers, attempt.received, publicHosts, attempt.listed),
        }));
      }
    });
  }

  /** The body part after checkHeaders: the body may have taken a while to arrive, so the Date must still be fresh. */
  function finish(request: Omit<SignedRequest, 'body'>, checked: Checked, body: unknown, done: VerifyDone): void {
    let bytes: Uint8Array | undefined;
    try {
      checkFresh(checked.date);
      bytes = bodyBytes(body);
    } catch (error) {
      done(error);
      return;
    }
    verifyChecked(request, checked, bytes, done);
  }

  async function verify(request: SignedRequest): Promise<VerifiedRequest> {
    const checked = await checkSigned(request.headers, false);
    const body = bodyBytes(request.body);
    return new Promise((resolve, reject) => verifyChecked(request, checked, body, (error, verified) => (verified === undefined ? reject(error) : resolve(verified))));
  }

  const verifier: Verifier & { [VERIFIER_INTERNALS]: VerifierInternals } = {
    verify,
    checkHeaders: async (request) => {
      const checked = await checkSigned(request.headers, false);
      return {
        verify: (body) => new Promise((resolve, reject) => finish(request, checked, body, (error, verified) => (verified === undefined ? reject(error) : resolve(verified)))),
      };
    },
    masterPublicKey: encodeBase64Url(masterRaw),
    cachedEndorsements: () => cache.size,
    [VERIFIER_INTERNALS]: { check: checkSigned, finish },
  };
  return verifier;
}

/**
 * @internal The verifier's own steps without a promise per step, for the middleware in this package
 * (each async hop costs on the hot path). Absent from verifiers made elsewhere.
 */
export const VERIFIER_INTERNALS = Symbol('embedded-marketplace.verifierInternals');

/** @internal See {@link VERIFIER_INTERNALS}. */
export interface VerifierInternals {
  /** checkHeaders' checks: a value when the endorsement is cached, a promise otherwise; throws a SignatureError. */
  check(headers: RequestHeaders, onceEach: boolean): Checked | Promise<Checked>;
  /** HeaderCheck.verify's work (freshness again, then the signature), answered through `done`. */
  finish(request: Omit<SignedRequest, 'body'>, checked: Checked, body: unknown, done: VerifyDone): void;
}

/** @internal The internals of a verifier from {@link createVerifier}, if it is one. */
export function verifierInternals(verifier: Verifier): VerifierInternals | undefined {
  return (verifier as Partial<Record<typeof VERIFIER_INTERNALS, VerifierInternals>>)[VERIFIER_INTERNALS];
}

/** `verified` on success, else the error. */
type VerifyDone = (error: unknown, verified?: VerifiedRequest) => void;

/** One request signature check in progress, tried against each candidate Host in turn. */
interface Attempt {
  request: Omit<SignedRequest, 'body'>;
  checked: Checked;
  body: Uint8Array | undefined;
  done: VerifyDone;
  received: string | undefined;
  listed: string | undefined;
  candidates: readonly string[] | undefined;
  index: number;
  signature: Buffer;
}

/** @internal What checkSigned establishes from the headers alone. */
export interface Checked {
  /** X-Signature as sent, checked to decode. */
  signature: string;
  signedHeaders: string[];
  date: Date;
  liveKey: KeyObject;
}

function header(headers: RequestHeaders, name: string): HeaderValue {
  return Object.hasOwn(headers, name) ? headers[name] : undefined;
}

function readMasterKey(value: unknown): Buffer {
  if (value === undefined) return decodeBase64Any(PRODUCTION_MASTER_PUBLIC_KEY)!;
  const raw = typeof value === 'string' ? decodeBase64Any(value.trim()) : value instanceof Uint8Array ? Buffer.from(value) : undefined;
  if (raw?.length !== PUBLIC_KEY_BYTES || isWeakPublicKey(raw)) {
    throw new InvalidOptionsError(`${FACTORY}: option "masterKey" must be a 32-byte Ed25519 public key in base64url or base64 (the marketplace's master public key)`);
  }
  return raw;
}

function readPublicHost(value: unknown): readonly string[] | undefined {
  if (value === undefined) return undefined;
  const list: unknown[] = Array.isArray(value) ? value : [value];
  if (list.length === 0 || list.length > MAX_PUBLIC_HOSTS || list.some((host) => typeof host !== 'string' || !HOST.test(host))) {
    throw new InvalidOptionsError(`${FACTORY}: option "publicHost" must be the Host the marketplace addresses, such as "api.example.com" or "api.example.com:8443", or a list of 1 to ${MAX_PUBLIC_HOSTS} of them`);
  }
  return Object.freeze([...(list as string[])]);
}

function single(value: HeaderValue): string | undefined {
  return typeof value === 'string' ? value : value?.length === 1 ? value[0] : undefined;
}

function bodyBytes(body: unknown): Uint8Array | undefined {
  if (body === undefined || body instanceof Uint8Array) return body;
  if (typeof body === 'string') return Buffer.from(body, 'utf8');
  throw new TypeError(`verify: request.body must be a Buffer, a Uint8Array or a string (got ${body === null ? 'null' : typeof body})`);
}

/** The likeliest cause of a signature that does not match, for the operator's log line. */
function mismatchHint(headers: RequestHeaders, received: string | undefined, publicHosts: readonly string[] | undefined, listed: string | undefined): string {
  const forwarded = header(headers, 'x-forwarded-host') ?? header(headers, 'forwarded');
  if (publicHosts === undefined && forwarded !== undefined) {
    return 'the request came through a proxy (X-Forwarded-Host/Forwarded present) and publicHost is not set: set publicHost to the Host the marketplace addresses';
  }
  if (publicHosts !== undefined && listed === undefined) {
    return `the received Host is not in publicHost (${publicHosts.join(', ')}) and the signature matches none of them: a request signed for another host, or publicHost is wrong`;
  }
  return 'the body or a signed header changed on the way (a body parser re-serializing JSON, a proxy rewriting the path or Host), or the request was signed for another host';
}

function readCacheSize(value: unknown): number {
  if (value === undefined) return DEFAULT_ENDORSEMENT_CACHE_SIZE;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new InvalidOptionsError(`${FACTORY}: option "endorsementCacheSize" must be a non-negative integer (0 turns the cache off)`);
  }
  return value;
}

/** An endorsement check's result: the imported live key, or none (with the import failure, if any). */
interface EndorsementOutcome {
  key: KeyObject | undefined;
  cause: unknown;
}

/** Least-recently-used map of endorsement text to the imported live key. */
class EndorsementCache {
  private readonly entries = new Map<string, KeyObject>();
  constructor(private readonly capacity: number) {}

  get size(): number {
    return this.entries.size;
  }

  // The entry inserted last, i.e. the most recently used: in the steady state every request carries
  // the same live key, and it needs no re-insertion.
  private newest: string | undefined;

  get(key: string): KeyObject | undefined {
    const value = this.entries.get(key);
    if (value !== undefined && this.entries.size > 1 && key !== this.newest) {
      // Map keeps insertion order: re-inserting marks the entry most recently used.
      this.entries.delete(key);
      this.entries.set(key, value);
      this.newest = key;
    }
    return value;
  }

  set(key: string, value: KeyObject): void {
    if (this.capacity === 0) return;
    this.newest = key;
    this.entries.delete(key);
    while (this.entries.size >= this.capacity) {
      const oldest = this.entries.keys().next();
      if (oldest.done === true) break;
      this.entries.delete(oldest.value);
    }
    this.entries.set(key, value);
  }
}
