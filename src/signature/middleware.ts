import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { BadRequestError, InternalError, InvalidOptionsError, isMarketplaceError, MarketplaceError, PayloadTooLargeError, UnsupportedMediaTypeError } from '../errors.js';
import { createLogger, type Logger } from '../lib/logger.js';
import { asOptionsObject, optionalLogger, optionalPositiveNumber, rejectUnknownKeys } from '../lib/options.js';
import { noInstrumentation, type Instrumentation } from '../observability/hooks.js';
import { bodyAlreadyConsumed, DEFAULT_BODY_LIMIT, DEFAULT_BODY_TIMEOUT_MS, leftRawBody, readRawBody } from './raw-body.js';
import { createVerifier, signatureHint, type VerifiedRequest, type Verifier, type VerifierOptions } from './verifier.js';

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
  'The request body was consumed before the marketplace signature could be verified and no raw bytes were left behind: mount the marketplace router (or verifySignature) before express.json(), or keep the bytes with express.json({ verify: (req, _res, buf) => { req.rawBody = buf } }) (docs/signature.md). Requests are refused until this is fixed.';
const NO_PUBLIC_HOST_WARNING =
  'no publicHost configured: a request the marketplace signed for another provider\'s Host is accepted when it arrives with that Host header. Set publicHost to the host (or hosts) the marketplace addresses (SECURITY.md)';

// Marks a body this library has read, so that a second verifySignature on the same request (two
// routers, say) verifies the same bytes again instead of mistaking its own parse for a foreign one.
const RAW_BODY = Symbol('embedded-marketplace.rawBody');
type Marked = Request & { [RAW_BODY]?: Buffer };

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
  const opts = asOptionsObject(FACTORY, options);
  rejectUnknownKeys(FACTORY, opts, KNOWN_OPTIONS);
  const verifier = readVerifier(opts);
  const bodyLimit = readBodyLimit(opts.bodyLimit);
  const bodyTimeoutMs = optionalPositiveNumber(FACTORY, opts, 'bodyTimeoutMs') ?? DEFAULT_BODY_TIMEOUT_MS;
  // Internal: the provider router passes its metrics and tracing hooks.
  const instrumentation = (opts.instrumentation as Instrumentation | undefined) ?? noInstrumentation;
  const logger = createLogger(optionalLogger<Logger>(FACTORY, opts), { component: 'signature' });
  if (opts.verifier === undefined && opts.publicHost === undefined) logger.warn(NO_PUBLIC_HOST_WARNING);
  let warnedMountOrder = false;

  function refuse(error: unknown, next: NextFunction): void {
    if (!isMarketplaceError(error)) {
      instrumentation.signatureFailure('ERR_INTERNAL');
      logger.error({ code: 'ERR_INTERNAL', err: error }, 'marketplace signature verification failed unexpectedly');
      next(new InternalError({ cause: error }));
      return;
    }
    instrumentation.signatureFailure(error.code);
    // The code and the operator hint tell the story: header values and X-Signature never go to the log.
    logger.warn({ code: error.code, ...signatureHint(error) }, 'marketplace request signature rejected');
    next(error);
  }

  /** The raw body, or a {@link BodyRefusal} carrying the answer (too large, too slow, parsed before us). */
  async function readBody(req: Marked, res: Response): Promise<Buffer> {
    if (bodyAlreadyConsumed(req)) {
      const left = leftRawBody(req);
      if (left !== undefined) {
        if (left.length <= bodyLimit) return left;
        throw new BodyRefusal(new PayloadTooLargeError());
      }
      if (!warnedMountOrder) {
        warnedMountOrder = true;
        logger.error({ code: 'ERR_BODY_ALREADY_PARSED' }, MOUNT_ORDER_HINT);
      }
      throw new BodyRefusal(new MarketplaceError(500, 'ERR_BODY_ALREADY_PARSED', 'Request body was parsed before signature verification'));
    }
    try {
      return await readRawBody(req, bodyLimit, bodyTimeoutMs);
    } catch (error) {
      const failure = isMarketplaceError(error) ? error : new InternalError({ cause: error });
      // A stalled sender keeps the socket otherwise: close it once the 408 is written.
      if (failure.status === 408) res.setHeader('Connection', 'close');
      logger.info({ code: failure.code }, 'marketplace request body refused');
      throw new BodyRefusal(failure);
    }
  }

  async function handle(req: Marked, res: Response, next: NextFunction): Promise<void> {
    // headersDistinct keeps every occurrence (req.headers drops repeats of Host, Content-Type and
    // others), so a header added in transit changes the canonical form instead of hiding.
    const request = { method: req.method, url: req.originalUrl ?? req.url, headers: req.headersDistinct ?? req.headers };
    let body = req[RAW_BODY];
    let verified: VerifiedRequest;
    try {
      // One span for the whole verification: the cheap header checks, the body, the signatures.
      verified = await instrumentation.span('marketplace.verify', {}, async () => {
        if (body !== undefined) return verifier.verify({ ...request, body });
        // Cheap checks first: an unsigned, stale or unendorsed request is refused before its body is read.
        const check = await verifier.checkHeaders?.(request);
        body = await readBody(req, res);
        // A verifier of an earlier release checks headers without handing the result on.
        return typeof check?.verify === 'function' ? check.verify(body) : verifier.verify({ ...request, body });
      });
    } catch (error) {
      if (error instanceof BodyRefusal) next(error.failure);
      else refuse(error, next);
      return;
    }
    if (body === undefined) throw new InternalError();

    req[RAW_BODY] = body;
    req.rawBody = body;
    req.marketplaceSignature = verified;
    if (body.length > 0) {
      try {
        req.body = parseJsonBody(req.headers['content-type'], req.headers['content-encoding'], body);
      } catch (error) {
        next(error);
        return;
      }
    }
    next();
  }

  return function marketplaceSignature(req: Request, res: Response, next: NextFunction): void {
    handle(req, res, next).catch((error: unknown) => next(error));
  };
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
