/**
 * The body of a Web `Request`, within the body limit and timeout: refused at once when
 * Content-Length says too much; read whole when Content-Length declares a length within the limit
 * (the transport holds the body to it: node's HTTP parser, HTTP/2 framing); and otherwise read
 * chunk by chunk, stopping as soon as the count passes the limit (memory stays bounded whatever the
 * sender claims) or the time runs out.
 */
import { BadRequestError, isMarketplaceError, PayloadTooLargeError, RequestTimeoutError } from '../errors.js';

const EMPTY = new Uint8Array(0);

export async function readWebBody(request: Request, limit: number, timeoutMs: number): Promise<Uint8Array> {
  // A GET or HEAD request has no body (Fetch): nothing to read, and `request.body` is not touched,
  // which on Node bridges such as @hono/node-server would build a whole Request and a stream.
  const method = request.method;
  if (method === 'GET' || method === 'HEAD') return EMPTY;
  const declared = request.headers.get('content-length');
  if (declared !== null && Number(declared) > limit) {
    await request.body?.cancel().catch(() => undefined);
    throw new PayloadTooLargeError();
  }
  if (declared !== null && /^\d+$/.test(declared)) return readDeclared(request, limit, timeoutMs);
  const stream = request.body;
  if (stream === null) return EMPTY;
  const reader = stream.getReader();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    // Not unref'd, as node's own body read: the request in progress keeps the process up.
    timer = setTimeout(() => reject(new RequestTimeoutError()), timeoutMs);
  });
  try {
    return await Promise.race([readCapped(reader, limit), timeout]);
  } catch (error) {
    // Stop the sender: nothing more of this body is wanted.
    reader.cancel().catch(() => undefined);
    if (isMarketplaceError(error)) throw error;
    throw new BadRequestError('Request body could not be read', 'ERR_BAD_REQUEST', { cause: error });
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A body of a declared length within the limit, read whole by the host's own `arrayBuffer()` (which
 * Node bridges serve straight from the socket, without a Web stream), still held to the limit and
 * the timeout.
 */
async function readDeclared(request: Request, limit: number, timeoutMs: number): Promise<Uint8Array> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new RequestTimeoutError()), timeoutMs);
  });
  let buffer: ArrayBuffer;
  try {
    buffer = await Promise.race([request.arrayBuffer(), timeout]);
  } catch (error) {
    if (isMarketplaceError(error)) throw error;
    throw new BadRequestError('Request body could not be read', 'ERR_BAD_REQUEST', { cause: error });
  } finally {
    clearTimeout(timer);
  }
  if (buffer.byteLength > limit) throw new PayloadTooLargeError();
  return buffer.byteLength === 0 ? EMPTY : new Uint8Array(buffer);
}

async function readCapped(reader: ReadableStreamDefaultReader<Uint8Array>, limit: number): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) throw new PayloadTooLargeError();
    chunks.push(value);
  }
  if (chunks.length === 0) return EMPTY;
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
}
