import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { BadRequestError, InternalError, InvalidOptionsError, isMarketplaceError, MarketplaceError, PayloadTooLargeError, UnsupportedMediaTypeError } from '../errors.js';
import { createLogger, type Logger } from '../lib/logger.js';
import { asOptionsObject, optionalLogger, optionalPositiveNumber, rejectUnknownKeys } from '../lib/options.js';
import { noInstrumentation, type Instrumentation } from '../observability/hooks.js';
import { spanMayRecord } from '../observability/tracing.js';
import { bodyAlreadyConsumed, DEFAULT_BODY_LIMIT, DEFAULT_BODY_TIMEOUT_MS, leftRawBody, readRawBodyThen } from './raw-body.js';
import { createVerifier, signatureHint, verifierInternals, type Checked, type SignedRequest, type VerifiedRequest, type Verifier, type VerifierOptions } from './verifier.js';

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace -- Express's types are extended only through this namespace.
  namespace Express {
    interface Request {
      /** The body bytes exactly as received; set by `verifySignature` once the signature verified. */
      rawBody?: Buffer;
      /** What `verifySignature` established about the request (live key, signed headers, Date). */
      marketplaceSignature?: VerifiedRequest;
    }
  }
}

/**
 * Options of {@link verifySignature}: either the {@link VerifierOptions} (a verifier is created
 * from them) or a ready `verifier`, plus how the body is read and where failures are logged.
 */
export interface VerifySignatureOptions extends VerifierOptions {
  /** A verifier from `createVerifier`, shared between middlewares; excludes the verifier options. */
  verifier?: Verifier;
  /** Largest body read, in bytes; past it the answer is 413. Default 1 048 576. */
  bodyLimit?: number;
  /**
   * Longest wait for the whole body, in ms, however slowly it trickles in; past it the answer is
   * 408 and the connection is closed. Default 10 000.
   */
  bodyTimeoutMs?: number;
  /** A pino logger, or `false` for none. Default: JSON lines on stdout at `info`. */
  logger?: Logger | false;
  /** @internal The provider router's metrics and tracing hooks; not part of the public API. */
  instrumentation?: Instrumentation;
}

const FACTORY = 'verifySignature';
const VERIFIER_OPTIONS = ['masterKey', 'now', 'toleranceMs', 'publicHost', 'endorsementCacheSize'] as const;
const KNOWN_OPTIONS = [...VERIFIER_OPTIONS, 'verifier', 'bodyLimit', 'bodyTimeoutMs', 'logger', 'instrumentation'] as const;
const MOUNT_ORDER_HINT =
  'The request body was consumed before the marketplace signature could be verified and no raw bytes were left behind: mount the marketplace router (or verifySignature) before express.json(), or keep the bytes with express.json({ verify: keepRawBody }) (keepRawBody from embedded-marketplace; docs/signature.md). Requests are refused until this is fixed.';
const NO_PUBLIC_HOST_WARNING =
  'no publicHost configured: a request the marketplace signed for another provider\'s Host is accepted when it arrives with that Host header. Set publicHost to the host (or hosts) the marketplace addresses (SECURITY.md)';

// The bodies this library has read, by request, so that a second verifySignature on the same
// request (two routers, say) verifies the same bytes again instead of mistaking its own parse for a
// foreign one. Not a property on the request: Express gives every request its own prototype, so
// each property added to one costs a copy of its whole shape.
const readBodies = new WeakMap<Request, Buffer>();

/**
 * Express middleware that verifies the marketplace's request signature before any handler runs.
 *
 * It reads the raw body itself (the signature covers the exact bytes), verifies against
 * `req.originalUrl` (so it works under any mount path), then sets `req.rawBody`,
 * `req.marketplaceSignature` and, for a non-empty body, `req.body` parsed as JSON with
 * `__proto__`, `constructor` and `prototype` keys dropped.
 *
 * The checks that need no body (X-Signature present and well-formed, a fresh Date, an endorsed
 * key) run before the body is read, so an unsigned request is refused without buffering it. When an
 * earlier body parser left the exact bytes (`req.rawBody` as a Buffer, or `req.body` from
 * `express.raw()`), those bytes are verified instead of the stream.
 *
 * Failures are passed on with `next(err)`, `err` a {@link MarketplaceError}: 401 for any signature
 * failure, 408 past `bodyTimeoutMs`, 413 past `bodyLimit`, 415 for a non-JSON or compressed body,
 * 400 for invalid JSON, and 500 `ERR_BODY_ALREADY_PARSED` (failing closed) when a body parser ran
 * first and left no raw bytes. Render them with
 * {@link errorResponder} or your own handler (`res.status(err.status).json({ message: err.message })`).
 *
 * @throws {InvalidOptionsError} at construction for a wrong option.
 * @example
 * ```ts
 * const app = express();
 * app.use('/marketplace', verifySignature({ masterKey: process.env.MASTER_PUBLIC_KEY, publicHost: 'api.example.com' }), provider);
 * app.use('/marketplace', errorResponder());
 * app.use(express.json()); // after: the marketplace routes read their own body
 * ```
 */
export function verifySignature(options: VerifySignatureOptions = {}): RequestHandler {
  const check = signatureCheck(options);
  return function marketplaceSignature(req: Request, res: Response, next: NextFunction): void {
    check(req, res, next);
  };
}

/** Called once: with nothing when the request verified (and `req.body` is set), else with the error to pass on. */
export type SignatureDone = (error?: unknown) => void;

/**
 * @internal What {@link verifySignature} does to a request, with a callback instead of `next`: the
 * provider router runs it inline, without a middleware layer of its own. Same options, same checks.
 */
export function signatureCheck(options: VerifySignatureOptions = {}): (req: Request, res: Response, done: SignatureDone) => void {
  const opts = asOptionsObject(FACTORY, options);
  rejectUnknownKeys(FACTORY, opts, KNOWN_OPTIONS);
  const verifier = readVerifier(opts);
  // A verifier of ours is driven step by step without promises; one from elsewhere through its API.
  const internals = verifierInternals(verifier);
  const bodyLimit = readBodyLimit(opts.bodyLimit);
  const bodyTimeoutMs = optionalPositiveNumber(FACTORY, opts, 'bodyTimeoutMs') ?? DEFAULT_BODY_TIMEOUT_MS;
  // Internal: the provider router passes its metrics and tracing hooks.
  const instrumentation = (opts.instrumentation as Instrumentation | undefined) ?? noInstrumentation;
  const logger = createLogger(optionalLogger<Logger>(FACTORY, opts), { component: 'signature' });
  if (opts.verifier === undefined && opts.publicHost === undefined) logger.warn(NO_PUBLIC_HOST_WARNING);
  let warnedMountOrder = false;

  function refuse(error: unknown, done: SignatureDone): void {
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
  function readBody(req: Request, res: Response, then: (refusal: BodyRefusal | undefined, body?: Buffer) => void): void {
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
    readRawBodyThen(req, bodyLimit, bodyTimeoutMs, (failure, body) => {
      if (failure === undefined) {
        then(undefined, body);
        return;
      }
      // A stalled sender keeps the socket otherwise: close it once the 408 is written.
      if (failure.status === 408 && !res.headersSent) res.setHeader('Connection', 'close');
      logger.info({ code: failure.code }, 'marketplace request body refused');
      then(new BodyRefusal(failure));
    });
  }

  /**
   * The whole verification: the cheap header checks (an unsigned, stale or unendorsed request is
   * refused before its body is read), the body, the signature. `then` gets the body and what was
   * verified, or the failure (a {@link BodyRefusal} for a body that could not be read).
   */
  function verify(req: Request, res: Response, then: (failure: unknown, verified?: VerifiedRequest, body?: Buffer) => void): void {
    if (internals === undefined || readBodies.has(req)) {
      verifyThroughApi(req, res).then(([verified, body]) => then(undefined, verified, body), then);
      return;
    }
    const onceEach = sentOnceEach(req);
    const request = signedRequest(req, onceEach);
    let checked: Checked | Promise<Checked>;
    try {
      checked = internals.check(request.headers, onceEach);
    } catch (error) {
      then(error);
      return;
    }
    if (checked instanceof Promise) checked.then((known) => readAndFinish(req, res, request, known, then), then);
    else readAndFinish(req, res, request, checked, then);
  }

  /** The same steps through the public Verifier API: a verifier made elsewhere, or a body already verified once. */
  async function verifyThroughApi(req: Request, res: Response): Promise<[VerifiedRequest, Buffer]> {
    const request = signedRequest(req, false);
    const kept = readBodies.get(req);
    // A second verifySignature on the same request verifies the same bytes again.
    if (kept !== undefined) return [await verifier.verify({ ...request, body: kept }), kept];
    const check = await verifier.checkHeaders?.(request);
    const body = await new Promise<Buffer>((resolve, reject) => readBody(req, res, (refusal, read) => (read === undefined ? reject(refusal) : resolve(read))));
    // A verifier of an earlier release checks headers without handing the result on.
    return [await (typeof check?.verify === 'function' ? check.verify(body) : verifier.verify({ ...request, body })), body];
  }

  function readAndFinish(req: Request, res: Response, request: Omit<SignedRequest, 'body'>, checked: Checked, then: (failure: unknown, verified?: VerifiedRequest, body?: Buffer) => void): void {
    readBody(req, res, (refusal, body) => {
      if (body === undefined) then(refusal);
      else internals!.finish(request, checked, body, (error, verified) => then(error, verified, body));
    });
  }

  function accept(req: Request, verified: VerifiedRequest, body: Buffer, done: SignatureDone): void {
    readBodies.set(req, body);
    req.rawBody = body;
    req.marketplaceSignature = verified;
    if (body.length > 0) {
      try {
        req.body = parseJsonBody(req.headers['content-type'], req.headers['content-encoding'], body);
      } catch (error) {
        done(error);
        return;
      }
    }
    done();
  }

  return function check(req: Request, res: Response, done: SignatureDone): void {
    // No span to record into (the usual case): the steps call each other directly.
    if (!spanMayRecord(instrumentation.span)) {
      verify(req, res, (failure, verified, body) => {
        // This runs from a stream, timer or crypto callback: a throw here would end the process.
        try {
          if (verified === undefined || body === undefined) refuse(failure, done);
          else accept(req, verified, body, done);
        } catch (error) {
          done(error);
        }
      });
      return;
    }
    // One span for the whole verification: the cheap header checks, the body, the signatures.
    let body: Buffer | undefined;
    instrumentation.span('marketplace.verify', {}, () => new Promise<VerifiedRequest>((resolve, reject) => {
      verify(req, res, (failure, verified, read) => {
        body = read;
        if (verified === undefined) reject(failure);
        else resolve(verified);
      });
    })).then((verified) => {
      if (body === undefined) done(new InternalError());
      else accept(req, verified, body, done);
    }, (failure: unknown) => refuse(failure, done)).catch((error: unknown) => done(error));
  };
}

/**
 * The request as the verifier sees it. Headers keep every occurrence (`req.headers` drops repeats
 * of Host, Content-Type and others), so a header added in transit changes the canonical form
 * instead of hiding; when no name repeats, `req.headers` holds exactly that already, without
 * building an array per header.
 */
function signedRequest(req: Request, onceEach: boolean): Omit<SignedRequest, 'body'> {
  return { method: req.method, url: req.originalUrl ?? req.url, headers: onceEach ? req.headers : req.headersDistinct ?? req.headers };
}

/** True when no header name came twice: then `req.headers` has one value per header as sent. */
function sentOnceEach(req: Request): boolean {
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

/**
 * An Express error handler for standalone use of {@link verifySignature}: renders any
 * {@link MarketplaceError} as `status` with `{"message": ...}` and passes anything else on.
 * The provider router has its own; mount this one only when you use the middleware alone.
 *
 * @example
 * ```ts
 * app.use('/marketplace', verifySignature(), routes, errorResponder());
 * ```
 */
export function errorResponder(): (error: unknown, req: Request, res: Response, next: NextFunction) => void {
  return (error, _req, res, next) => {
    if (res.headersSent || !isMarketplaceError(error)) {
      next(error);
      return;
    }
    res.status(error.status).json({ message: error.message });
  };
}

const DANGEROUS_KEY = /__proto__|constructor|prototype|\\u/;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * JSON body to a value with no `__proto__`, `constructor` or `prototype` keys at any depth, so that
 * a later merge into an object cannot reach a prototype. The reviver costs a call per value, so it
 * runs only when the text could spell such a key (also through `\u` escapes).
 */
function parseJsonBody(contentType: string | undefined, contentEncoding: string | undefined, body: Buffer): unknown {
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

function readVerifier(opts: Record<string, unknown>): Verifier {
  const given = opts.verifier;
  if (given === undefined) {
    const verifierOptions: Record<string, unknown> = {};
    for (const key of VERIFIER_OPTIONS) if (opts[key] !== undefined) verifierOptions[key] = opts[key];
    return createVerifier(verifierOptions as VerifierOptions);
  }
  if (typeof given !== 'object' || given === null || typeof (given as Partial<Verifier>).verify !== 'function') {
    throw new InvalidOptionsError(`${FACTORY}: option "verifier" must be a verifier from createVerifier()`);
  }
  const clash = VERIFIER_OPTIONS.find((key) => opts[key] !== undefined);
  if (clash !== undefined) {
    throw new InvalidOptionsError(`${FACTORY}: option "${clash}" cannot be combined with "verifier"; pass it to createVerifier() instead`);
  }
  return given as Verifier;
}

function readBodyLimit(value: unknown): number {
  if (value === undefined) return DEFAULT_BODY_LIMIT;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new InvalidOptionsError(`${FACTORY}: option "bodyLimit" must be a non-negative integer number of bytes`);
  }
  return value;
}
