import type { IncomingMessage } from 'node:http';
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import type { Request, Response } from 'express';

const gzipAsync = promisify(gzip);

/** Content type of every JSON answer unless a route needs the exact OAuth spelling. */
const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

/**
 * Whether the client accepts a gzip body (RFC 9110 §12.5.3): an explicit `gzip`/`x-gzip` coding with a
 * non-zero weight wins; otherwise `*` with a non-zero weight; `identity` alone, or none, means no.
 */
export function acceptsGzip(header: string | undefined): boolean {
  if (header === undefined) return false;
  let gzipWeight: number | undefined;
  let anyWeight: number | undefined;
  for (const part of header.split(',')) {
    const [rawCoding = '', ...params] = part.split(';');
    const coding = rawCoding.trim().toLowerCase();
    let weight = 1;
    for (const param of params) {
      const [name = '', value = ''] = param.split('=');
      if (name.trim().toLowerCase() === 'q') {
        const parsed = Number(value.trim());
        weight = Number.isFinite(parsed) ? parsed : 0;
      }
    }
    if (coding === 'gzip' || coding === 'x-gzip') gzipWeight = Math.max(gzipWeight ?? 0, weight);
    else if (coding === '*') anyWeight = weight;
  }
  if (gzipWeight !== undefined) return gzipWeight > 0;
  return (anyWeight ?? 0) > 0;
}

export interface SendJsonOptions {
  contentType?: string;
  headers?: Record<string, string>;
}

/**
 * Answers JSON, gzip-compressed when the request asks for it (the marketplace sends
 * `Accept-Encoding: gzip`). Compression is asynchronous so a large answer does not block the loop.
 */
export async function sendJson(req: Request, res: Response, status: number, body: unknown, options: SendJsonOptions = {}): Promise<void> {
  const payload = Buffer.from(JSON.stringify(body), 'utf8');
  res.status(status);
  res.setHeader('Content-Type', options.contentType ?? JSON_CONTENT_TYPE);
  for (const [name, value] of Object.entries(options.headers ?? {})) res.setHeader(name, value);
  res.vary('Accept-Encoding');
  if (acceptsGzip(req.headers['accept-encoding'])) {
    const compressed = await gzipAsync(payload);
    res.setHeader('Content-Encoding', 'gzip');
    res.setHeader('Content-Length', String(compressed.length));
    res.end(compressed);
    return;
  }
  res.setHeader('Content-Length', String(payload.length));
  res.end(payload);
}

/**
 * The token of an `Authorization: Bearer <token>` header: `undefined` when the header is absent,
 * `null` when it is present but is not a well-formed bearer credential.
 */
export function bearerToken(req: IncomingMessage): string | null | undefined {
  const header = req.headers.authorization;
  if (header === undefined) return undefined;
  // Any visible characters: operators choose the token, and RFC 6750's b64token alphabet is too narrow for some.
  const match = /^Bearer +(\S+) *$/i.exec(header);
  return match?.[1] ?? null;
}

/**
 * The query string as sent, parsed independently of the host app's `query parser` setting, so that a
 * repeated parameter is seen (and refused) rather than silently turned into an array or an object.
 */
export function searchParams(req: Request): URLSearchParams {
  const url = req.originalUrl;
  const index = url.indexOf('?');
  return new URLSearchParams(index === -1 ? '' : url.slice(index + 1));
}
