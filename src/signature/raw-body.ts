import type { IncomingMessage } from 'node:http';
import { BadRequestError, PayloadTooLargeError, RequestTimeoutError, type MarketplaceError } from '../errors.js';

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
  return new Promise((resolve, reject) => readRawBodyThen(req, limit, timeoutMs, (error, body) => (body === undefined ? reject(error) : resolve(body))));
}

/** `body` once read, else the refusal ({@link readRawBody} lists them). */
export type BodyDone = (error: MarketplaceError | undefined, body?: Buffer) => void;

/**
 * {@link readRawBody} with a callback, for the signature middleware's hot path: no promise, and
 * usually no listener and no timer either. `done` may be called before this returns (a
 * Content-Length over the limit).
 *
 * A small body arrives with its headers: Node's parser pushes it right after the 'request' event,
 * before the microtasks queued there run. So one microtask later, when all the Content-Length bytes
 * are buffered, they are taken at once; only a body still on its way is read with listeners and a
 * timeout.
 */
export function readRawBodyThen(req: IncomingMessage, limit: number, timeoutMs: number, done: BodyDone): void {
  const declared = req.headers['content-length'];
  const length = declared === undefined ? undefined : Number(declared);
  if (length !== undefined && length > limit) {
    done(new PayloadTooLargeError());
    return;
  }
  if (length === undefined || !Number.isSafeInteger(length)) {
    listen(req, limit, timeoutMs, done);
    return;
  }
  queueMicrotask(() => {
    if (req.readableLength !== length || req.readableFlowing !== null || req.destroyed) {
      listen(req, limit, timeoutMs, done);
      return;
    }
    const body: unknown = length === 0 ? Buffer.alloc(0) : req.read(length);
    // Flowing with nothing left, the stream ends as a fully read one does: 'end', then 'close'.
    req.resume();
    // Bytes, unless something set an encoding on the stream before us.
    if (Buffer.isBuffer(body)) done(undefined, body);
    else done(new BadRequestError('Request body could not be read', 'ERR_BAD_REQUEST'));
  });
}

/**
 * Reads the body as it arrives. The listeners are shared by every request and find their request's
 * state on it, so a read allocates no closure.
 */
function listen(req: IncomingMessage, limit: number, timeoutMs: number, done: BodyDone): void {
  const reading: Reading = { chunks: undefined, size: 0, limit, timer: undefined, done };
  (req as Reader)[READING] = reading;
  reading.timer = setTimeout(onTimeout, timeoutMs, req);
  req.on('data', onData);
  req.on('end', onEnd);
  req.on('error', onError);
  req.on('close', onClose);
}

const READING = Symbol('embedded-marketplace.reading');

/** One body being read: what the shared listeners below need. */
interface Reading {
  /** One chunk as is (the usual small body), several in an array. */
  chunks: Buffer | Buffer[] | undefined;
  size: number;
  limit: number;
  timer: NodeJS.Timeout | undefined;
  done: BodyDone;
}

type Reader = IncomingMessage & { [READING]?: Reading | undefined };

/** Detaches the read from `req` and answers `done` once. */
function settle(req: Reader, error: MarketplaceError | undefined, body?: Buffer): void {
  const reading = req[READING];
  if (reading === undefined) return;
  req[READING] = undefined;
  clearTimeout(reading.timer);
  req.off('data', onData);
  req.off('end', onEnd);
  req.off('error', onError);
  req.off('close', onClose);
  reading.done(error, body);
}

function onData(this: Reader, chunk: Buffer): void {
  const reading = this[READING];
  if (reading === undefined) return;
  reading.size += chunk.length;
  if (reading.size > reading.limit) {
    settle(this, new PayloadTooLargeError());
    // Keep the stream flowing with no listener: the rest is read and dropped, not buffered.
    this.resume();
    return;
  }
  const { chunks } = reading;
  if (chunks === undefined) reading.chunks = chunk;
  else if (Array.isArray(chunks)) chunks.push(chunk);
  else reading.chunks = [chunks, chunk];
}

function onEnd(this: Reader): void {
  const reading = this[READING];
  if (reading === undefined) return;
  const { chunks } = reading;
  settle(this, undefined, chunks === undefined ? Buffer.alloc(0) : Array.isArray(chunks) ? Buffer.concat(chunks, reading.size) : chunks);
}

function onError(this: Reader, error: Error): void {
  settle(this, new BadRequestError('Request body could not be read', 'ERR_BAD_REQUEST', { cause: error }));
}

function onClose(this: Reader): void {
  settle(this, new BadRequestError('Request body ended before it was complete', 'ERR_BAD_REQUEST'));
}

function onTimeout(req: Reader): void {
  settle(req, new RequestTimeoutError());
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
 * `express.json({ verify: keepRawBody })` (./keep-raw-body.ts) or any such hook, or `req.body` from
 * `express.raw()`. Undefined when none is there (then nothing can be verified).
 */
export function leftRawBody(req: IncomingMessage & { body?: unknown; rawBody?: unknown }): Buffer | undefined {
  if (Buffer.isBuffer(req.rawBody)) return req.rawBody;
  if (Buffer.isBuffer(req.body)) return req.body;
  return undefined;
}
