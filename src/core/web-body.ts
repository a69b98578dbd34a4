/**
 * The body of a Web `Request`, within the body limit and timeout: refused at once when
 * Content-Length says too much, read with `arrayBuffer()` when it declares an acceptable length,
 * and chunk by chunk (stopping past the limit, memory bounded) when it declares none.
 */
import { BadRequestError, PayloadTooLargeError, RequestTimeoutError } from '../errors.js';

const EMPTY = new Uint8Array(0);

export async function readWebBody(request: Request, limit: number, timeoutMs: number): Promise<Uint8Array> {
  if (request.body === null) return EMPTY;
  const declared = request.headers.get('content-length');
  const length = declared === null ? undefined : Number(declared);
  if (length !== undefined && length > limit) {
    await request.body.cancel().catch(() => undefined);
    throw new PayloadTooLargeError();
  }
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new RequestTimeoutError()), timeoutMs);
    timer.unref();
  });
  const reading = length !== undefined && Number.isSafeInteger(length) ? request.arrayBuffer().then((buffer) => new Uint8Array(buffer)) : readCapped(request.body, limit);
  try {
    const body = await Promise.race([reading, timeout]);
    if (body.byteLength > limit) throw new PayloadTooLargeError();
    return body;
  } catch (error) {
    // Leave nothing reading in the background.
    reading.catch(() => undefined);
    if (error instanceof RequestTimeoutError || error instanceof PayloadTooLargeError) {
      await request.body.cancel().catch(() => undefined);
      throw error;
    }
    throw new BadRequestError('Request body could not be read', 'ERR_BAD_REQUEST', { cause: error });
  } finally {
    clearTimeout(timer);
  }
}

async function readCapped(stream: ReadableStream<Uint8Array>, limit: number): Promise<Uint8Array> {
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => undefined);
      throw new PayloadTooLargeError();
    }
    chunks.push(value);
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
}
