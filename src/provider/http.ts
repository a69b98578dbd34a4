import type { NextFunction, Request, Response, Router } from 'express';
import { InternalError, isMarketplaceError, MarketplaceError } from '../errors.js';
import { errorSummary, type Answer } from '../idempotency/engine.js';
import { truncateForLog, type Logger } from '../lib/logger.js';
import { noInstrumentation, type Instrumentation } from '../observability/hooks.js';

/**
 * The provider routes' HTTP edge: rendering answers and errors, and the one log line per request.
 * Kept apart from the route table so that logging and error rendering have one home.
 */

export function send(res: Response, answer: Answer): void {
  if (answer.body === undefined || answer.status === 204) {
    res.statusCode = answer.status;
    res.end();
  } else {
    sendJson(res, answer.status, answer.body);
  }
}

const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * `res.status(status).json(body)` without Express's `res.send`: no ETag (a hash of every answer, for
 * API answers no client revalidates), no content-type negotiation, the same headers otherwise. Works
 * alike on Express 4 and 5, which differ in `res.send`.
 */
export function sendJson(res: Response, status: number, body: unknown): void {
  const json = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader('Content-Type', JSON_TYPE);
  res.setHeader('Content-Length', Buffer.byteLength(json));
  // A HEAD answer carries the length of the body it leaves out.
  if (res.req.method === 'HEAD') res.end();
  else res.end(json, 'utf8');
}

const OUR_PATH = /^\/v1\/(resources|credentials|sso)(?:\/([^/?]+)(\/measures)?)?/;

/**
* The id pino-http (or any request-id middleware) gave the request, so the library's lines join the
 * app's own. pino-http sets `req.id`; a number or string is kept, anything else ignored.
 */
export function requestIdOf(req: Request): string | undefined {
  const id = (req as Request & { id?: unknown }).id;
  return typeof id === 'string' || typeof id === 'number' ? truncateForLog(String(id)) : undefined;
}

/**
 * One line per request: route pattern, id, status, reason code, latency, callback id, request id.
 * Never headers or bodies; the id and callback id come from the caller, so they are truncated.
 * And one `request` event per answered request for metrics.
 * Called with the path relative to the router's mount, by the router's own dispatch.
 */
export function requestLogger(logger: Logger, instrumentation: Instrumentation = noInstrumentation): (req: Request, res: Response, path: string) => void {
  // The request hook of the default hooks does nothing: metrics are on only when it is another.
  const measured = instrumentation.request !== noInstrumentation.request;
  return (req, res, path) => {
    const logged = logger.isLevelEnabled('info');
    // With info off and no metrics nothing is recorded: no clock, no 'finish' listener, no closure per request.
    if (!logged && !measured) return;
    const match = OUR_PATH.exec(path);
    if (match === null) return;
    const started = process.hrtime.bigint();
    const method = req.method;
    const callbackId = req.headers['x-callback-id'];
    res.on('finish', () => {
      // The pattern is built from the matched groups only, so a hostile path never becomes a label.
      const route = `/v1/${match[1]!}${match[2] === undefined ? '' : '/:id'}${match[3] ?? ''}`;
      const latencyMs = Number((process.hrtime.bigint() - started) / 1000n) / 1000;
      const code = res.locals.errorCode as string | undefined;
      if (logged) {
        logger.info({
          method,
          route,
          id: truncateForLog(match[2]),
          status: res.statusCode,
          code,
          latencyMs,
          callbackId: truncateForLog(callbackId),
          reqId: requestIdOf(req),
        }, 'marketplace request');
      }
      instrumentation.request({ route, method, status: res.statusCode, code: code ?? '', seconds: latencyMs / 1000 });
    });
  };
}

/** `/v1/resources/abc/measures` → `/v1/resources/:id/measures`: a label of few values. */

/** Renders every error as the interface's JSON `{message}`; unexpected ones as a bare 500. */
export function errorResponder(logger: Logger) {
  return (error: unknown, _req: Request, res: Response, next: NextFunction): void => {
    if (res.headersSent) {
      next(error);
      return;
    }
    const known = isMarketplaceError(error) ? error : clientError(error);
    const answer = known ?? new InternalError({ cause: error });
    if (known === undefined || answer.status >= 500) logger.error({ err: errorSummary(known?.cause ?? error), code: answer.code }, 'marketplace request failed');
    res.locals.errorCode = answer.code;
    sendJson(res, answer.status, { message: answer.message });
  };
}

/**
 * Express's own 4xx errors, raised before any handler runs (a path segment that is not valid
 * percent-encoding, `/v1/resources/%E0`), are the caller's mistake: a 500 would make the marketplace
 * retry a request that can never succeed.
 */
function clientError(error: unknown): MarketplaceError | undefined {
  const status = typeof error === 'object' && error !== null ? (error as { status?: unknown }).status : undefined;
  if (typeof status !== 'number' || !Number.isInteger(status) || status < 400 || status > 499) return undefined;
  return new MarketplaceError(status, 'ERR_BAD_REQUEST', error instanceof URIError ? NOT_PERCENT_ENCODING : 'Malformed request', { cause: error });
}

const NOT_PERCENT_ENCODING = 'Request path is not valid percent-encoding';

/**
 * A path id decoded as Express decodes route parameters; a malformed percent-encoding is answered
 * as Express's own failure to decode a parameter is (see {@link clientError}).
 */
export function decodePathId(raw: string): string {
  if (!raw.includes('%')) return raw;
  try {
    return decodeURIComponent(raw);
  } catch (error) {
    throw new MarketplaceError(400, 'ERR_BAD_REQUEST', NOT_PERCENT_ENCODING, { cause: error });
  }
}

const ROUTE_METHODS = ['get', 'put', 'patch', 'delete', 'all', 'use'] as const;

/**
 * Express 5 passes a handler's rejected promise to the error handlers; Express 4 ignores it, so
 * the request hangs and Node ends the process on the unhandled rejection. Wrapping every handler
 * registered on `router` gives both majors the Express 5 behaviour. Error handlers (four
 * parameters) are left as they are.
 */
export function catchRejections<T extends Router>(router: T): T {
  for (const method of ROUTE_METHODS) {
    const register = (router[method] as (...args: unknown[]) => unknown).bind(router);
    (router as unknown as Record<string, unknown>)[method] = (...args: unknown[]) => register(...args.map(settleToNext));
  }
  return router;
}

function settleToNext(arg: unknown): unknown {
  if (typeof arg !== 'function' || arg.length === 4) return arg;
  const handler = arg as (req: Request, res: Response, next: NextFunction) => unknown;
  // Returns nothing, so Express 5 does not also see the promise and call next twice.
  return function settled(req: Request, res: Response, next: NextFunction): void {
    const result = handler(req, res, next);
    if (typeof (result as Promise<unknown> | undefined)?.then === 'function') (result as Promise<unknown>).then(undefined, next);
  };
}
