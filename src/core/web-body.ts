/**
 * The body of a Web `Request`, within the body limit and timeout: refused at once when
 * Content-Length says too much, and otherwise read chunk by chunk, stopping as soon as the count
 * passes the limit (memory stays bounded whatever the sender claims) or the time runs out.
 */
import { BadRequestError, isMarketplaceError, PayloadTooLargeError, RequestTimeoutError } from '../errors.js';

const EMPTY = new Uint8Array(0);

export async function readWebBody(request: Request, limit: number, timeoutMs: number): Promise<Uint8Array> {
  const stream = request.body;
  if (stream === null) return EMPTY;
  const declared = request.headers.get('content-length');
  if (declared !== null && Number(declared) > limit) {
    await stream.cancel().catch(() => undefined);
    throw new PayloadTooLargeError();
  }
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
