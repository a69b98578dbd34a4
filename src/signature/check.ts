/**
 * The signature check of a whole request on plain values, for every host: method, target, headers
 * and a body that is read only once the cheap header checks passed. The Express middleware
 * (middleware.ts) and the provider core (src/core) are thin shells over it.
 */
import type { IncomingMessage } from 'node:http';
import { BadRequestError, InternalError, InvalidOptionsError, isMarketplaceError, MarketplaceError, PayloadTooLargeError, UnsupportedMediaTypeError } from '../errors.js';
import { createLogger, type Logger } from '../lib/logger.js';
import { optionalLogger, optionalPositiveNumber } from '../lib/options.js';
import { noInstrumentation, type Instrumentation } from '../observability/hooks.js';
import { spanMayRecord } from '../observability/tracing.js';
import type { RequestHeaders } from './canonicalize.js';
import { bodyAlreadyConsumed, DEFAULT_BODY_LIMIT, DEFAULT_BODY_TIMEOUT_MS, leftRawBody, readRawBodyThen } from './raw-body.js';
import { createVerifier, signatureHint, verifierInternals, type Checked, type SignedRequest, type VerifiedRequest, type Verifier, type VerifierInternals } from './verifier.js';

/** The options a signature check reads (those of `verifySignature`, and the provider's). */
export const VERIFIER_OPTIONS = ['masterKey', 'now', 'toleranceMs', 'publicHost', 'endorsementCacheSize'] as const;

const MOUNT_ORDER_HINT =
  'The request body was consumed before the marketplace signature could be verified and no raw bytes were left behind: mount the marketplace router (or verifySignature) before express.json(), or keep the bytes with express.json({ verify: keepRawBody }) (keepRawBody from embedded-marketplace; docs/signature.md). Requests are refused until this is fixed.';
const NO_PUBLIC_HOST_WARNING =
  'no publicHost configured: a request the marketplace signed for another provider\'s Host is accepted when it arrives with that Host header. Set publicHost to the host (or hosts) the marketplace addresses (SECURITY.md)';

/**
 * Where the body comes from: a node request stream (read here, within the limit and timeout, or
 * the bytes an earlier parser kept on it), bytes already read, or a reader (a Web `Request`).
 */
export type SignedBody =
  | { readonly stream: IncomingMessage }
  | { readonly bytes: Uint8Array }
  | { readonly read: (limit: number, timeoutMs: number) => Promise<Uint8Array> };

/** A request to check: the request line and headers as received, and where its body is. */
export interface SignedInput {
  method: string;
  /** The target as on the wire, mount included (`req.originalUrl`). */
  url: string;
  /** Lowercase names; a string is one occurrence when `onceEach`, possibly a join of several otherwise. */
  headers: RequestHeaders;
  /** True when every header came once, so `headers` holds each as sent. */
  onceEach: boolean;
  /** Headers with every occurrence as an array (node's `req.headersDistinct`), used when not `onceEach`. */
  distinct?: RequestHeaders | undefined;
  body: SignedBody;
}

/** A verified request: what was established, and the exact bytes. */
export interface Accepted {
  verified: VerifiedRequest;
  raw: Buffer;
}

/** Called once: with the accepted request, or with the failure (a MarketplaceError to answer). */
export type CheckDone = (failure: unknown, accepted?: Accepted) => void;

/** A configured check: `check(input, done)`. */
export interface SignatureCheck {
  check(input: SignedInput, done: CheckDone): void;
  readonly bodyLimit: number;
  readonly bodyTimeoutMs: number;
}

/** Settings of a check, from options already read by the caller's factory. */
export interface SignatureCheckSettings {
  verifier: Verifier;
  bodyLimit: number;
  bodyTimeoutMs: number;
  logger: Logger;
  instrumentation: Instrumentation;
}

/**
 * Reads the signature options of `factory` (the verifier's, or a ready `verifier`, the body limit
 * and timeout, the logger) with errors that name the factory; warns once when no publicHost is set.
 */
export function signatureSettings(factory: string, opts: Record<string, unknown>, logger?: Logger): SignatureCheckSettings {
  const verifier = readVerifier(factory, opts);
  const bodyLimit = readBodyLimit(factory, opts.bodyLimit);
  const bodyTimeoutMs = optionalPositiveNumber(factory, opts, 'bodyTimeoutMs') ?? DEFAULT_BODY_TIMEOUT_MS;
  const instrumentation = (opts.instrumentation as Instrumentation | undefined) ?? noInstrumentation;
  const log = logger ?? createLogger(optionalLogger<Logger>(factory, opts), { component: 'signature' });
  if (opts.verifier === undefined && opts.publicHost === undefined) log.warn(NO_PUBLIC_HOST_WARNING);
  return { verifier, bodyLimit, bodyTimeoutMs, logger: log, instrumentation };
}

// The bodies read from a stream, by stream, so that a second check of the same request (two
// routers, say) verifies the same bytes again instead of mistaking its own read for a foreign one.
// Not a property on the request: Express gives every request its own prototype, so each property
// added to one costs a copy of its whole shape.
const readBodies = new WeakMap<IncomingMessage, Buffer>();

/**
 * The whole check: the header checks (an unsigned, stale or unendorsed request is refused before its
 * body is read), the body, the signature; refusals logged by code with the operator's hint and
 * counted. A verifier from `createVerifier` is driven step by step without a promise per step.
 */
export function createSignatureCheck(settings: SignatureCheckSettings): SignatureCheck {
  const { verifier, bodyLimit, bodyTimeoutMs, logger, instrumentation } = settings;
  const internals: VerifierInternals | undefined = verifierInternals(verifier);
  let warnedMountOrder = false;

  function refuse(error: unknown, done: CheckDone): void {
    if (error instanceof BodyRefusal) {
      done(error.failure);
      return;
    }
    if (!isMarketplaceError(error)) {
      instrumentation.signatureFailure('ERR_INTERNAL');
      logger.error({ code: 'ERR_INTERNAL', err: error }, 'marketplace signature verification failed unexpectedly');
      done(new InternalError({ cause: error }));
      return;
    }
    instrumentation.signatureFailure(error.code);
    // The code and the operator hint tell the story: header values and X-Signature never go to the log.
    logger.warn({ code: error.code, ...signatureHint(error) }, 'marketplace request signature rejected');
    done(error);
  }

  /** The raw body, or a {@link BodyRefusal} carrying the answer (too large, too slow, parsed before us). */
  function readBody(body: SignedBody, then: (refusal: BodyRefusal | undefined, bytes?: Buffer) => void): void {
    if ('bytes' in body) {
      const bytes = Buffer.isBuffer(body.bytes) ? body.bytes : Buffer.from(body.bytes.buffer, body.bytes.byteOffset, body.bytes.byteLength);
      if (bytes.length <= bodyLimit) then(undefined, bytes);
      else then(new BodyRefusal(new PayloadTooLargeError()));
      return;
    }
    if ('read' in body) {
      body.read(bodyLimit, bodyTimeoutMs).then((bytes) => {
        const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
        if (buffer.length <= bodyLimit) then(undefined, buffer);
        else then(new BodyRefusal(new PayloadTooLargeError()));
      }, (error: unknown) => {
        const failure = isMarketplaceError(error) ? error : new BadRequestError('Request body could not be read', 'ERR_BAD_REQUEST', { cause: error });
        logger.info({ code: failure.code }, 'marketplace request body refused');
        then(new BodyRefusal(failure));
      });
      return;
    }
    const req = body.stream;
    if (bodyAlreadyConsumed(req)) {
      const left = leftRawBody(req);
      if (left !== undefined) {
        if (left.length <= bodyLimit) then(undefined, left);
        else then(new BodyRefusal(new PayloadTooLargeError()));
        return;
      }
      if (!warnedMountOrder) {
        warnedMountOrder = true;
        logger.error({ code: 'ERR_BODY_ALREADY_PARSED' }, MOUNT_ORDER_HINT);
      }
      then(new BodyRefusal(new MarketplaceError(500, 'ERR_BODY_ALREADY_PARSED', 'Request body was parsed before signature verification')));
      return;
    }
    readRawBodyThen(req, bodyLimit, bodyTimeoutMs, (failure, bytes) => {
      if (failure === undefined) {
        readBodies.set(req, bytes!);
        then(undefined, bytes);
        return;
      }
      logger.info({ code: failure.code }, 'marketplace request body refused');
      then(new BodyRefusal(failure));
    });
  }

  function verify(input: SignedInput, then: (failure: unknown, verified?: VerifiedRequest, body?: Buffer) => void): void {
    const kept = 'stream' in input.body ? readBodies.get(input.body.stream) : undefined;
    if (internals === undefined || kept !== undefined) {
      verifyThroughApi(input, kept).then(([verified, body]) => then(undefined, verified, body), then);
      return;
    }
    const request = signedRequest(input, input.onceEach);
    let checked: Checked | Promise<Checked>;
    try {
      checked = internals.check(request.headers, input.onceEach);
    } catch (error) {
      then(error);
      return;
    }
    if (checked instanceof Promise) checked.then((known) => readAndFinish(input, request, known, then), then);
    else readAndFinish(input, request, checked, then);
  }

  /** The same steps through the public Verifier API: a verifier made elsewhere, or a body already verified once. */
  async function verifyThroughApi(input: SignedInput, kept: Buffer | undefined): Promise<[VerifiedRequest, Buffer]> {
    const request = signedRequest(input, false);
    // A second check of the same request verifies the same bytes again.
    if (kept !== undefined) return [await verifier.verify({ ...request, body: kept }), kept];
    const check = await verifier.checkHeaders?.(request);
    const body = await new Promise<Buffer>((resolve, reject) => readBody(input.body, (refusal, read) => (read === undefined ? reject(refusal) : resolve(read))));
    // A verifier of an earlier release checks headers without handing the result on.
    return [await (typeof check?.verify === 'function' ? check.verify(body) : verifier.verify({ ...request, body })), body];
  }

  function readAndFinish(input: SignedInput, request: Omit<SignedRequest, 'body'>, checked: Checked, then: (failure: unknown, verified?: VerifiedRequest, body?: Buffer) => void): void {
    readBody(input.body, (refusal, body) => {
      if (body === undefined) then(refusal);
      else internals!.finish(request, checked, body, (error, verified) => then(error, verified, body));
    });
  }

  function check(input: SignedInput, done: CheckDone): void {
    // No span to record into (the usual case): the steps call each other directly.
    if (!spanMayRecord(instrumentation.span)) {
      verify(input, (failure, verified, raw) => {
        // This runs from a stream, timer or crypto callback: a throw here would end the process.
        try {
          if (verified === undefined || raw === undefined) refuse(failure, done);
          else done(undefined, { verified, raw });
        } catch (error) {
          done(error);
        }
      });
      return;
    }
    // One span for the whole verification: the cheap header checks, the body, the signatures.
    let body: Buffer | undefined;
    instrumentation.span('marketplace.verify', {}, () => new Promise<VerifiedRequest>((resolve, reject) => {
      verify(input, (failure, verified, read) => {
        body = read;
        if (verified === undefined) reject(failure);
        else resolve(verified);
      });
    })).then((verified) => {
      if (body === undefined) done(new InternalError());
      else done(undefined, { verified, raw: body });
    }, (failure: unknown) => refuse(failure, done)).catch((error: unknown) => done(error));
  }

  return { check, bodyLimit, bodyTimeoutMs };
}

/**
 * The request as the verifier sees it. Headers keep every occurrence (node's `req.headers` drops
 * repeats of Host, Content-Type and others), so a header added in transit changes the canonical
 * form instead of hiding; when no name repeats, the headers hold exactly that already, without
 * building an array per header.
 */
function signedRequest(input: SignedInput, onceEach: boolean): Omit<SignedRequest, 'body'> {
  return { method: input.method, url: input.url, headers: onceEach ? input.headers : input.distinct ?? input.headers };
}

/** True when no header name of a node request came twice: then `req.headers` has one value per header as sent. */
export function sentOnceEach(req: Pick<IncomingMessage, 'headers' | 'rawHeaders'>): boolean {
  const raw = req.rawHeaders as string[] | undefined;
  return Array.isArray(raw) && Object.keys(req.headers).length * 2 === raw.length;
}

/** A body that could not be read: not a signature failure, answered with its own status. */
class BodyRefusal extends Error {
  constructor(readonly failure: MarketplaceError) {
    super(failure.message);
  }

  /** The failure's code, which the verify span records. */
  get code(): string {
    return this.failure.code;
  }
}

const DANGEROUS_KEY = /__proto__|constructor|prototype|\\u/;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * A verified JSON body to a value with no `__proto__`, `constructor` or `prototype` keys at any
 * depth, so that a later merge into an object cannot reach a prototype. The reviver costs a call per
 * value, so it runs only when the text could spell such a key (also through `\u` escapes).
 *
 * @throws {UnsupportedMediaTypeError} for a non-JSON Content-Type or any Content-Encoding.
 * @throws {BadRequestError} for bytes that are not UTF-8 JSON.
 */
export function parseJsonBody(contentType: string | undefined, contentEncoding: string | undefined, body: Uint8Array): unknown {
  if (contentType !== undefined && !isJsonType(contentType)) throw new UnsupportedMediaTypeError();
  // The signature covered the bytes as sent; decompressing them is not this library's business.
  if (contentEncoding !== undefined && contentEncoding.trim().toLowerCase() !== 'identity') {
    throw new UnsupportedMediaTypeError('Content-Encoding is not supported; send the body uncompressed');
  }
  let text: string;
  try {
    text = utf8.decode(body);
    return DANGEROUS_KEY.test(text) ? JSON.parse(text, dropDangerousKeys) : JSON.parse(text);
  } catch (error) {
    throw new BadRequestError('Request body is not valid JSON', 'ERR_BAD_REQUEST', { cause: error });
  }
}

function dropDangerousKeys(key: string, value: unknown): unknown {
  return key === '__proto__' || key === 'constructor' || key === 'prototype' ? undefined : value;
}

function isJsonType(contentType: string): boolean {
  const semicolon = contentType.indexOf(';');
  const type = (semicolon === -1 ? contentType : contentType.slice(0, semicolon)).trim().toLowerCase();
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'));
}

function readVerifier(factory: string, opts: Record<string, unknown>): Verifier {
  const given = opts.verifier;
  if (given === undefined) {
    const verifierOptions: Record<string, unknown> = {};
    for (const key of VERIFIER_OPTIONS) if (opts[key] !== undefined) verifierOptions[key] = opts[key];
    return createVerifier(verifierOptions);
  }
  if (typeof given !== 'object' || given === null || typeof (given as Partial<Verifier>).verify !== 'function') {
    throw new InvalidOptionsError(`${factory}: option "verifier" must be a verifier from createVerifier()`);
  }
  const clash = VERIFIER_OPTIONS.find((key) => opts[key] !== undefined);
  if (clash !== undefined) {
    throw new InvalidOptionsError(`${factory}: option "${clash}" cannot be combined with "verifier"; pass it to createVerifier() instead`);
  }
  return given as Verifier;
}

function readBodyLimit(factory: string, value: unknown): number {
  if (value === undefined) return DEFAULT_BODY_LIMIT;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new InvalidOptionsError(`${factory}: option "bodyLimit" must be a non-negative integer number of bytes`);
  }
  return value;
}
