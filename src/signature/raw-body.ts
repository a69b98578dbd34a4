import type { IncomingMessage } from 'node:http';
import { BadRequestError, PayloadTooLargeError } from '../errors.js';

/** Default largest body the middleware reads: 1 MiB, far above any marketplace request. */
export const DEFAULT_BODY_LIMIT = 1_048_576;

/**
 * Reads a request body into one Buffer, refusing more than `limit` bytes: up front when
 * Content-Length already says so, otherwise as soon as the count passes the limit (chunked bodies).
 * On refusal it stops keeping chunks and lets the rest drain, so memory stays bounded.
 *
 * The bytes are returned as received: a Content-Encoding is not decoded.
 *
 * @throws {PayloadTooLargeError} past the limit; {@link BadRequestError} when the client aborts.
 * @example
 * ```ts
 * const body = await readRawBody(req, 64 * 1024);
 * ```
 */
export function readRawBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) return Promise.reject(new PayloadTooLargeError());

  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
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
  return req._body === true || req.body !== undefined || req.readableEnded || req.readableFlowing === true;
}
