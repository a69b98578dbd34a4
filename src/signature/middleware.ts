import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { isMarketplaceError } from '../errors.js';
import type { Logger } from '../lib/logger.js';
import { asOptionsObject, rejectUnknownKeys } from '../lib/options.js';
import type { Instrumentation } from '../observability/hooks.js';
import { createSignatureCheck, parseJsonBody, sentOnceEach, signatureSettings, VERIFIER_OPTIONS, type Accepted } from './check.js';
import type { VerifiedRequest, Verifier, VerifierOptions } from './verifier.js';

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
const KNOWN_OPTIONS = [...VERIFIER_OPTIONS, 'verifier', 'bodyLimit', 'bodyTimeoutMs', 'logger', 'instrumentation'] as const;

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
 * @internal What {@link verifySignature} does to a request, with a callback instead of `next`.
 * Same options, same checks: a shell over the framework-free check (check.ts).
 */
export function signatureCheck(options: VerifySignatureOptions = {}): (req: Request, res: Response, done: SignatureDone) => void {
  const opts = asOptionsObject(FACTORY, options);
  rejectUnknownKeys(FACTORY, opts, KNOWN_OPTIONS);
  const { check } = createSignatureCheck(signatureSettings(FACTORY, opts));
  return (req, res, done) => {
    const onceEach = sentOnceEach(req);
    check({ method: req.method, url: req.originalUrl ?? req.url, headers: req.headers, onceEach, distinct: onceEach ? undefined : req.headersDistinct, body: { stream: req } }, (failure, accepted) => {
      if (accepted === undefined) {
        // A stalled sender keeps the socket otherwise: close it once the 408 is written.
        if ((failure as { status?: unknown } | undefined)?.status === 408 && !res.headersSent) res.setHeader('Connection', 'close');
        done(failure);
        return;
      }
      try {
        acceptRequest(req, accepted);
      } catch (error) {
        done(error);
        return;
      }
      done();
    });
  };
}

/**
 * Hands a verified request to what follows, as `verifySignature` documents: `req.rawBody`,
 * `req.marketplaceSignature`, and `req.body` parsed for a non-empty body.
 *
 * @throws {MarketplaceError} 400/415 for a body that is not JSON.
 */
export function acceptRequest(req: Request, accepted: Accepted): void {
  req.rawBody = accepted.raw;
  req.marketplaceSignature = accepted.verified;
  if (accepted.raw.length > 0) req.body = parseJsonBody(req.headers['content-type'], req.headers['content-encoding'], accepted.raw);
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
