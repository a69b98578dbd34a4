import type { IncomingMessage } from 'node:http';
import { BadRequestError, PayloadTooLargeError, RequestTimeoutError } from '../errors.js';

/** Default largest body the middleware reads: 1 MiB, far above any marketplace request. */
export const DEFAULT_BODY_LIMIT = 1_048_576;
/**
 * Default longest wait for a whole body: 10 s. Marketplace bodies are a few hundred bytes, so only
 * a stalled or hostile sender (one byte every few seconds) ever reaches it.
 */
export const DEFAULT_BODY_TIMEOUT_MS = 10_000;

/**
 * Reads a request body into one Buffer, refusing more than `limit` bytes: up front when
 * Content-Length already says so, otherwise as soon as the count passes the limit (chunked bodies).
 * On refusal it stops keeping chunks and lets the rest drain, so memory stays bounded.
 *
 * The bytes are returned as received: a Content-Encoding is not decoded.
 *
 * The whole body must arrive within `timeoutMs`, however it trickles in: a sender holding the
 * connection open with a byte now and then gets {@link RequestTimeoutError} (408) in bounded time.
 *
 * @throws {PayloadTooLargeError} past the limit; {@link RequestTimeoutError} past the timeout;
 *   {@link BadRequestError} when the client aborts.
 * @example
 * ```ts
 * const body = await readRawBody(req, 64 * 1024, 10_000);
 * ```
 */
export function readRawBody(req: IncomingMessage, limit: number, timeoutMs = DEFAULT_BODY_TIMEOUT_MS): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) return Promise.reject(new PayloadTooLargeError());

  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const timer = setTimeout(() => {
      cleanup();
      reject(new RequestTimeoutError());
    }, timeoutMs);
    const cleanup = () => {
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        // Keep the stream flowing with no listener: the rest is read and dropped, not buffered.
        req.resume();
        reject(new PayloadTooLargeError());
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onError = (error: Error) => {
      cleanup();
      reject(new BadRequestError('Request body could not be read', 'ERR_BAD_REQUEST', { cause: error }));
    };
    const onClose = () => {
      cleanup();
      reject(new BadRequestError('Request body ended before it was complete', 'ERR_BAD_REQUEST'));
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

/**
 * True when something read the body before us (`express.json()` and friends mark `req._body`,
 * set `req.body`, or leave the stream ended or flowing). Reading again would see no bytes, and a
 * signature over an empty body would then be checked against the wrong data.
 */
export function bodyAlreadyConsumed(req: IncomingMessage & { body?: unknown; _body?: unknown }): boolean {
  if (req._body === true || req.readableEnded || req.readableFlowing === true) return true;
  // body-parser 1 (Express 4) sets `req.body = {}` even when it skips a request (no body, another
  // Content-Type) and leaves the stream unread: that is no sign of a consumed body.
  return req.body !== undefined && !isUntouchedEmptyObject(req.body);
}

function isUntouchedEmptyObject(value: unknown): boolean {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !Buffer.isBuffer(value)
    && Object.getPrototypeOf(value) === Object.prototype && Object.keys(value).length === 0;
}

/**
 * The exact body bytes an earlier parser left behind: `req.rawBody` from the common
 * `express.json({ verify: (req, _res, buf) => { req.rawBody = buf } })`, or `req.body` from
 * `express.raw()`. Undefined when none is there (then nothing can be verified).
 */
export function leftRawBody(req: IncomingMessage & { body?: unknown; rawBody?: unknown }): Buffer | undefined {
  if (Buffer.isBuffer(req.rawBody)) return req.rawBody;
  if (Buffer.isBuffer(req.body)) return req.body;
  return undefined;
}
