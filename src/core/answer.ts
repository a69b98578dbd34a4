/**
 * Answers: what the core decides (status, JSON or text, headers, the error code for the log) and
 * how it is written out, on a node `ServerResponse` or as a Web `Response`. One home for error
 * rendering, so that every adapter answers alike.
 */
import type { ServerResponse } from 'node:http';
import { InternalError, isMarketplaceError } from '../errors.js';
import { errorSummary, type Answer } from '../idempotency/engine.js';
import type { Logger } from '../lib/logger.js';
import { ALLOW, clientError, type RoutePattern } from './routes.js';
import type { CoreAnswer } from './types.js';

export const JSON_TYPE = 'application/json; charset=utf-8';

/** The engine's answer as is. */
export function fromEngine(answer: Answer): CoreAnswer {
  return answer.body === undefined || answer.status === 204 ? { status: answer.status } : { status: answer.status, json: answer.body };
}

/** A route's answer to a method it does not serve: a JSON 405 with the route's methods in Allow. */
export function methodNotAllowed(route: RoutePattern, message = 'Method not allowed'): CoreAnswer {
  return { status: 405, json: { message }, headers: { Allow: ALLOW[route] } };
}

/**
 * Any error as the interface's JSON `{message}`: a MarketplaceError with its own status, a
 * framework's 4xx as the caller's mistake, anything else a bare 500 (logged, never sent).
 */
export function errorAnswer(error: unknown, logger: Logger): CoreAnswer {
  const known = isMarketplaceError(error) ? error : clientError(error);
  const answer = known ?? new InternalError({ cause: error });
  if (known === undefined || answer.status >= 500) logger.error({ err: errorSummary(known?.cause ?? error), code: answer.code }, 'marketplace request failed');
  // A stalled sender keeps the socket otherwise: close it once the 408 is written.
  return answer.status === 408
    ? { status: 408, json: { message: answer.message }, code: answer.code, headers: CLOSE }
    : { status: answer.status, json: { message: answer.message }, code: answer.code };
}

const CLOSE = Object.freeze({ Connection: 'close' });

// The error code of the answer written on a response, for its log line (see observe.ts). Not a
// property: a response of Express has its own prototype, and a property would copy its shape.
const answeredCodes = new WeakMap<ServerResponse, string>();

/** The error code of the answer written on `res`, if it was an error of ours. */
export function answeredCode(res: ServerResponse): string | undefined {
  return answeredCodes.get(res);
}

/** Remembers `code` as the error code of `res`'s answer (for answers written by others: Express's error handlers). */
export function noteCode(res: ServerResponse, code: string | undefined): void {
  if (code !== undefined) answeredCodes.set(res, code);
}

/**
 * Writes an answer on a node response: status, headers, `Content-Type` and `Content-Length`, body
 * (none for HEAD, which still carries the length of the body it leaves out). No ETag, no content
 * negotiation: the same on node:http, Connect, Express 4 and 5, and Fastify's raw response.
 */
export function writeAnswer(res: ServerResponse, answer: CoreAnswer, method: string): void {
  if (answer.code !== undefined) answeredCodes.set(res, answer.code);
  res.statusCode = answer.status;
  const headers = answer.headers;
  if (headers !== undefined) for (const name in headers) res.setHeader(name, headers[name]!);
  let body: string | undefined;
  if (answer.json !== undefined) {
    body = JSON.stringify(answer.json);
    res.setHeader('Content-Type', JSON_TYPE);
  } else if (answer.text !== undefined) {
    body = answer.text;
    res.setHeader('Content-Type', answer.type ?? 'text/plain; charset=utf-8');
  }
  if (body === undefined) {
    res.end();
    return;
  }
  res.setHeader('Content-Length', Buffer.byteLength(body));
  if (method === 'HEAD') res.end();
  else res.end(body, 'utf8');
}

/**
 * The same answer as a Web `Response`. Its headers go as a plain record unless one repeats
 * (Set-Cookie): a Node bridge such as @hono/node-server then writes them as they are, without a
 * `Headers` object per answer.
 */
export function toResponse(answer: CoreAnswer, method: string): Response {
  const record: Record<string, string> = {};
  let repeated: [string, string][] | undefined;
  if (answer.headers !== undefined) {
    for (const name in answer.headers) {
      // Connection is the server's business in a fetch host (and a forbidden header there).
      if (name.toLowerCase() === 'connection') continue;
      const value = answer.headers[name]!;
      if (typeof value === 'string') record[name] = value;
      else for (const one of value) (repeated ??= []).push([name, one]);
    }
  }
  let body: string | undefined;
  if (answer.json !== undefined) {
    body = JSON.stringify(answer.json);
    record['Content-Type'] = JSON_TYPE;
  } else if (answer.text !== undefined) {
    body = answer.text;
    record['Content-Type'] = answer.type ?? 'text/plain; charset=utf-8';
  }
  if (body !== undefined) record['Content-Length'] = String(Buffer.byteLength(body));
  const empty = body === undefined || method === 'HEAD' || answer.status === 204 || answer.status === 304;
  const headers = repeated === undefined ? record : [...Object.entries(record), ...repeated];
  return new Response(empty ? null : body, { status: answer.status, headers });
}
